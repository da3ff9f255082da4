// Copyright 2026 the jaccl authors.
// Memory registration for one endpoint, when the provider's mr_mode demands
// it (FI_MR_LOCAL: verbs, efa) or the force_register test knob asks for it.
//
// Why bounce slots plus per-operation registration, and no cache of user
// ranges of our own:
// - Messages up to kSlotBytes are copied through pre-registered bounce slots
//   (one registration per endpoint, made once). The copy costs less than any
//   registration lookup at these sizes and cannot go stale.
// - Larger messages register the user range for the one operation and
//   deregister it at completion. A cache of user ranges is only safe if
//   something tells it when memory is unmapped or madvise'd away (the pages
//   behind a reused address change, and a pinned registration would keep
//   pointing at the old ones: silent corruption). libfabric already has that
//   machinery: verbs and efa route fi_mr_reg through its MR cache with its
//   memory monitors (userfaultfd / memhooks, FI_MR_CACHE_MONITOR), so a
//   repeated registration of the same buffer there is a lookup, and it is
//   invalidated correctly when the buffer is freed. A second cache above it
//   could only add the staleness it avoids. tcp and shm (force_register) have
//   no such cache; their fi_mr_reg is a table insert (measured in
//   bench/sections/ofi.py: forced registration costs little bandwidth).
// - FI_MR_ENDPOINT: every registration is bound to this endpoint and
//   enabled; FI_MR_PROV_KEY unset: keys are requested from the domain's
//   counter so they are unique within it; FI_MR_ALLOCATED: the slots are
//   touched before registration (user buffers are allocated by definition);
//   FI_MR_VIRT_ADDR only concerns RMA, which this layer does not issue.
#pragma once

#if JACCL_HAVE_OFI

#include <cstddef>
#include <unordered_set>
#include <vector>

#include "transport/ofi/ofi_impl.h"

namespace jaccl::detail::ofi {

class Registrar {
 public:
  static constexpr size_t kSlotBytes = 64 * 1024;
  static constexpr int kSlots = 32;

  // Allocates and registers the bounce slots when the domain registers.
  Registrar(DomainState& d, fid_ep* ep);
  ~Registrar();
  // Closes every registration (before the endpoint they may be bound to);
  // the bounce memory stays until destruction.
  void close_mrs();
  Registrar(const Registrar&) = delete;
  Registrar& operator=(const Registrar&) = delete;

  bool active() const { return active_; }
  // A free bounce slot for a message of len bytes, or -1 (too long, or all
  // slots are in flight: then register instead).
  int take(size_t len);
  void release(int slot);
  void* slot_buf(int slot) const { return pool_ + slot * kSlotBytes; }
  void* slot_desc() const { return pool_desc_; }

  // Registers [buf, buf+len) for one operation (access FI_SEND or FI_RECV).
  fid_mr* reg(const void* buf, size_t len, uint64_t access);
  void dereg(fid_mr* mr);

 private:
  fid_mr* register_range(const void* buf, size_t len, uint64_t access);

  DomainState& d_;
  fid_ep* ep_;
  bool active_ = false;
  char* pool_ = nullptr;
  fid_mr* pool_mr_ = nullptr;
  void* pool_desc_ = nullptr;
  std::vector<int> free_;
  std::unordered_set<fid_mr*> live_;  // per-operation registrations
};

}  // namespace jaccl::detail::ofi

#endif  // JACCL_HAVE_OFI
