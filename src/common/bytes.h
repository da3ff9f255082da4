// Copyright 2026 the jaccl authors.
// Little-endian integers in wire headers (handshake, TCP star frames): the
// byte order is fixed, whatever the host's.
#pragma once

#include <endian.h>

#include <cstdint>
#include <cstring>

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

}  // namespace jaccl::detail
