// Copyright 2026 the jaccl authors.
// The kv:// store's messages (kv_store.h), shared by its client and server.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "common/deadline.h"
#include "common/error.h"
#include "common/net.h"

namespace jaccl::detail::kv {

inline constexpr uint32_t kMagic = 0x31564b4a;  // "JKV1"
inline constexpr uint32_t kAbsent = 0xffffffffu;
// Bounds on what a peer may make us allocate.
inline constexpr uint32_t kMaxCount = 1u << 20;
inline constexpr uint32_t kMaxString = 64u << 20;

enum class Op : uint8_t { Hello = 1, Put, Get, Del, List, Ok = 100, Err };

struct Message {
  Op op = Op::Ok;
  std::vector<std::optional<std::string>> parts;
};

inline std::string encode(const Message& m) {
  std::string out(12, '\0');
  const uint32_t count = static_cast<uint32_t>(m.parts.size());
  std::memcpy(out.data(), &kMagic, 4);
  out[4] = static_cast<char>(m.op);
  std::memcpy(out.data() + 8, &count, 4);
  for (const auto& p : m.parts) {
    const uint32_t len = p ? static_cast<uint32_t>(p->size()) : kAbsent;
    out.append(reinterpret_cast<const char*>(&len), 4);
    if (p) {
      out += *p;
    }
  }
  return out;
}

inline void send_message(int fd, const Message& m, const Deadline& dl,
                         const ErrorContext& ctx) {
  const std::string bytes = encode(m);
  send_all(fd, bytes.data(), bytes.size(), dl, ctx);
}

// Throws a ProtocolError (naming ctx) on anything malformed.
inline Message recv_message(int fd, const Deadline& dl,
                            const ErrorContext& ctx) {
  char head[12];
  recv_all(fd, head, sizeof(head), dl, ctx);
  uint32_t magic = 0, count = 0;
  std::memcpy(&magic, head, 4);
  std::memcpy(&count, head + 8, 4);
  if (magic != kMagic || count > kMaxCount) {
    raise(ErrorKind::Protocol, "not a kv:// store message", ctx);
  }
  Message m;
  m.op = static_cast<Op>(static_cast<uint8_t>(head[4]));
  m.parts.reserve(count);
  for (uint32_t i = 0; i < count; ++i) {
    uint32_t len = 0;
    recv_all(fd, &len, 4, dl, ctx);
    if (len == kAbsent) {
      m.parts.emplace_back();
      continue;
    }
    if (len > kMaxString) {
      raise(ErrorKind::Protocol,
            "a kv:// store message part of " + std::to_string(len) + " bytes",
            ctx);
    }
    std::string s(len, '\0');
    recv_all(fd, s.data(), len, dl, ctx);
    m.parts.emplace_back(std::move(s));
  }
  return m;
}

}  // namespace jaccl::detail::kv
