// Copyright 2026 the jaccl authors.
// The connection handshake (common/handshake.h) over a socket pair, client
// and server in two threads: every combination of tokens, and the bytes a
// tokenless side puts on the wire.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstring>
#include <future>
#include <string>

#include "common/bytes.h"
#include "common/deadline.h"
#include "common/error.h"
#include "common/handshake.h"

namespace jaccl::detail {
namespace {

using namespace std::chrono_literals;

struct Outcome {
  std::string client;  // "" when accepted, else the error text
  std::string server;  // "" when the handshake succeeded, else why not
};

// A server handshake (and its verdict) on one end of a socket pair, and
// `client` on the other: the client's error text and the server's reason.
template <class Client>
Outcome over_pair(const std::string& server_token, Client client) {
  int sv[2];
  EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  auto server = std::async(std::launch::async, [&] {
    std::string why;
    auto h = server_handshake(sv[1], server_token, Deadline::after(20s), &why);
    if (h) {
      send_verdict(sv[1], true, Detail(), Deadline::after(20s), {});
    }
    ::close(sv[1]);
    return h ? std::string() : why;
  });
  Outcome o;
  try {
    client(sv[0]);
  } catch (const Error& e) {
    o.client = e.what();
  }
  ::close(sv[0]);
  o.server = server.get();
  return o;
}

Outcome handshake(const std::string& client_token,
                  const std::string& server_token) {
  Hello me;
  me.channel = Channel::Data;
  me.rank = 1;
  me.size = 2;
  me.job = token_fingerprint(client_token);
  me.nonce = random_nonce();
  return over_pair(server_token, [&](int fd) {
    client_handshake(fd, me, client_token, Deadline::after(20s), {});
  });
}

// A tokenless client's early proof: hello and proof in one write, the
// challenge checked afterwards. Accepted by a tokenless server; a server
// with a token refuses the proof, and the client names the missing token.
Outcome early_proof(const std::string& server_token) {
  Hello me;
  me.rank = 1;
  me.size = 2;
  me.nonce = random_nonce();
  return over_pair(server_token, [&](int fd) {
    client_send_hello_and_proof(fd, me, Deadline::after(20s), {});
    client_check_challenge(fd, Deadline::after(20s), {});
    client_read_verdict(fd, Deadline::after(20s), {});
  });
}

TEST(Handshake, TokenlessClientMaySendItsProofWithItsHello) {
  Outcome none = early_proof("");
  EXPECT_EQ(none.client, "");
  EXPECT_EQ(none.server, "");
  Outcome server_has = early_proof("s3cret");
  EXPECT_NE(server_has.client.find("expects a job token"), std::string::npos)
      << server_has.client;
  EXPECT_NE(server_has.server, "");
}

TEST(Handshake, AcceptsMatchingTokensOrNone) {
  Outcome none = handshake("", "");
  EXPECT_EQ(none.client, "");
  EXPECT_EQ(none.server, "");
  Outcome same = handshake("s3cret", "s3cret");
  EXPECT_EQ(same.client, "");
  EXPECT_EQ(same.server, "");
}

TEST(Handshake, RefusesAMismatchNamingWhichSideLacksTheToken) {
  Outcome differs = handshake("wrong", "s3cret");
  EXPECT_NE(differs.client.find("JACCL_TOKEN differs"), std::string::npos)
      << differs.client;
  EXPECT_NE(differs.server, "");
  Outcome client_none = handshake("", "s3cret");
  EXPECT_NE(client_none.client.find("expects a job token"), std::string::npos)
      << client_none.client;
  EXPECT_NE(client_none.server, "");
  Outcome server_none = handshake("s3cret", "");
  EXPECT_NE(server_none.client.find("the peer has no job token"),
            std::string::npos)
      << server_none.client;
  EXPECT_NE(server_none.server, "");
}

// A server without a token answers with the fixed proof (no HMAC, so no
// libnettle), and its hello check wants this protocol version.
TEST(Handshake, TokenlessProofIsTheFixedValueOnTheWire) {
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  auto server = std::async(std::launch::async, [&] {
    std::string why;
    server_handshake(sv[1], "", Deadline::after(20s), &why);
    ::close(sv[1]);
    return why;
  });
  Hello me;
  me.rank = 1;
  me.size = 2;
  auto hello = encode_hello(me);
  EXPECT_EQ(get_u32(&hello[8]), kProtocolVersion);
  ASSERT_EQ(::send(sv[0], hello.data(), hello.size(), 0),
            static_cast<ssize_t>(hello.size()));
  std::array<uint8_t, kChallengeBytes> ch{};
  size_t got = 0;
  while (got < ch.size()) {
    ssize_t k = ::recv(sv[0], ch.data() + got, ch.size() - got, 0);
    ASSERT_GT(k, 0);
    got += static_cast<size_t>(k);
  }
  Mac proof{};
  std::memcpy(proof.data(), &ch[24], proof.size());
  EXPECT_EQ(proof, kNoTokenProof);
  EXPECT_EQ(server_proof("", hello, random_nonce()), kNoTokenProof);
  EXPECT_EQ(client_proof("", hello, random_nonce()), kNoTokenProof);
  EXPECT_NE(server_proof("t", hello, random_nonce()), kNoTokenProof);
  ::close(sv[0]);
  EXPECT_EQ(server.get(), "closed during the handshake");
}

TEST(Handshake, RefusesTheOldProtocolVersions) {
  for (uint32_t old : {1u, 2u}) {
    auto hello = encode_hello(Hello{});
    put_u32(&hello[8], old);
    std::string why;
    EXPECT_FALSE(decode_hello(hello, &why));
    EXPECT_EQ(why, "protocol version " + std::to_string(old) + ", expected 3");
  }
}

}  // namespace
}  // namespace jaccl::detail
