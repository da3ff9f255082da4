// Copyright 2026 the jaccl authors.
// The connection handshake shared by the coordinator and the data links.
//
//   client -> Hello     magic, version, channel, rank, size, wire, job, nonce
//   server -> Challenge magic, server nonce, server proof
//   client -> Proof     client proof
//   server -> Verdict   accepted, or rejected with a reason
//
// Proofs are HMAC-SHA256 keyed with the job token over the whole Hello and
// the server nonce, so the token never crosses the wire and a proof cannot be
// replayed for another rank, channel or job. Without a token an HMAC would
// prove nothing (anyone can key one with the empty string), so the proof is
// the fixed kNoTokenProof: the exchange still runs, a side that has a token
// rejects one that has none, and a job without a token never loads libnettle
// (common/crypto.h). A connection whose first bytes lack the magic is dropped
// silently (a port scanner or an HTTP request must not disturb the job).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "common/deadline.h"
#include "common/error.h"

namespace jaccl::detail {

inline constexpr uint64_t kMagic = 0x314c4343414a0a6aull;  // "j\nJACCL1"
// 3: the TCP star's requests carry a host key and its replies may point to
// shared memory; 2: tokenless proofs are kNoTokenProof (1: HMAC with an
// empty key).
inline constexpr uint32_t kProtocolVersion = 3;

enum class Channel : uint32_t { Coordinator = 1, Data = 2, Control = 3 };
const char* channel_name(Channel c);

using Nonce = std::array<uint8_t, 16>;
using Mac = std::array<uint8_t, 32>;
// Both proofs of a side without a token: "jaccl: no job token", zero-padded.
inline constexpr Mac kNoTokenProof{'j', 'a', 'c', 'c', 'l', ':', ' ',
                                   'n', 'o', ' ', 'j', 'o', 'b', ' ',
                                   't', 'o', 'k', 'e', 'n'};

Nonce random_nonce();
// Fingerprint of a job token (never the token itself): 0 without a token.
uint64_t token_fingerprint(std::string_view token);

struct Hello {
  Channel channel = Channel::Coordinator;
  int32_t rank = -1;
  int32_t size = 0;
  int32_t wire = 0;
  uint64_t job = 0;  // job fingerprint; must match the server's
  Nonce nonce{};
};

inline constexpr size_t kHelloBytes = 56;
inline constexpr size_t kChallengeBytes = 8 + 16 + 32;
inline constexpr size_t kProofBytes = 32;
inline constexpr size_t kVerdictBytes = 128;

std::array<uint8_t, kHelloBytes> encode_hello(const Hello& h);
// nullopt (and *why set) when the bytes are not a jaccl Hello.
std::optional<Hello> decode_hello(std::span<const uint8_t> bytes,
                                  std::string* why);

// kNoTokenProof when token is empty, else the HMAC.
Mac server_proof(std::string_view token, std::span<const uint8_t> hello,
                 const Nonce& server_nonce);
Mac client_proof(std::string_view token, std::span<const uint8_t> hello,
                 const Nonce& server_nonce);
// Whether a received proof is the expected one: in constant time with a
// token; a plain compare without (kNoTokenProof is public).
bool proof_matches(std::string_view token, const Mac& got, const Mac& want);

// Client side, blocking (bounded by dl). Returns when the server accepted;
// throws Config when rejected (with the server's reason) or when the tokens
// disagree, Protocol when the server is not a jaccl peer.
void client_handshake(int fd, const Hello& me, std::string_view token,
                      const Deadline& dl, const ErrorContext& ctx);

// client_handshake in its two halves: up to sending the proof, then
// reading the verdict. A client may write its first message between them
// (the server reads it only after its verdict), saving a round trip per
// connection; it must then read the verdict before anything else.
void client_send_proof(int fd, const Hello& me, std::string_view token,
                       const Deadline& dl, const ErrorContext& ctx);
void client_read_verdict(int fd, const Deadline& dl, const ErrorContext& ctx);

// Without a token the proof is kNoTokenProof whatever the challenge, so a
// client without one may send it with its hello in one write and check the
// challenge when it comes (client_check_challenge, before the verdict): the
// server reads the hello, challenges, and finds the proof already there.
// The same bytes cross the wire in the same order as client_send_proof's.
void client_send_hello_and_proof(int fd, const Hello& me, const Deadline& dl,
                                 const ErrorContext& ctx);
void client_check_challenge(int fd, const Deadline& dl,
                            const ErrorContext& ctx);

// Server side as a non-blocking state machine, so one listener can serve many
// half-open connections at once without a slow one delaying the rest.
class ServerHandshake {
 public:
  enum class State { NeedHello, NeedProof, Done, Failed };

  explicit ServerHandshake(std::string token) : token_(std::move(token)) {}

  // Call when fd is readable. Reads what is there and advances.
  State on_readable(int fd);
  State state() const { return state_; }
  const Hello& hello() const { return hello_; }
  const std::string& failure() const { return failure_; }

 private:
  State fail(std::string why);

  std::string token_;
  State state_ = State::NeedHello;
  std::array<uint8_t, kHelloBytes> hello_bytes_{};
  Mac proof_{};
  size_t have_ = 0;
  Nonce server_nonce_{};
  Hello hello_;
  std::string failure_;
};

// After ServerHandshake is Done: accept, or reject with a reason the client
// will print (its ranks travel as fields: Detail::to_wire). Blocking but
// tiny.
void send_verdict(int fd, bool ok, const Detail& reason, const Deadline& dl,
                  const ErrorContext& ctx);

// Blocking server side for one connection (data listeners use it): runs the
// state machine bounded by dl. Returns nullopt (and *why) for a connection to
// drop; the caller then calls send_verdict.
std::optional<Hello> server_handshake(int fd, std::string_view token,
                                      const Deadline& dl, std::string* why);

}  // namespace jaccl::detail
