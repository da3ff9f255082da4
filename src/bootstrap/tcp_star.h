// Copyright 2026 the jaccl authors.
// The default side channel: a TCP star rooted at rank 0 (JACCL_COORDINATOR).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "bootstrap/side_channel.h"
#include "common/deadline.h"
#include "common/handshake.h"
#include "jaccl/error.h"
#include "jaccl/side_channel.h"

namespace jaccl::detail {

struct TcpStarOptions {
  int rank = -1;
  int size = 0;
  std::string address;  // host:port; rank 0 listens, the others dial
  std::string token;    // job token ("" = none)
  Millis timeout{60000};
};

// Rank 0 binds immediately (so "address in use" surfaces at init); everyone
// connects and completes the handshake on the first call. The returned
// function keeps the connections for its lifetime.
AllGatherFn make_tcp_star(const TcpStarOptions& options);

// The same star, with (ranks > 0) a view as well: the result where it
// arrived, in rank 0's shared memory when it could share it (SideChannel
// reads its frames there). The view is empty at rank 0 and in a group of
// one.
GatherFns make_tcp_star_fns(const TcpStarOptions& options);

// The star's wire format after the handshake, exposed for tests and fuzzing.
//   rank r -> 0  Request: magic u32, flags u32, n_bytes u64, host u64, then
//                         payload
//   0 -> rank r  Reply:   magic u32, status u32, kind u32, flags u32,
//                         length u64, then size * n_bytes bytes (Ok) or an
//                         error message every rank throws (Error)
// Request flag kAcceptsCoded: the rank can decode a coded result; rank 0 may
// then answer with reply flag kCoded, the body being encode_parts() of the
// result and `length` its size. `host` is the rank's shared_host_key() (0:
// none); a rank whose key is rank 0's may get reply flag kShared instead,
// the body being a SharedRef (tcp_star_shared.h) to the result in rank 0's
// shared memory.
namespace star {

// Rank 0's half (tcp_star_server.cpp): binds at once, then serves one
// all-gather per call. make_tcp_star adds locking and poisoning.
AllGatherFn make_server(const TcpStarOptions& options);

inline constexpr size_t kRequestBytes = 24;
inline constexpr size_t kReplyBytes = 24;
inline constexpr size_t kMaxErrorMessage = 4096;

enum class Status : uint32_t { Ok = 0, Error = 1 };

inline constexpr uint32_t kAcceptsCoded = 1;  // request flag
inline constexpr uint32_t kCoded = 1;         // reply flag
inline constexpr uint32_t kShared = 2;        // reply flag

struct ReplyHeader {
  Status status = Status::Ok;
  ErrorKind kind = ErrorKind::Internal;  // meaningful for Error only
  uint64_t length = 0;
  uint32_t flags = 0;  // kCoded or kShared (Ok only)
};

std::array<uint8_t, kRequestBytes> encode_request(uint64_t n_bytes,
                                                  uint32_t flags = 0,
                                                  uint64_t host = 0);
// n_bytes, or nullopt when the bytes are not a request.
std::optional<uint64_t> decode_request(std::span<const uint8_t> bytes);
// A well-formed request's flags (unknown ones are ignored) and host key.
uint32_t request_flags(std::span<const uint8_t> bytes);
uint64_t request_host(std::span<const uint8_t> bytes);

std::array<uint8_t, kReplyBytes> encode_reply(const ReplyHeader& h);
// nullopt (and *why) when the bytes are not a well-formed reply header.
std::optional<ReplyHeader> decode_reply(std::span<const uint8_t> bytes,
                                        std::string* why);

// The reply coding (tcp_star_codec.cpp): total bytes made of parts of
// `part` bytes, each XORed with the one before and sent as runs of unchanged
// bytes and literals. decode_parts fills dst (total bytes) and is false (with
// *why) for anything that does not decode to exactly total bytes.
std::vector<uint8_t> encode_parts(const char* src, size_t part, size_t total);
bool decode_parts(std::span<const uint8_t> coded, size_t part, char* dst,
                  size_t total, std::string* why);

// decode_parts of `coded` bytes fed piece by piece as they arrive: a rank
// decodes rank 0's reply from a small buffer the kernel has written before
// (on some VMs the kernel's first write into a page costs 20x its later
// ones, and with thousands of thread ranks every output was such a page).
class PartsDecoder {
 public:
  PartsDecoder(char* dst, size_t total, size_t part, size_t coded);
  // The next bytes of the coding; false (and *why) as soon as they cannot
  // belong to a well-formed coding of `coded` bytes into `total`.
  bool feed(const uint8_t* in, size_t len, std::string* why);
  // After the last piece: whether it all decoded to exactly `total` bytes.
  bool finish(std::string* why) const;

 private:
  bool start_run(uint64_t z, uint64_t l, std::string* why);
  const uint8_t* short_runs(const uint8_t* in, const uint8_t* end);

  char* dst_;
  size_t total_, part_, coded_;
  size_t pos_ = 0;        // coded bytes fed so far
  size_t o_ = 0;          // result bytes written so far
  uint64_t literal_ = 0;  // literal bytes of the current run still to come
  std::array<uint8_t, 20> head_{};  // a run header cut between two pieces
  size_t head_len_ = 0;
};

// Why rank 0 refuses a connection that completed the handshake, or "" to
// admit it. connected[r] tells whether rank r already has a connection.
Detail admission_problem(const Hello& h, int size, uint64_t job,
                         const std::vector<bool>& connected);

}  // namespace star

}  // namespace jaccl::detail
