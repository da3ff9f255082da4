// Copyright 2026 the jaccl authors.
// Internal to src/transport/ofi: the libfabric pieces the domain, the
// endpoint and the registration code share. Included only by this
// directory's .cpp files and only when the build has libfabric.
#pragma once

#if JACCL_HAVE_OFI

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include <atomic>
#include <memory>
#include <string>

#include "transport/ofi/ofi_fabric.h"
#include "transport/ofi/ofi_lib.h"

namespace jaccl::detail::ofi {

// The libfabric API version jaccl asks for (the headers it was built with).
inline constexpr uint32_t kApiVersion =
    FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION);

// Every mr_mode bit jaccl knows how to honour; the provider answers with the
// subset it needs (tcp and shm: none; verbs and efa: FI_MR_LOCAL and more).
// FI_MR_VIRT_ADDR and FI_MR_PROV_KEY only shape RMA addressing and keys, which
// tagged messages do not use, but offering them lets providers that insist on
// them (efa, verbs) match at all.
inline constexpr uint64_t kMrModeOffered = FI_MR_LOCAL | FI_MR_VIRT_ADDR |
                                           FI_MR_ALLOCATED | FI_MR_PROV_KEY |
                                           FI_MR_ENDPOINT;

struct InfoFree {
  void operator()(fi_info* i) const {
    if (i != nullptr) {
      lib().freeinfo(i);  // an fi_info exists only once the library loaded
    }
  }
};
using InfoPtr = std::unique_ptr<fi_info, InfoFree>;

// Hints for reliable tagged RDM with directed receive and send-after-send
// ordering; provider/domain "" leave the choice to libfabric.
InfoPtr make_hints(const std::string& provider, const std::string& domain);
// fi_getinfo over the hints, keeping only entries whose provider name is
// exactly `provider` (case-insensitive; "" keeps all). rc is fi_getinfo's.
InfoPtr query(const std::string& provider, const std::string& domain, int* rc);
// "tcp;ofi_rxm (fabric 127.0.0.1/32, domain lo), shm (fabric shm, ...)".
std::string describe(const fi_info* list);
// fi_strerror of a positive or negative libfabric error code.
std::string fi_text(int err);

// What the endpoints of one domain share.
struct DomainState {
  InfoPtr info;  // the chosen entry (info->next cleared)
  fid_fabric* fabric = nullptr;
  fid_domain* domain = nullptr;
  Options opts;
  uint64_t mr_mode = 0;  // what the provider demands
  bool registers = false;
  std::atomic<uint64_t> next_key{1};  // requested keys (no FI_MR_PROV_KEY)
  ~DomainState();
};

}  // namespace jaccl::detail::ofi

#endif  // JACCL_HAVE_OFI
