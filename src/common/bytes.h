// Copyright 2026 the jaccl authors.
// Little-endian integers in wire headers (handshake, TCP star frames): the
// byte order is fixed, whatever the host's. And bytes as hex, for names.
#pragma once

#include <endian.h>

#include <cstdint>
#include <cstring>
#include <string>

namespace jaccl::detail {

inline void put_u16(uint8_t* p, uint16_t v) {
  v = htole16(v);
  std::memcpy(p, &v, sizeof(v));
}

inline void put_u32(uint8_t* p, uint32_t v) {
  v = htole32(v);
  std::memcpy(p, &v, sizeof(v));
}

inline void put_u64(uint8_t* p, uint64_t v) {
  v = htole64(v);
  std::memcpy(p, &v, sizeof(v));
}

inline uint16_t get_u16(const uint8_t* p) {
  uint16_t v = 0;
  std::memcpy(&v, p, sizeof(v));
  return le16toh(v);
}

inline uint32_t get_u32(const uint8_t* p) {
  uint32_t v = 0;
  std::memcpy(&v, p, sizeof(v));
  return le32toh(v);
}

inline uint64_t get_u64(const uint8_t* p) {
  uint64_t v = 0;
  std::memcpy(&v, p, sizeof(v));
  return le64toh(v);
}

// Lower-case hex of n bytes ("0a1b...").
inline std::string to_hex(const uint8_t* p, size_t n) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * n);
  for (size_t i = 0; i < n; ++i) {
    out += kHex[p[i] >> 4];
    out += kHex[p[i] & 15];
  }
  return out;
}

}  // namespace jaccl::detail
