// Copyright 2026 the jaccl authors.
#include "common/handshake.h"

#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "common/bytes.h"
#include "common/crypto.h"
#include "common/net.h"
#include "common/random.h"

namespace jaccl::detail {

namespace {

Mac proof(std::string_view token, std::string_view label,
          std::span<const uint8_t> hello, const Nonce& nonce) {
  if (token.empty()) {
    return kNoTokenProof;  // see the header comment
  }
  std::string msg(label);
  msg.append(reinterpret_cast<const char*>(hello.data()), hello.size());
  msg.append(reinterpret_cast<const char*>(nonce.data()), nonce.size());
  return hmac_sha256(token, msg);
}

}  // namespace

const char* channel_name(Channel c) {
  switch (c) {
    case Channel::Coordinator:
      return "coordinator";
    case Channel::Data:
      return "data";
    case Channel::Control:
      return "control";
  }
  return "unknown";
}

Nonce random_nonce() {
  Nonce n{};
  random_bytes(n.data(), n.size());
  return n;
}

uint64_t token_fingerprint(std::string_view token) {
  if (token.empty()) {
    return 0;
  }
  const Sha256Digest md = sha256(token);
  return get_u64(md.data()) | 1;  // never 0, which means "no token"
}

std::array<uint8_t, kHelloBytes> encode_hello(const Hello& h) {
  std::array<uint8_t, kHelloBytes> b{};
  put_u64(&b[0], kMagic);
  put_u32(&b[8], kProtocolVersion);
  put_u32(&b[12], static_cast<uint32_t>(h.channel));
  put_u32(&b[16], static_cast<uint32_t>(h.rank));
  put_u32(&b[20], static_cast<uint32_t>(h.size));
  put_u32(&b[24], static_cast<uint32_t>(h.wire));
  put_u32(&b[28], 0);
  put_u64(&b[32], h.job);
  std::memcpy(&b[40], h.nonce.data(), h.nonce.size());
  return b;
}

std::optional<Hello> decode_hello(std::span<const uint8_t> b,
                                  std::string* why) {
  if (b.size() != kHelloBytes || get_u64(&b[0]) != kMagic) {
    *why = "not a jaccl connection (bad magic)";
    return std::nullopt;
  }
  uint32_t version = get_u32(&b[8]);
  if (version != kProtocolVersion) {
    *why = "protocol version " + std::to_string(version) + ", expected " +
           std::to_string(kProtocolVersion);
    return std::nullopt;
  }
  Hello h;
  uint32_t ch = get_u32(&b[12]);
  if (ch < 1 || ch > 3) {
    *why = "unknown channel " + std::to_string(ch);
    return std::nullopt;
  }
  h.channel = static_cast<Channel>(ch);
  h.rank = static_cast<int32_t>(get_u32(&b[16]));
  h.size = static_cast<int32_t>(get_u32(&b[20]));
  h.wire = static_cast<int32_t>(get_u32(&b[24]));
  h.job = get_u64(&b[32]);
  std::memcpy(h.nonce.data(), &b[40], h.nonce.size());
  return h;
}

Mac server_proof(std::string_view token, std::span<const uint8_t> hello,
                 const Nonce& server_nonce) {
  return proof(token, "jaccl-server-proof", hello, server_nonce);
}

Mac client_proof(std::string_view token, std::span<const uint8_t> hello,
                 const Nonce& server_nonce) {
  return proof(token, "jaccl-client-proof", hello, server_nonce);
}

bool proof_matches(std::string_view token, const Mac& got, const Mac& want) {
  if (token.empty()) {
    return got == want;
  }
  return equal_in_constant_time(got.data(), want.data(), got.size());
}

void client_handshake(int fd, const Hello& me, std::string_view token,
                      const Deadline& dl, const ErrorContext& ctx) {
  client_send_proof(fd, me, token, dl, ctx);
  client_read_verdict(fd, dl, ctx);
}

namespace {

// Reads the challenge and checks the server's proof; returns its nonce.
Nonce check_challenge(int fd, std::span<const uint8_t> hello,
                      std::string_view token, const Deadline& dl,
                      const ErrorContext& ctx) {
  std::array<uint8_t, kChallengeBytes> ch{};
  recv_all(fd, ch.data(), ch.size(), dl, ctx);
  if (get_u64(&ch[0]) != kMagic) {
    raise(ErrorKind::Protocol, "the listener is not a jaccl peer (bad magic)",
          ctx);
  }
  Nonce server_nonce{};
  std::memcpy(server_nonce.data(), &ch[8], server_nonce.size());
  Mac got{};
  std::memcpy(got.data(), &ch[24], got.size());
  if (!proof_matches(token, got, server_proof(token, hello, server_nonce))) {
    raise(ErrorKind::Config,
          token.empty() ? "the peer expects a job token (JACCL_TOKEN) and we "
                          "have none"
          : got == kNoTokenProof
              ? "the peer has no job token (JACCL_TOKEN) and we have one"
              : "the peer does not know our job token (JACCL_TOKEN differs)",
          ctx);
  }
  return server_nonce;
}

}  // namespace

void client_send_proof(int fd, const Hello& me, std::string_view token,
                       const Deadline& dl, const ErrorContext& ctx) {
  auto hello = encode_hello(me);
  send_all(fd, hello.data(), hello.size(), dl, ctx);
  const Nonce server_nonce = check_challenge(fd, hello, token, dl, ctx);
  Mac proof = client_proof(token, hello, server_nonce);
  send_all(fd, proof.data(), proof.size(), dl, ctx);
}

void client_send_hello_and_proof(int fd, const Hello& me, const Deadline& dl,
                                 const ErrorContext& ctx) {
  std::array<uint8_t, kHelloBytes + kProofBytes> both{};
  const auto hello = encode_hello(me);
  std::memcpy(both.data(), hello.data(), hello.size());
  std::memcpy(both.data() + kHelloBytes, kNoTokenProof.data(), kProofBytes);
  send_all(fd, both.data(), both.size(), dl, ctx);
}

void client_check_challenge(int fd, const Deadline& dl,
                            const ErrorContext& ctx) {
  check_challenge(fd, {}, "", dl, ctx);  // tokenless: the hello is not used
}

void client_read_verdict(int fd, const Deadline& dl, const ErrorContext& ctx) {
  std::array<uint8_t, kVerdictBytes> v{};
  recv_all(fd, v.data(), v.size(), dl, ctx);
  if (get_u32(&v[0]) != 1) {
    std::string reason(
        reinterpret_cast<const char*>(&v[4]),
        ::strnlen(reinterpret_cast<const char*>(&v[4]), kVerdictBytes - 4));
    raise(ErrorKind::Config,
          "connection rejected by peer: " + Detail::from_wire(reason), ctx);
  }
}

ServerHandshake::State ServerHandshake::fail(std::string why) {
  failure_ = std::move(why);
  state_ = State::Failed;
  return state_;
}

ServerHandshake::State ServerHandshake::on_readable(int fd) {
  for (;;) {
    uint8_t* dst = nullptr;
    size_t want = 0;
    if (state_ == State::NeedHello) {
      dst = hello_bytes_.data() + have_;
      want = kHelloBytes - have_;
    } else if (state_ == State::NeedProof) {
      dst = proof_.data() + have_;
      want = kProofBytes - have_;
    } else {
      return state_;
    }
    ssize_t k = ::recv(fd, dst, want, 0);
    if (k == 0) {
      return fail(have_ == 0 && state_ == State::NeedHello
                      ? "closed before saying hello"
                      : "closed during the handshake");
    }
    if (k < 0) {
      if (errno == EINTR)
        continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK)
        return state_;
      return fail(std::string("recv failed: ") + std::strerror(errno));
    }
    have_ += static_cast<size_t>(k);
    if (state_ == State::NeedHello) {
      // Check the magic as soon as it is complete: garbage is dropped early.
      if (have_ >= 8 && get_u64(hello_bytes_.data()) != kMagic) {
        return fail("not a jaccl connection (bad magic)");
      }
      if (have_ < kHelloBytes)
        continue;
      std::string why;
      auto h = decode_hello(hello_bytes_, &why);
      if (!h)
        return fail(why);
      hello_ = *h;
      server_nonce_ = random_nonce();
      std::array<uint8_t, kChallengeBytes> ch{};
      put_u64(&ch[0], kMagic);
      std::memcpy(&ch[8], server_nonce_.data(), server_nonce_.size());
      Mac sp = server_proof(token_, hello_bytes_, server_nonce_);
      std::memcpy(&ch[24], sp.data(), sp.size());
      // A fresh socket's send buffer always takes 56 bytes.
      if (::send(fd, ch.data(), ch.size(), MSG_NOSIGNAL) !=
          static_cast<ssize_t>(ch.size())) {
        return fail("could not send the challenge");
      }
      have_ = 0;
      state_ = State::NeedProof;
    } else {
      if (have_ < kProofBytes)
        continue;
      if (!proof_matches(token_, proof_,
                         client_proof(token_, hello_bytes_, server_nonce_))) {
        return fail(token_.empty()
                        ? "client proved a job token but we have none"
                        : "wrong or missing job token");
      }
      state_ = State::Done;
      return state_;
    }
  }
}

void send_verdict(int fd, bool ok, const Detail& reason, const Deadline& dl,
                  const ErrorContext& ctx) {
  std::array<uint8_t, kVerdictBytes> v{};
  put_u32(&v[0], ok ? 1 : 0);
  const std::string wire = reason.to_wire();
  std::memcpy(&v[4], wire.data(), std::min(wire.size(), kVerdictBytes - 5));
  send_all(fd, v.data(), v.size(), dl, ctx);
}

std::optional<Hello> server_handshake(int fd, std::string_view token,
                                      const Deadline& dl, std::string* why) {
  ServerHandshake hs{std::string(token)};
  while (hs.state() == ServerHandshake::State::NeedHello ||
         hs.state() == ServerHandshake::State::NeedProof) {
    pollfd p{fd, POLLIN, 0};
    if (poll_until(&p, 1, dl) <= 0) {
      *why = "handshake timed out";
      return std::nullopt;
    }
    hs.on_readable(fd);
  }
  if (hs.state() == ServerHandshake::State::Failed) {
    *why = hs.failure();
    return std::nullopt;
  }
  return hs.hello();
}

}  // namespace jaccl::detail
