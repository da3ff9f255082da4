// Copyright 2026 the jaccl authors.
// libFuzzer target for the TCP card decoder (src/transport/tcp_card.cpp
// decode_card): the card a peer publishes through the side channel. Oracles:
// bad bytes are a ProtocolError naming the publishing rank, never a crash or
// another exception; a card that decodes re-encodes to one that decodes to
// the same fields.
#include <cstdint>
#include <string>
#include <string_view>

#include "common/error.h"
#include "transport/tcp_card.h"

namespace d = jaccl::detail;

namespace {

bool same(const d::TcpCard& a, const d::TcpCard& b) {
  return a.rank == b.rank && a.addresses == b.addresses && a.port == b.port &&
         a.wires == b.wires && a.hostname == b.hostname &&
         a.boot_id == b.boot_id && a.ipc_ns == b.ipc_ns &&
         a.net_ns == b.net_ns && a.pid == b.pid;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) {
    return 0;
  }
  // First byte: the rank the card is attributed to (seeds publish rank 1).
  const int from = data[0] % 8;
  const std::string_view bytes(reinterpret_cast<const char*>(data) + 1,
                               size - 1);
  try {
    d::TcpCard card = d::decode_card(bytes, from, /*me=*/0);
    if (card.rank != from) {
      __builtin_trap();
    }
    d::TcpCard again = d::decode_card(d::encode_card(card), from, 0);
    if (!same(card, again)) {
      __builtin_trap();
    }
    (void)card.describe();
  } catch (const jaccl::Error& e) {
    const std::string what = e.what();
    if (e.kind() != jaccl::ErrorKind::Protocol ||
        what.find("rank " + std::to_string(from)) == std::string::npos) {
      __builtin_trap();
    }
  }
  return 0;
}
