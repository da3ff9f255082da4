// Copyright 2026 the jaccl authors.
// Memory registration for one endpoint (see ofi_mr.h for the design).
#include "transport/ofi/ofi_mr.h"

#if JACCL_HAVE_OFI

#include <cstdlib>
#include <cstring>
#include <sstream>

#include "common/error.h"

namespace jaccl::detail::ofi {

Registrar::Registrar(DomainState& d, fid_ep* ep) : d_(d), ep_(ep) {
  active_ = d.registers;
  if (!active_) {
    return;
  }
  size_t bytes = kSlotBytes * kSlots;
  pool_ = static_cast<char*>(std::aligned_alloc(4096, bytes));
  if (pool_ == nullptr) {
    raise(ErrorKind::Io,
          "cannot allocate " + std::to_string(bytes) +
              " bytes of ofi bounce buffers",
          {.rank = d.opts.rank, .sys_errno = ENOMEM});
  }
  std::memset(pool_, 0, bytes);  // FI_MR_ALLOCATED: backed before registering
  try {
    pool_mr_ = register_range(pool_, bytes, FI_SEND | FI_RECV);
  } catch (...) {
    std::free(pool_);
    throw;
  }
  pool_desc_ = fi_mr_desc(pool_mr_);
  free_.reserve(kSlots);
  for (int s = kSlots - 1; s >= 0; --s) {
    free_.push_back(s);
  }
}

void Registrar::close_mrs() {
  for (fid_mr* mr : live_) {
    fi_close(&mr->fid);
  }
  live_.clear();
  if (pool_mr_ != nullptr) {
    fi_close(&pool_mr_->fid);
    pool_mr_ = nullptr;
  }
}

Registrar::~Registrar() {
  close_mrs();
  std::free(pool_);
}

int Registrar::take(size_t len) {
  if (len > kSlotBytes || free_.empty()) {
    return -1;
  }
  int s = free_.back();
  free_.pop_back();
  return s;
}

void Registrar::release(int slot) {
  free_.push_back(slot);
}

fid_mr* Registrar::register_range(const void* buf, size_t len,
                                  uint64_t access) {
  uint64_t key = (d_.mr_mode & FI_MR_PROV_KEY) != 0 ? 0 : d_.next_key++;
  fid_mr* mr = nullptr;
  int rc = fi_mr_reg(d_.domain, buf, len, access, 0, key, 0, &mr, nullptr);
  const char* step = "fi_mr_reg";
  if (rc == 0 && (d_.mr_mode & FI_MR_ENDPOINT) != 0) {
    rc = fi_mr_bind(mr, &ep_->fid, 0);
    step = "fi_mr_bind";
    if (rc == 0) {
      rc = fi_mr_enable(mr);
      step = "fi_mr_enable";
    }
  }
  if (rc != 0) {
    if (mr != nullptr) {
      fi_close(&mr->fid);
    }
    std::ostringstream what;
    what << "registering " << len << " bytes at " << buf
         << " with ofi provider " << d_.info->fabric_attr->prov_name
         << " failed (" << step << "): " << fi_text(rc);
    raise(ErrorKind::Io, what.str(), {.rank = d_.opts.rank});
  }
  return mr;
}

fid_mr* Registrar::reg(const void* buf, size_t len, uint64_t access) {
  fid_mr* mr = register_range(buf, len, access);
  live_.insert(mr);
  return mr;
}

void Registrar::dereg(fid_mr* mr) {
  live_.erase(mr);
  fi_close(&mr->fid);
}

}  // namespace jaccl::detail::ofi

#endif  // JACCL_HAVE_OFI
