// Copyright 2026 the jaccl authors.
#include "common/crypto.h"

#include <dlfcn.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <string>

#include "common/error.h"

#ifndef JACCL_LIBCRYPTO
#error "libcrypto's file name (a compile definition) comes from CMakeLists.txt"
#endif

namespace jaccl::detail {

namespace {

// Types from OpenSSL's own declarations, so the compiler checks every call.
struct Crypto {
  decltype(&::EVP_sha256) evp_sha256 = nullptr;
  decltype(&::EVP_Digest) evp_digest = nullptr;
  decltype(&::HMAC) hmac = nullptr;
  decltype(&::CRYPTO_memcmp) memcmp = nullptr;
};

template <typename F>
void bind(void* lib, const char* symbol, F& out) {
  out = reinterpret_cast<F>(::dlsym(lib, symbol));
  if (out == nullptr) {
    raise(ErrorKind::Config, std::string(JACCL_LIBCRYPTO) + " has no " +
                                 symbol + " (needed for JACCL_TOKEN)");
  }
}

Crypto open_libcrypto() {
  // RTLD_LOCAL keeps its symbols out of the global namespace; never closed.
  void* lib = ::dlopen(JACCL_LIBCRYPTO, RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* why = ::dlerror();
    raise(ErrorKind::Config, std::string("cannot load ") + JACCL_LIBCRYPTO +
                                 ", which a job token (JACCL_TOKEN) needs: " +
                                 (why != nullptr ? why : "dlopen failed") +
                                 " (install libssl3, or run without a token)");
  }
  Crypto c;
  bind(lib, "EVP_sha256", c.evp_sha256);
  bind(lib, "EVP_Digest", c.evp_digest);
  bind(lib, "HMAC", c.hmac);
  bind(lib, "CRYPTO_memcmp", c.memcmp);
  return c;
}

// Loaded once, thread-safe; a failed load throws and the next call retries.
const Crypto& crypto() {
  static const Crypto c = open_libcrypto();
  return c;
}

}  // namespace

const char* libcrypto_name() {
  return JACCL_LIBCRYPTO;
}

Sha256Digest sha256(std::string_view data) {
  const Crypto& c = crypto();
  Sha256Digest md{};
  unsigned len = 0;
  if (c.evp_digest(data.data(), data.size(), md.data(), &len, c.evp_sha256(),
                   nullptr) != 1 ||
      len != md.size()) {
    raise(ErrorKind::Internal, "EVP_Digest(SHA-256) failed");
  }
  return md;
}

Sha256Digest hmac_sha256(std::string_view key, std::string_view msg) {
  const Crypto& c = crypto();
  // HMAC wants a non-null key pointer even for an empty key.
  static const unsigned char kEmpty = 0;
  Sha256Digest out{};
  unsigned len = 0;
  if (c.hmac(c.evp_sha256(),
             key.empty() ? &kEmpty : static_cast<const void*>(key.data()),
             static_cast<int>(key.size()),
             reinterpret_cast<const unsigned char*>(msg.data()), msg.size(),
             out.data(), &len) == nullptr ||
      len != out.size()) {
    raise(ErrorKind::Internal, "HMAC(SHA-256) failed");
  }
  return out;
}

bool equal_in_constant_time(const uint8_t* a, const uint8_t* b, size_t n) {
  return crypto().memcmp(a, b, n) == 0;
}

}  // namespace jaccl::detail
