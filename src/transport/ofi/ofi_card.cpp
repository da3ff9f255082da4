// Copyright 2026 the jaccl authors.
// The ofi card: what a peer needs to reach one endpoint, as bytes for the
// side channel. Layout (little endian):
//   "JOFI" u8 version(1) | u16 n + provider | u16 n + fabric | u16 n + domain
//   | u16 n + address
// Names are printable ASCII; the address is the provider's opaque
// fi_getname bytes. Nothing may follow the address.
#include <cstring>
#include <string>

#include "common/error.h"
#include "transport/ofi/ofi_fabric.h"

namespace jaccl::detail::ofi {
namespace {

constexpr char kMagic[4] = {'J', 'O', 'F', 'I'};
constexpr uint8_t kVersion = 1;
constexpr size_t kMaxName = 1024;
constexpr size_t kMaxAddress = 4096;

void put_field(std::string& out, std::string_view field) {
  auto n = static_cast<uint16_t>(field.size());
  out.push_back(static_cast<char>(n & 0xff));
  out.push_back(static_cast<char>(n >> 8));
  out.append(field);
}

class Reader {
 public:
  Reader(std::string_view bytes, int from, int me)
      : b_(bytes), from_(from), me_(me) {}

  [[noreturn]] void fail(const std::string& why) const {
    raise(ErrorKind::Protocol,
          "the ofi card from " + rank_ref(from_) + " is malformed: " + why +
              " (" + std::to_string(b_.size()) + " bytes)",
          {.rank = me_, .peer = from_});
  }
  std::string_view take(size_t n, const char* what) {
    if (b_.size() - pos_ < n) {
      fail(std::string("it ends inside the ") + what);
    }
    auto v = b_.substr(pos_, n);
    pos_ += n;
    return v;
  }
  std::string_view field(const char* what, size_t max) {
    auto len = take(2, what);
    size_t n = static_cast<uint8_t>(len[0]) |
               (static_cast<size_t>(static_cast<uint8_t>(len[1])) << 8);
    if (n > max) {
      fail(std::string("its ") + what + " is " + std::to_string(n) +
           " bytes (at most " + std::to_string(max) + ")");
    }
    return take(n, what);
  }
  std::string name(const char* what) {
    auto v = field(what, kMaxName);
    for (char c : v) {
      if (c < 0x20 || c > 0x7e) {
        fail(std::string("its ") + what + " is not printable text");
      }
    }
    return std::string(v);
  }
  bool at_end() const { return pos_ == b_.size(); }

 private:
  std::string_view b_;
  size_t pos_ = 0;
  int from_;
  int me_;
};

}  // namespace

std::string Card::encode() const {
  std::string out(kMagic, sizeof(kMagic));
  out.push_back(static_cast<char>(kVersion));
  put_field(out, provider.substr(0, kMaxName));
  put_field(out, fabric.substr(0, kMaxName));
  put_field(out, domain.substr(0, kMaxName));
  std::string_view addr(
      reinterpret_cast<const char*>(address.data()),
      address.size() > kMaxAddress ? kMaxAddress : address.size());
  put_field(out, addr);
  return out;
}

Card Card::decode(std::string_view bytes, int from, int me) {
  Reader r(bytes, from, me);
  auto magic = r.take(sizeof(kMagic), "magic");
  if (std::memcmp(magic.data(), kMagic, sizeof(kMagic)) != 0) {
    r.fail("it does not start with the ofi card magic");
  }
  auto version = static_cast<uint8_t>(r.take(1, "version")[0]);
  if (version != kVersion) {
    r.fail("it has version " + std::to_string(version) + ", this build reads " +
           std::to_string(kVersion));
  }
  Card c;
  c.provider = r.name("provider");
  c.fabric = r.name("fabric");
  c.domain = r.name("domain");
  auto addr = r.field("address", kMaxAddress);
  c.address.assign(addr.begin(), addr.end());
  if (c.provider.empty()) {
    r.fail("its provider is empty");
  }
  if (c.address.empty()) {
    r.fail("its endpoint address is empty");
  }
  if (!r.at_end()) {
    r.fail("bytes follow the address");
  }
  return c;
}

}  // namespace jaccl::detail::ofi
