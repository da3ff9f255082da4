// Copyright 2026 the jaccl authors.
#include "common/shm_segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <limits>
#include <sstream>
#include <utility>

#include "common/error.h"
#include "common/read_file.h"

#ifndef MFD_NOEXEC_SEAL
#define MFD_NOEXEC_SEAL 0x0008U  // Linux 6.3; older headers lack it
#endif

namespace jaccl::detail {

namespace {

constexpr const char* kBudget = "JACCL_SHM_BUDGET";

void* map(int fd, size_t bytes, const std::string& address, int rank) {
  // No MAP_POPULATE: reserve() already allocated (and zeroed) every page,
  // the costly part (a fresh page costs microseconds); what is left
  // is a minor fault the first time this rank touches a page. Populating
  // every mapping up front made each of 64 ranks map the whole segment at
  // set-up, though each touches a small part of it.
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    raise(ErrorKind::Io,
          "cannot map shared-memory segment of " + std::to_string(bytes) +
              " bytes",
          {.rank = rank, .address = address, .sys_errno = errno});
  }
  ::madvise(p, bytes, MADV_HUGEPAGE);
  return p;
}

[[noreturn]] void no_room(size_t bytes, size_t room, const char* where,
                          ErrorContext ctx, const char* sized_by) {
  raise(ErrorKind::Io,
        "cannot reserve " + std::to_string(bytes) +
            " bytes of shared memory (sized by " + sized_by + "): only " +
            std::to_string(room) + " bytes " + where,
        ctx);
}

// Refuses up front what cannot fit: on an unlimited tmpfs (memfd, or a
// /dev/shm without size=) fallocate would not fail but wake the OOM killer.
void check_room(size_t bytes, const ErrorContext& ctx,
                const char* sized_by = kBudget) {
  size_t room = shm_available_bytes();
  if (room != 0 && bytes > room) {
    no_room(bytes, room, "of memory are available", ctx, sized_by);
  }
}

void reserve(int fd, size_t bytes, size_t reserve_bytes,
             const ErrorContext& ctx, const char* sized_by = kBudget) {
  // The size first when only a part is reserved (the rest stays a hole).
  if (reserve_bytes < bytes && ::ftruncate(fd, static_cast<off_t>(bytes))) {
    ErrorContext c = ctx;
    c.sys_errno = errno;
    raise(ErrorKind::Io,
          "cannot size the shared-memory segment to " + std::to_string(bytes) +
              " bytes",
          c);
  }
  // Reserving the pages now turns a full /dev/shm or memory into this error
  // instead of a SIGBUS on first touch.
  int rc = ::posix_fallocate(fd, 0, static_cast<off_t>(reserve_bytes));
  if (rc != 0) {
    ErrorContext c = ctx;
    c.sys_errno = rc;
    raise(ErrorKind::Io,
          "cannot reserve " + std::to_string(reserve_bytes) +
              " bytes of shared memory (sized by " + sized_by +
              "; is /dev/shm or memory full?)",
          c);
  }
}

// "key:   123 kB" lines of /proc/meminfo, in bytes (0 if absent).
size_t meminfo_bytes(const std::string& text, const std::string& key) {
  auto at = text.find("\n" + key + ":");
  if (at == std::string::npos) {
    return 0;
  }
  std::istringstream in(text.substr(at + key.size() + 2));
  unsigned long long kb = 0;
  in >> kb;
  return static_cast<size_t>(kb) * 1024;
}

// Room under one cgroup's limit (max if unlimited or unreadable). Usage
// counts page cache; its inactive part is reclaimable, so it is room too
// (the kernel's own "working set" figure does the same).
size_t room_under(const std::string& dir, const char* max_file,
                  const char* cur_file, const std::string& inactive_key) {
  std::string max = read_file_or_empty(dir + max_file),
              cur = read_file_or_empty(dir + cur_file);
  if (max.empty() || cur.empty() || max.rfind("max", 0) == 0) {
    return std::numeric_limits<size_t>::max();
  }
  unsigned long long m = std::stoull(max), c = std::stoull(cur);
  std::string stat = "\n" + read_file_or_empty(dir + "/memory.stat");
  auto at = stat.find("\n" + inactive_key + " ");
  if (at != std::string::npos) {
    unsigned long long inactive =
        std::stoull(stat.substr(at + inactive_key.size() + 2));
    c = c > inactive ? c - inactive : 0;
  }
  return m > c ? static_cast<size_t>(m - c) : 0;
}

// Room left under this process's cgroup memory limits (v2, or the v1
// memory controller), checking every ancestor: the tightest may sit higher.
size_t cgroup_room() {
  size_t room = std::numeric_limits<size_t>::max();
  std::istringstream lines(read_file_or_empty("/proc/self/cgroup"));
  std::string line;
  while (std::getline(lines, line)) {
    const bool v2 = line.rfind("0::", 0) == 0;
    if (!v2 && line.find(":memory:") == std::string::npos) {
      continue;
    }
    std::string path = line.substr(line.find(':', line.find(':') + 1) + 1);
    while (true) {
      std::string dir = (v2 ? "/sys/fs/cgroup" : "/sys/fs/cgroup/memory") +
                        (path == "/" ? "" : path);
      room = std::min(room, v2 ? room_under(dir, "/memory.max",
                                            "/memory.current", "inactive_file")
                               : room_under(dir, "/memory.limit_in_bytes",
                                            "/memory.usage_in_bytes",
                                            "total_inactive_file"));
      if (path.empty() || path == "/") {
        break;
      }
      path = path.substr(0, path.rfind('/'));
    }
  }
  return room;
}

}  // namespace

