// Copyright 2026 the jaccl authors.
#include "transport/shm_segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

#include "common/error.h"
#include "common/net.h"

namespace jaccl::detail {

namespace {

void* map(int fd, size_t bytes, const std::string& name, int rank) {
  // MAP_POPULATE pre-faults: page faults on first touch cost ~11 us per 4 KiB
  // page on these VMs, which is what sinks per-call buffers elsewhere.
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_POPULATE, fd, 0);
  if (p == MAP_FAILED) {
    raise(ErrorKind::Io,
          "cannot map shared-memory segment of " + std::to_string(bytes) +
              " bytes",
          {.rank = rank, .address = "/dev/shm" + name, .sys_errno = errno});
  }
  ::madvise(p, bytes, MADV_HUGEPAGE);
  return p;
}

}  // namespace

ShmSegment::ShmSegment(ShmSegment&& o) noexcept {
  *this = std::move(o);
}

ShmSegment& ShmSegment::operator=(ShmSegment&& o) noexcept {
  if (this != &o) {
    this->~ShmSegment();
    base_ = std::exchange(o.base_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
    name_ = std::move(o.name_);
    owner_ = std::exchange(o.owner_, false);
  }
  return *this;
}

ShmSegment::~ShmSegment() {
  if (owner_) {
    unlink();
  }
  if (base_ != nullptr) {
    ::munmap(base_, bytes_);
    base_ = nullptr;
  }
}

ShmSegment ShmSegment::create(const std::string& name, size_t bytes, int rank) {
  ErrorContext ctx{.rank = rank, .address = "/dev/shm" + name};
  Fd fd(::shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (!fd.valid()) {
    ctx.sys_errno = errno;
    raise(ErrorKind::Io, "cannot create shared-memory segment", ctx);
  }
  ShmSegment seg;
  seg.name_ = name;
  seg.owner_ = true;  // unlink on any failure below
  // posix_fallocate reserves the pages now: a full /dev/shm is reported
  // here instead of as a SIGBUS on first touch.
  int rc = ::posix_fallocate(fd.get(), 0, static_cast<off_t>(bytes));
  if (rc != 0) {
    ctx.sys_errno = rc;
    raise(ErrorKind::Io,
          "cannot reserve " + std::to_string(bytes) +
              " bytes of shared memory (is /dev/shm full? see "
              "JACCL_SHM_BUDGET)",
          ctx);
  }
  seg.base_ = map(fd.get(), bytes, name, rank);
  seg.bytes_ = bytes;
  return seg;
}

ShmSegment ShmSegment::open(const std::string& name, size_t bytes, int rank) {
  ErrorContext ctx{.rank = rank, .address = "/dev/shm" + name};
  Fd fd(::shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0600));
  if (!fd.valid()) {
    ctx.sys_errno = errno;
    raise(ErrorKind::Io, "cannot open shared-memory segment", ctx);
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || static_cast<size_t>(st.st_size) < bytes) {
    raise(ErrorKind::Protocol,
          "shared-memory segment is smaller than announced (" +
              std::to_string(st.st_size) + " < " + std::to_string(bytes) + ")",
          ctx);
  }
  ShmSegment seg;
  seg.name_ = name;
  seg.base_ = map(fd.get(), bytes, name, rank);
  seg.bytes_ = bytes;
  return seg;
}

void ShmSegment::unlink() {
  if (owner_ && !name_.empty()) {
    ::shm_unlink(name_.c_str());
  }
  owner_ = false;
}

}  // namespace jaccl::detail
