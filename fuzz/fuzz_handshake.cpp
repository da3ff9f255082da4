// Copyright 2026 the jaccl authors.
// libFuzzer target for what the coordinator parses from strangers: the Hello
// decoder, the ServerHandshake state machine fed in fuzzer-chosen pieces over
// a socketpair (sometimes with a well-formed Hello and a correct proof, so the
// fuzzer also reaches the states after them), rank 0's admission rule, and the
// star's request/reply headers and shared-result references. Built by
// fuzz/CMakeLists.txt (-DJACCL_FUZZ=ON).
#include <fuzzer/FuzzedDataProvider.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "bootstrap/tcp_star.h"
#include "bootstrap/tcp_star_shared.h"
#include "common/handshake.h"

namespace d = jaccl::detail;

namespace {

void parse_raw(FuzzedDataProvider& fdp) {
  auto bytes = fdp.ConsumeBytes<uint8_t>(fdp.ConsumeIntegralInRange(0, 120));
  // Often start with a real magic, so the decoders get past their first check.
  const int magic = fdp.ConsumeIntegralInRange(0, 4);
  if (magic == 1 && bytes.size() >= 8) {
    std::memcpy(bytes.data(), d::encode_hello({}).data(), 8);
  } else if (magic == 2 && bytes.size() >= 4) {
    std::memcpy(bytes.data(), d::star::encode_reply({}).data(), 4);
  } else if (magic == 3 && bytes.size() >= 4) {
    std::memcpy(bytes.data(), d::star::encode_request(0).data(), 4);
  } else if (magic == 4 && bytes.size() >= 4) {
    std::memcpy(bytes.data(), d::star::encode_shared_ref({}).data(), 4);
  }
  std::string why;
  auto h = d::decode_hello(bytes, &why);
  if (h) {
    // A decoded Hello re-encodes to the same bytes (the pad word aside).
    auto again = d::encode_hello(*h);
    if (std::memcmp(again.data(), bytes.data(), 28) != 0 ||
        std::memcmp(again.data() + 32, bytes.data() + 32, 24) != 0) {
      __builtin_trap();
    }
  }
  d::star::decode_request(bytes);
  d::star::decode_reply(bytes, &why);
  if (auto ref = d::star::decode_shared_ref(bytes, &why)) {
    // A reference accepted re-encodes to the same bytes, and never points
    // outside its segment.
    if (d::star::encode_shared_ref(*ref) != bytes ||
        ref->offset + ref->length > ref->segment_bytes) {
      __builtin_trap();
    }
  }
  if (bytes.size() >= d::star::kReplyBytes) {
    d::star::decode_reply(
        std::span<const uint8_t>(bytes.data(), d::star::kReplyBytes), &why);
  }
  if (bytes.size() >= d::star::kRequestBytes) {
    d::star::decode_request(
        std::span<const uint8_t>(bytes.data(), d::star::kRequestBytes));
  }
}

d::Hello fuzzed_hello(FuzzedDataProvider& fdp) {
  d::Hello h;
  h.channel = static_cast<d::Channel>(fdp.ConsumeIntegralInRange(1, 3));
  h.rank = fdp.ConsumeIntegralInRange(-2, 70);
  h.size = fdp.ConsumeIntegralInRange(-1, 70);
  h.wire = fdp.ConsumeIntegral<int8_t>();
  h.job = fdp.ConsumeBool() ? 0 : fdp.ConsumeIntegral<uint64_t>();
  return h;
}

void handshake(FuzzedDataProvider& fdp) {
  const std::string token = fdp.ConsumeRandomLengthString(12);
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) != 0) {
    return;
  }
  const int server = sv[0], client = sv[1];
  d::ServerHandshake hs(token);
  std::vector<uint8_t> sent;  // everything the client wrote, in order
  for (int step = 0; step < 16 && fdp.remaining_bytes() > 0; ++step) {
    const auto st = hs.state();
    if (st == d::ServerHandshake::State::Done ||
        st == d::ServerHandshake::State::Failed) {
      break;
    }
    std::vector<uint8_t> chunk;
    const int action = fdp.ConsumeIntegralInRange(0, 4);
    if (action == 0 && st == d::ServerHandshake::State::NeedHello &&
        sent.empty()) {
      auto b = d::encode_hello(fuzzed_hello(fdp));
      chunk.assign(b.begin(), b.end());
    } else if (action == 1 && st == d::ServerHandshake::State::NeedProof &&
               sent.size() >= d::kHelloBytes) {
      // Answer the challenge properly (with our token or a wrong one).
      uint8_t ch[d::kChallengeBytes];
      if (::recv(client, ch, sizeof(ch), 0) ==
          static_cast<ssize_t>(sizeof(ch))) {
        d::Nonce nonce;
        std::memcpy(nonce.data(), ch + 8, nonce.size());
        const std::string key = fdp.ConsumeBool() ? token : "x" + token;
        auto proof = d::client_proof(
            key, std::span<const uint8_t>(sent.data(), d::kHelloBytes), nonce);
        chunk.assign(proof.begin(), proof.end());
      }
    } else if (action == 2) {
      ::shutdown(client, SHUT_WR);  // EOF mid-handshake
    } else {
      chunk = fdp.ConsumeBytes<uint8_t>(fdp.ConsumeIntegralInRange(0, 64));
    }
    if (!chunk.empty()) {
      ssize_t k = ::send(client, chunk.data(), chunk.size(), MSG_NOSIGNAL);
      if (k > 0) {
        sent.insert(sent.end(), chunk.begin(), chunk.begin() + k);
      }
    }
    hs.on_readable(server);
  }
  if (hs.state() == d::ServerHandshake::State::Done) {
    const int size = fdp.ConsumeIntegralInRange(1, 70);
    std::vector<bool> connected(static_cast<size_t>(size));
    for (size_t r = 0; r < connected.size(); ++r) {
      connected[r] = fdp.ConsumeBool();
    }
    const d::Detail why = d::star::admission_problem(
        hs.hello(), size, d::token_fingerprint(token), connected);
    try {
      d::send_verdict(server, why.empty(), why,
                      d::Deadline::after(d::Millis(100)), {});
    } catch (const jaccl::Error&) {
    }
  }
  ::close(server);
  ::close(client);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider fdp(data, size);
  if (fdp.ConsumeBool()) {
    parse_raw(fdp);
  }
  handshake(fdp);
  return 0;
}