Fd open_memfd_of(int pid, int fd_no, const std::string& label,
                 std::string* why) {
  const std::string path =
      "/proc/" + std::to_string(pid) + "/fd/" + std::to_string(fd_no);
  // The link's name says which memfd it is (its label is unique).
  const std::string want = "/memfd:" + label + " (deleted)";
  const std::string got = read_link_or_empty(path);
  if (got != want) {
    *why =
        got.empty() ? "unreadable" : "'" + got + "', expected '" + want + "'";
    if (!got.empty()) {
      errno = 0;
    }
    return Fd();
  }
  Fd fd(::open(path.c_str(), O_RDWR | O_CLOEXEC));
  if (!fd.valid()) {
    *why = "cannot be opened";
  }
  return fd;
}

size_t shm_available_bytes() {
  std::string info = "\n" + read_file_or_empty("/proc/meminfo");
  size_t avail = meminfo_bytes(info, "MemAvailable");
  if (avail == 0) {
    return 0;
  }
  avail += meminfo_bytes(info, "SwapFree");
  try {
    return std::min(avail, cgroup_room());
  } catch (const std::exception&) {
    return avail;  // an unreadable cgroup file: the machine's figure
  }
}

ShmSegment::ShmSegment(ShmSegment&& o) noexcept {
  *this = std::move(o);
}

