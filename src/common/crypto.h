// Copyright 2026 the jaccl authors.
// SHA-256 and HMAC-SHA256 from GNU Nettle (libnettle), for the job token's
// fingerprint and challenge (common/handshake.h). libnettle is opened with
// dlopen on the first call instead of being linked: a job without a token
// never calls these, and every rank of a large job would pay the load. A
// missing library or symbol is a ConfigError naming both.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace jaccl::detail {

using Sha256Digest = std::array<uint8_t, 32>;

Sha256Digest sha256(std::string_view data);
Sha256Digest hmac_sha256(std::string_view key, std::string_view msg);
// nettle_memeql_sec: no early exit, so no timing hint of where a and b differ.
bool equal_in_constant_time(const uint8_t* a, const uint8_t* b, size_t n);

// The file name dlopen is given: the SONAME of the libnettle this build was
// configured with.
const char* crypto_library_name();

}  // namespace jaccl::detail
