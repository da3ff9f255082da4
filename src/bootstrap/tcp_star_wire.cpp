// Copyright 2026 the jaccl authors.
// The TCP star's wire format after the handshake and rank 0's admission rule:
// pure functions, so tests and the fuzzer reach them without sockets.
#include <string>

#include "bootstrap/tcp_star.h"
#include "common/bytes.h"

namespace jaccl::detail {

namespace star {

namespace {

constexpr uint32_t kRequestMagic = 0x51524a53;  // "SJRQ"
constexpr uint32_t kReplyMagic = 0x50524a53;    // "SJRP"

}  // namespace

std::array<uint8_t, kRequestBytes> encode_request(uint64_t n_bytes,
                                                  uint32_t flags,
                                                  uint64_t host) {
  std::array<uint8_t, kRequestBytes> b{};
  put_u32(&b[0], kRequestMagic);
  put_u32(&b[4], flags);
  put_u64(&b[8], n_bytes);
  put_u64(&b[16], host);
  return b;
}

uint32_t request_flags(std::span<const uint8_t> b) {
  return decode_request(b) ? get_u32(&b[4]) : 0;
}

uint64_t request_host(std::span<const uint8_t> b) {
  return decode_request(b) ? get_u64(&b[16]) : 0;
}

std::optional<uint64_t> decode_request(std::span<const uint8_t> b) {
  if (b.size() != kRequestBytes || get_u32(&b[0]) != kRequestMagic) {
    return std::nullopt;
  }
  return get_u64(&b[8]);
}

std::array<uint8_t, kReplyBytes> encode_reply(const ReplyHeader& h) {
  std::array<uint8_t, kReplyBytes> b{};
  put_u32(&b[0], kReplyMagic);
  put_u32(&b[4], static_cast<uint32_t>(h.status));
  put_u32(&b[8], static_cast<uint32_t>(h.kind));
  put_u32(&b[12], h.flags);
  put_u64(&b[16], h.length);
  return b;
}

std::optional<ReplyHeader> decode_reply(std::span<const uint8_t> b,
                                        std::string* why) {
  if (b.size() != kReplyBytes || get_u32(&b[0]) != kReplyMagic) {
    *why = "bad magic";
    return std::nullopt;
  }
  ReplyHeader h;
  uint32_t status = get_u32(&b[4]);
  uint32_t kind = get_u32(&b[8]);
  h.flags = get_u32(&b[12]);
  h.length = get_u64(&b[16]);
  if (status > 1) {
    *why = "unknown status " + std::to_string(status);
    return std::nullopt;
  }
  h.status = static_cast<Status>(status);
  if ((h.flags & ~(kCoded | kShared)) != 0 || h.flags == (kCoded | kShared) ||
      (h.status == Status::Error && h.flags)) {
    *why = "unknown flags " + std::to_string(h.flags);
    return std::nullopt;
  }
  if (h.status == Status::Error) {
    if (kind > static_cast<uint32_t>(ErrorKind::Internal)) {
      *why = "unknown error kind " + std::to_string(kind);
      return std::nullopt;
    }
    if (h.length > kMaxErrorMessage) {
      *why = "error message of " + std::to_string(h.length) + " bytes";
      return std::nullopt;
    }
    h.kind = static_cast<ErrorKind>(kind);
  }
  return h;
}

Detail admission_problem(const Hello& h, int size, uint64_t job,
                         const std::vector<bool>& connected) {
  if (h.channel != Channel::Coordinator) {
    return std::string("this is the coordinator, not a ") +
           channel_name(h.channel) + " listener";
  }
  if (h.size != size) {
    return "job size " + std::to_string(h.size) + " differs from the " +
           "coordinator's " + std::to_string(size);
  }
  if (h.rank < 1 || h.rank >= size) {
    return "rank " + std::to_string(h.rank) + " is out of range 1.." +
           std::to_string(size - 1);
  }
  if (h.job != job) {
    return "another job (job token fingerprint differs)";
  }
  if (static_cast<size_t>(h.rank) < connected.size() && connected[h.rank]) {
    return rank_ref(h.rank) + " is already connected";
  }
  return "";
}

}  // namespace star

}  // namespace jaccl::detail