ShmSegment& ShmSegment::operator=(ShmSegment&& o) noexcept {
  if (this != &o) {
    release();  // not ~ShmSegment(): name_ and fd_ must stay alive objects
    base_ = std::exchange(o.base_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
    name_ = std::move(o.name_);
    owner_ = std::exchange(o.owner_, false);
    fd_ = std::move(o.fd_);
  }
  return *this;
}

ShmSegment::~ShmSegment() {
  release();
}

void ShmSegment::release() noexcept {
  if (owner_) {
    unlink();
  }
  if (base_ != nullptr) {
    ::munmap(base_, bytes_);
    base_ = nullptr;
    bytes_ = 0;
  }
  fd_.reset();
}

ShmSegment ShmSegment::create(const std::string& name, size_t bytes, int rank,
                              size_t reserve_bytes) {
  ErrorContext ctx{.rank = rank, .address = "/dev/shm" + name};
  struct statvfs vfs {};
  if (::statvfs("/dev/shm", &vfs) == 0) {
    size_t free_bytes = static_cast<size_t>(vfs.f_bavail) * vfs.f_frsize;
    if (bytes > free_bytes) {
      no_room(bytes, free_bytes, "are free in /dev/shm", ctx, kBudget);
    }
  }
  check_room(bytes, ctx);
  Fd fd(::shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (!fd.valid()) {
    ctx.sys_errno = errno;
    raise(ErrorKind::Io, "cannot create shared-memory segment", ctx);
  }
  ShmSegment seg;
  seg.name_ = name;
  seg.owner_ = true;  // unlink on any failure below
  reserve(fd.get(), bytes, std::min(bytes, reserve_bytes), ctx);
  seg.base_ = map(fd.get(), bytes, ctx.address, rank);
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
              std::to_string(st.st_size) + " < " + std::to_string(bytes) +
              "; JACCL_SHM_BUDGET must agree across ranks)",
          ctx);
  }
  return mapped(name, fd.get(), bytes, ctx.address, rank);
}

ShmSegment ShmSegment::create_anonymous(const std::string& label, size_t bytes,
                                        int rank, size_t reserve_bytes,
                                        const char* sized_by) {
  ErrorContext ctx{.rank = rank, .address = "memfd:" + label};
  check_room(bytes, ctx, sized_by);
  // NOEXEC_SEAL: kernels with vm.memfd_noexec=2 refuse memfds that could be
  // made executable; kernels before 6.3 reject the flag (EINVAL).
  Fd fd(::memfd_create(label.c_str(),
                       MFD_CLOEXEC | MFD_ALLOW_SEALING | MFD_NOEXEC_SEAL));
  if (!fd.valid() && errno == EINVAL) {
    fd = Fd(::memfd_create(label.c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING));
  }
  if (!fd.valid()) {
    ctx.sys_errno = errno;
    raise(ErrorKind::Io, "cannot create anonymous shared-memory segment", ctx);
  }
  reserve(fd.get(), bytes, std::min(bytes, reserve_bytes), ctx, sized_by);
  // Sealed, no rank (nor anyone it leaks to) can shrink the file under the
  // others' mappings, which would SIGBUS them.
  if (::fcntl(fd.get(), F_ADD_SEALS,
              F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    ctx.sys_errno = errno;
    raise(ErrorKind::Io, "cannot seal the shared-memory segment", ctx);
  }
  ShmSegment seg = mapped(label, fd.get(), bytes, ctx.address, rank);
  seg.fd_ = std::move(fd);
  return seg;
}

ShmSegment ShmSegment::adopt(Fd fd, size_t bytes, int rank,
                             const std::string& label, const char* sized_by) {
  ErrorContext ctx{.rank = rank, .address = "memfd:" + label};
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
    raise(ErrorKind::Protocol,
          "the descriptor handed over is not a shared-memory file", ctx);
  }
  if (static_cast<size_t>(st.st_size) != bytes) {
    raise(ErrorKind::Protocol,
          "shared-memory segment is " + std::to_string(st.st_size) +
              " bytes but this rank's layout needs " + std::to_string(bytes) +
              " (" + sized_by + " must agree across ranks)",
          ctx);
  }
  int seals = ::fcntl(fd.get(), F_GET_SEALS);
  if (seals < 0 || (seals & F_SEAL_SHRINK) == 0) {
    raise(ErrorKind::Protocol,
          "the shared-memory segment handed over is not sealed against "
          "shrinking",
          ctx);
  }
  // The mapping keeps the file alive; fd closes here.
  return mapped(label, fd.get(), bytes, ctx.address, rank);
}

ShmSegment ShmSegment::mapped(const std::string& name, int fd, size_t bytes,
                              const std::string& address, int rank) {
  ShmSegment seg;
  seg.name_ = name;
  seg.base_ = map(fd, bytes, address, rank);
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
