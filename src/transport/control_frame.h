// Copyright 2026 the jaccl authors.
// The liveness monitor's control frames (12-byte header, little endian:
// type u8, kind u8, magic u16, root rank i32, body length u32, then the
// body). What each type means is in transport/liveness.h. The magic's low
// byte counts the monitors a connection has had (LivenessMonitor::hand_off:
// a shrunk group's monitor speaks one generation up), so that a monitor
// taking a connection over tells its predecessors' frames from its peer's
// successor's without a marker frame on every connection.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "common/bytes.h"

namespace jaccl::detail {

enum CtlType : uint8_t {
  kCtlHeartbeat = 1,
  kCtlGoodbye = 2,
  kCtlAbort = 3,
  kCtlDead = 4,
  kCtlRevoke = 5,
  kCtlVote = 6,
  kCtlDecide = 7,
  kCtlMail = 8,
};
inline constexpr CtlType kCtlLast = kCtlMail;

inline constexpr uint16_t kCtlMagic = 0xC71A;  // generation 0's

// The magic of generation gen's frames, and the generation of a magic
// (false: not a control frame's).
inline uint16_t ctl_magic(uint8_t gen) {
  return static_cast<uint16_t>((kCtlMagic & 0xFF00) |
                               static_cast<uint8_t>((kCtlMagic & 0xFF) + gen));
}
inline bool ctl_generation(uint16_t magic, uint8_t* gen) {
  if ((magic & 0xFF00) != (kCtlMagic & 0xFF00)) {
    return false;
  }
  *gen = static_cast<uint8_t>((magic & 0xFF) - (kCtlMagic & 0xFF));
  return true;
}
inline constexpr size_t kCtlHeader = 12;
inline constexpr uint32_t kCtlMaxText = 16384;      // an ABORT's error
inline constexpr uint32_t kCtlMaxMail = 64u << 20;  // one side-channel call
inline constexpr size_t kCtlMaxQueued =
    64 * 1024;  // heartbeats beyond: dropped

// The longest body a frame of this type may carry.
inline uint32_t ctl_max_body(uint8_t type) {
  switch (type) {
    case kCtlMail:
      return kCtlMaxMail;
    case kCtlVote:
    case kCtlDecide:
      return 2 * (9 + 2 * 65536);  // two decisions of up to 65536 ranks
    default:
      return kCtlMaxText;
  }
}

inline std::string ctl_frame(uint8_t type, uint8_t kind, int32_t root,
                             std::string_view body, uint8_t gen = 0) {
  body = body.substr(0, ctl_max_body(type));
  std::string f(kCtlHeader + body.size(), '\0');
  auto* p = reinterpret_cast<uint8_t*>(f.data());
  p[0] = type;
  p[1] = kind;
  put_u16(p + 2, ctl_magic(gen));
  put_u32(p + 4, static_cast<uint32_t>(root));
  put_u32(p + 8, static_cast<uint32_t>(body.size()));
  if (!body.empty()) {  // an empty view may have a null data()
    std::memcpy(f.data() + kCtlHeader, body.data(), body.size());
  }
  return f;
}

}  // namespace jaccl::detail
