// Copyright 2026 the jaccl authors.
#include "transport/shm_setup.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "collectives/shm_group.h"
#include "common/env.h"
#include "common/error.h"
#include "common/handshake.h"
#include "common/log.h"
#include "transport/shm_segment.h"

namespace jaccl::detail {

namespace {

size_t shm_budget_bytes(int rank) {
  const char* v = env_get(EnvVar::ShmBudget);
  if (v == nullptr) {
    return size_t(64) << 20;
  }
  char* end = nullptr;
  unsigned long long mib = std::strtoull(v, &end, 10);
  if (end == v || *end != '\0' || mib < 1 || mib > (1ull << 20)) {
    raise(ErrorKind::Config,
          std::string("JACCL_SHM_BUDGET='") + v +
              "' is not a number of MiB in 1..1048576",
          {.rank = rank});
  }
  return static_cast<size_t>(mib) << 20;
}

std::string nonce_hex() {
  Nonce n = random_nonce();
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (uint8_t b : n) {
    out += kHex[b >> 4];
    out += kHex[b & 15];
  }
  return out;
}

}  // namespace

int first_nonlocal(const std::vector<TcpCard>& cards, int me) {
  const TcpCard& mine = cards[static_cast<size_t>(me)];
  for (const TcpCard& c : cards) {
    if (c.boot_id != mine.boot_id || c.ipc_ns != mine.ipc_ns ||
        c.boot_id.empty() || c.ipc_ns.empty()) {
      return c.rank;
    }
  }
  return -1;
}

std::shared_ptr<Group> make_shm_group(const Config& cfg, SideChannel& sc,
                                      const Connections& conns,
                                      const std::vector<int>& members) {
  const int rank = cfg.get_rank();
  const int size = static_cast<int>(members.size());
  const int me = static_cast<int>(
      std::find(members.begin(), members.end(), rank) - members.begin());
  if (me == size) {
    raise(ErrorKind::Internal, "this rank is not among its host's members",
          {.rank = rank});
  }
  const int creator = members.front();
  const ShmLayout layout = ShmLayout::for_budget(size, shm_budget_bytes(rank));
  // Every rank proposes a name; each host's first member's wins. The nonce
  // keeps two jobs (and two hosts' groups) on one machine apart.
  std::string name = sc.all_gather_bytes(
      "/jaccl-" + nonce_hex())[static_cast<size_t>(creator)];
  const bool alone = size == 1;
  ShmSegment seg;
  try {
    if (rank == creator && !alone) {
      seg = ShmSegment::create(name, layout.total(), rank);
      ShmGroup::init_segment(seg.data(), layout);
    }
    sc.barrier();  // created
    if (rank != creator && !alone) {
      seg = ShmSegment::open(name, layout.total(), rank);
      auto* h = reinterpret_cast<const ShmHeader*>(seg.data());
      if (h->magic != kShmMagic || h->nranks != static_cast<uint32_t>(size) ||
          h->slot_bytes != layout.slot_bytes) {
        raise(ErrorKind::Protocol,
              "shared-memory segment layout differs from this rank's "
              "(JACCL_SHM_BUDGET must agree across ranks)",
              {.rank = rank, .address = "/dev/shm" + name});
      }
    }
    sc.barrier();  // everyone has mapped it
  } catch (...) {
    // Whoever fails removes the name, so a dead creator leaves nothing.
    if (!alone)
      ::shm_unlink(name.c_str());
    throw;
  }
  if (alone)
    return nullptr;
  ::shm_unlink(name.c_str());  // every member: covers a creator that dies now
  seg.unlink();
  if (rank == creator) {
    JACCL_LOG(Info, "rank " << rank << ": shared-memory group of " << size
                            << " ranks, " << layout.total() / 1024
                            << " KiB segment, " << layout.slot_bytes / 1024
                            << " KiB slots");
  }
  return std::make_shared<ShmGroup>(me, size, members, std::move(seg), layout,
                                    conns.state, cfg.get_op_timeout(),
                                    conns.keepalive);
}

}  // namespace jaccl::detail
