// Copyright 2026 the jaccl authors.
// SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104), for the job token's
// challenge and fingerprints. In-tree rather than libcrypto's: loading
// libcrypto (tens of thousands of relocations, bound at load) cost every
// rank more CPU than the rest of its start-up, which a thousand ranks on a
// few cores pay in sequence. Checked against FIPS 180-4's and RFC 4231's
// vectors (tests/unit/test_sha256.cpp).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace jaccl::detail {

using Sha256Digest = std::array<uint8_t, 32>;

class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t n);
  Sha256Digest finish();

 private:
  void block(const uint8_t* p);
  uint32_t h_[8];
  uint8_t buf_[64];
  size_t used_ = 0;
  uint64_t bytes_ = 0;
};

Sha256Digest sha256(std::string_view data);
Sha256Digest hmac_sha256(std::string_view key, std::string_view msg);

// Compares without an early exit (no timing hint of where they differ).
bool equal_in_constant_time(const uint8_t* a, const uint8_t* b, size_t n);

}  // namespace jaccl::detail
