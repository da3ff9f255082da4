// Copyright 2026 the jaccl authors.
#include "common/random.h"

#include <sys/random.h>

#include <cerrno>

#include "common/error.h"

namespace jaccl::detail {

void random_bytes(void* dst, size_t n) {
  auto* p = static_cast<unsigned char*>(dst);
  while (n > 0) {
    // The kernel's CSPRNG: no state of ours to seed. (OpenSSL's RAND_bytes
    // seeded its DRBG on the first call, 1-3 ms of every init.)
    ssize_t got = ::getrandom(p, n, 0);
    if (got < 0) {
      if (errno == EINTR) {
        continue;
      }
      raise(ErrorKind::Io, "getrandom failed", {.sys_errno = errno});
    }
    p += got;
    n -= static_cast<size_t>(got);
  }
}

uint64_t random_u64() {
  uint64_t v = 0;
  random_bytes(&v, sizeof(v));
  return v;
}

}  // namespace jaccl::detail
