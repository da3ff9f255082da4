// Copyright 2026 the jaccl authors.
#include "common/error_wire.h"

#include <algorithm>
#include <cstdint>

#include "common/bytes.h"
#include "common/error_detail.h"

namespace jaccl::detail {

namespace {

// rank i32, peer i32, errno i32, relayed_by i32, peers u32 + i32 each,
// address u32 + bytes,
// detail u32 + bytes (the context stays with the rank that added it).
void put_i32(std::string& out, int32_t v) {
  uint8_t b[4];
  put_u32(b, static_cast<uint32_t>(v));
  out.append(reinterpret_cast<const char*>(b), 4);
}

void put_text(std::string& out, std::string_view s) {
  put_i32(out, static_cast<int32_t>(s.size()));
  out.append(s);
}

std::string encode(const ErrorInfo& info) {
  std::string out;
  put_i32(out, info.rank);
  put_i32(out, info.peer);
  put_i32(out, info.sys_errno);
  put_i32(out, info.relayed_by);
  put_i32(out, static_cast<int32_t>(info.peers.size()));
  for (int r : info.peers) {
    put_i32(out, r);
  }
  put_text(out, info.address);
  put_text(out, info.detail);
  return out;
}

struct Reader {
  std::string_view s;
  bool ok = true;
  uint32_t u32() {
    if (s.size() < 4) {
      ok = false;
      return 0;
    }
    uint32_t v = get_u32(reinterpret_cast<const uint8_t*>(s.data()));
    s.remove_prefix(4);
    return v;
  }
  int32_t i32() { return static_cast<int32_t>(u32()); }
  std::string text() {
    const uint32_t n = u32();
    if (!ok || n > s.size()) {
      ok = false;
      return {};
    }
    std::string v(s.substr(0, n));
    s.remove_prefix(n);
    return v;
  }
};

}  // namespace

std::string encode_error_info(const ErrorInfo& info, size_t max_bytes) {
  std::string out = encode(info);
  if (out.size() <= max_bytes) {
    return out;
  }
  ErrorInfo small = info;
  small.peers.clear();
  if (small.peer >= 0) {
    small.peers.push_back(small.peer);
  }
  small.address = small.address.substr(0, 256);
  small.detail.clear();
  const size_t room = max_bytes - std::min(max_bytes, encode(small).size());
  // Cut the text, not an escape: a lone brace would be read as text anyway.
  small.detail =
      escape_detail(render_detail(info.detail, info.peers).substr(0, room / 2));
  return encode(small);
}

std::optional<ErrorInfo> decode_error_info(std::string_view bytes) {
  Reader in{bytes};
  ErrorInfo info;
  info.rank = in.i32();
  info.peer = in.i32();
  info.sys_errno = in.i32();
  info.relayed_by = in.i32();
  const uint32_t n = in.u32();
  if (!in.ok || n > in.s.size() / 4) {
    return std::nullopt;
  }
  info.peers.reserve(n);
  for (uint32_t i = 0; i < n; ++i) {
    info.peers.push_back(in.i32());
  }
  info.address = in.text();
  info.detail = in.text();
  if (!in.ok || !in.s.empty()) {
    return std::nullopt;
  }
  return info;
}

}  // namespace jaccl::detail
