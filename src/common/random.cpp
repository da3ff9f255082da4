// Copyright 2026 the jaccl authors.
#include "common/random.h"

#include <openssl/rand.h>

#include "common/error.h"

namespace jaccl::detail {

void random_bytes(void* dst, size_t n) {
  if (::RAND_bytes(static_cast<unsigned char*>(dst), static_cast<int>(n)) !=
      1) {
    raise(ErrorKind::Io, "OpenSSL RAND_bytes failed");
  }
}

uint64_t random_u64() {
  uint64_t v = 0;
  random_bytes(&v, sizeof(v));
  return v;
}

}  // namespace jaccl::detail
