// Copyright 2026 the jaccl authors.
#include "common/crypto.h"

#include <dlfcn.h>
#include <nettle/hmac.h>
#include <nettle/memops.h>
#include <nettle/sha2.h>

#include <string>

#include "common/error.h"

#ifndef JACCL_CRYPTO_LIBRARY
#error "libnettle's file name (a compile definition) comes from CMakeLists.txt"
#endif

namespace jaccl::detail {

static_assert(SHA256_DIGEST_SIZE == std::tuple_size_v<Sha256Digest>);

namespace {

// Types from Nettle's own declarations, so the compiler checks every call.
struct Nettle {
  decltype(&::nettle_sha256_init) sha256_init = nullptr;
  decltype(&::nettle_sha256_update) sha256_update = nullptr;
  decltype(&::nettle_sha256_digest) sha256_digest = nullptr;
  decltype(&::nettle_hmac_sha256_set_key) hmac_set_key = nullptr;
  decltype(&::nettle_hmac_sha256_update) hmac_update = nullptr;
  decltype(&::nettle_hmac_sha256_digest) hmac_digest = nullptr;
  decltype(&::nettle_memeql_sec) memeql_sec = nullptr;
};

template <typename F>
void bind(void* lib, const char* symbol, F& out) {
  out = reinterpret_cast<F>(::dlsym(lib, symbol));
  if (out == nullptr) {
    raise(ErrorKind::Config, std::string(JACCL_CRYPTO_LIBRARY) + " has no " +
                                 symbol + " (needed for JACCL_TOKEN)");
  }
}

Nettle open_nettle() {
  // RTLD_LOCAL keeps its symbols out of the global namespace; never closed.
  void* lib = ::dlopen(JACCL_CRYPTO_LIBRARY, RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* why = ::dlerror();
    raise(ErrorKind::Config,
          std::string("cannot load ") + JACCL_CRYPTO_LIBRARY +
              ", which a job token (JACCL_TOKEN) needs: " +
              (why != nullptr ? why : "dlopen failed") +
              " (install libnettle8, or run without a token)");
  }
  Nettle n;
  bind(lib, "nettle_sha256_init", n.sha256_init);
  bind(lib, "nettle_sha256_update", n.sha256_update);
  bind(lib, "nettle_sha256_digest", n.sha256_digest);
  bind(lib, "nettle_hmac_sha256_set_key", n.hmac_set_key);
  bind(lib, "nettle_hmac_sha256_update", n.hmac_update);
  bind(lib, "nettle_hmac_sha256_digest", n.hmac_digest);
  bind(lib, "nettle_memeql_sec", n.memeql_sec);
  return n;
}

// Loaded once, thread-safe; a failed load throws and the next call retries.
const Nettle& nettle() {
  static const Nettle n = open_nettle();
  return n;
}

const uint8_t* bytes(std::string_view s) {
  // Never null, even for an empty view (memcpy with null is undefined).
  static const uint8_t kEmpty = 0;
  return s.empty() ? &kEmpty : reinterpret_cast<const uint8_t*>(s.data());
}

}  // namespace

const char* crypto_library_name() {
  return JACCL_CRYPTO_LIBRARY;
}

Sha256Digest sha256(std::string_view data) {
  const Nettle& n = nettle();
  sha256_ctx ctx;
  n.sha256_init(&ctx);
  n.sha256_update(&ctx, data.size(), bytes(data));
  Sha256Digest md{};
  n.sha256_digest(&ctx, md.size(), md.data());
  return md;
}

Sha256Digest hmac_sha256(std::string_view key, std::string_view msg) {
  const Nettle& n = nettle();
  hmac_sha256_ctx ctx;
  n.hmac_set_key(&ctx, key.size(), bytes(key));
  n.hmac_update(&ctx, msg.size(), bytes(msg));
  Sha256Digest out{};
  n.hmac_digest(&ctx, out.size(), out.data());
  return out;
}

bool equal_in_constant_time(const uint8_t* a, const uint8_t* b, size_t n) {
  return nettle().memeql_sec(a, b, n) != 0;
}

}  // namespace jaccl::detail
