// Copyright 2026 the jaccl authors.
// SHA-256 and HMAC-SHA256 through our binding of libnettle, opened on first
// use (common/crypto.h), against the published vectors: FIPS 180-4's
// examples and RFC 4231's HMAC test cases.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "common/bytes.h"
#include "common/crypto.h"

namespace jaccl::detail {
namespace {

std::string hex(const Sha256Digest& d) {
  return to_hex(d.data(), d.size());
}

std::string unhex(const std::string& h) {
  std::string out;
  for (size_t i = 0; i + 1 < h.size(); i += 2) {
    out += static_cast<char>(std::stoi(h.substr(i, 2), nullptr, 16));
  }
  return out;
}

TEST(Sha256, Fips180Vectors) {
  EXPECT_EQ(hex(sha256("")),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(hex(sha256("abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(
      hex(sha256("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")),
      "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(hex(sha256(std::string(1000000, 'a'))),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, Rfc4231HmacVectors) {
  struct Case {
    std::string key, data, mac;
  };
  const Case cases[] = {
      {std::string(20, '\x0b'), "Hi There",
       "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"},
      {"Jefe", "what do ya want for nothing?",
       "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"},
      {std::string(20, '\xaa'), std::string(50, '\xdd'),
       "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe"},
      {unhex("0102030405060708090a0b0c0d0e0f10111213141516171819"),
       std::string(50, '\xcd'),
       "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b"},
      // Keys longer than a block are hashed first.
      {std::string(131, '\xaa'),
       "Test Using Larger Than Block-Size Key - Hash Key First",
       "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"},
      {std::string(131, '\xaa'),
       "This is a test using a larger than block-size key and a larger than "
       "block-size data. The key needs to be hashed before being used by the "
       "HMAC algorithm.",
       "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(hex(hmac_sha256(c.key, c.data)), c.mac) << c.data;
  }
  // An empty key is a key of zeros (the handshake's no-token case).
  EXPECT_EQ(hmac_sha256("", "x"), hmac_sha256(std::string(64, '\0'), "x"));
}

TEST(Sha256, BindsTheLibnettleTheBuildFound) {
  sha256("x");
  std::ifstream maps("/proc/self/maps");
  std::string line;
  bool mapped = false;
  while (std::getline(maps, line)) {
    mapped = mapped || line.find(crypto_library_name()) != std::string::npos;
  }
  EXPECT_TRUE(mapped) << crypto_library_name() << " is not mapped after a hash";
}

TEST(Sha256, ConstantTimeCompare) {
  const Sha256Digest a = sha256("a"), b = sha256("b");
  EXPECT_TRUE(equal_in_constant_time(a.data(), a.data(), a.size()));
  EXPECT_FALSE(equal_in_constant_time(a.data(), b.data(), a.size()));
  Sha256Digest c = a;
  c[31] ^= 1;
  EXPECT_FALSE(equal_in_constant_time(a.data(), c.data(), a.size()));
}

}  // namespace
}  // namespace jaccl::detail
