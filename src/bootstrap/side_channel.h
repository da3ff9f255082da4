// Copyright 2026 the jaccl authors.
// SideChannel: the one all-gather every rank uses at set-up, framed and
// checked, with typed helpers on top.
//
// Every call first exchanges a fixed-size frame from each rank: a header
// (magic, version, call number, n_bytes, rank, size, config fingerprint,
// process id) plus as much of the payload as fits. Because that frame has
// the same length at every rank, even a user's all-gather is always called
// with matching sizes, and a rank that passed another n_bytes, is a call
// ahead or behind, claims someone else's rank, has another size or another
// configuration is named in an error at every rank. A payload larger than
// the frame's inline part goes in a second all-gather, straight into the
// caller's output, whose size all ranks agreed on in the first.
// The frame is kFrameBytes up to kFullFrameRanks ranks and shrinks beyond
// (frame_bytes()): every rank holds every rank's frame, and at 4096 thread
// ranks a 256-byte frame made 4 GiB of fresh memory for one call.
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "common/deadline.h"
#include "jaccl/side_channel.h"

namespace jaccl::detail {

// The parts of the configuration that must agree across ranks, hashed
// separately so a mismatch names the part.
struct ConfigFingerprint {
  uint16_t devices = 0;    // device matrix
  uint16_t topology = 0;   // ring preference
  uint16_t transport = 0;  // transport choice and wires
  uint16_t token = 0;      // job token (hash of its fingerprint)
  uint64_t pack() const;
  static ConfigFingerprint unpack(uint64_t v);
  // "device matrix, transport" for the fields that differ.
  static std::string diff(uint64_t a, uint64_t b);
};

uint16_t hash16(std::string_view s);

// A built-in channel's all-gather that says where the size * n gathered
// bytes already are (rank order) instead of copying them out: valid until
// its next call. The TCP star's is rank 0's shared reply.
using GatherViewFn = std::function<const char*(const char* src, size_t n)>;

// A channel's all-gather and, where it offers one, its view (empty
// otherwise); the two share one connection and lock.
struct GatherFns {
  AllGatherFn fn;
  GatherViewFn view;
};

class SideChannel {
 public:
  static constexpr size_t kHeaderBytes = 56;
  static constexpr size_t kFrameBytes = 256;
  static constexpr size_t kInlineBytes = kFrameBytes - kHeaderBytes;
  static constexpr int kFullFrameRanks = 1024;
  // The frame of a group of `size`: kFrameBytes up to kFullFrameRanks
  // ranks, then about 256 KiB of frames per rank and call, at least a
  // header and 8 bytes (a barrier's token and all_gather_value of a word
  // stay in one round).
  static constexpr size_t frame_bytes(int size) {
    if (size <= kFullFrameRanks) {
      return kFrameBytes;
    }
    const size_t fit = (size_t(256) << 10) / static_cast<size_t>(size) / 8 * 8;
    return fit > kHeaderBytes + 8 ? fit : kHeaderBytes + 8;
  }
  size_t inline_bytes() const { return frame_bytes(size_) - kHeaderBytes; }

  // fn must be a correct all-gather for (rank, size); it is called on the
  // calling thread. A user-supplied one (which jaccl cannot interrupt) is
  // watched: past `timeout` a warning says which call is stuck, and again
  // every `timeout`. Built-in channels enforce their own deadlines. view,
  // when given, is the same all-gather as fn (one connection) and gathers
  // the frames: at 1024 ranks a copy of them was 64 fresh pages of every
  // rank's memory, at ~10 us a page on a VM.
  SideChannel(int rank, int size, uint64_t fingerprint, AllGatherFn fn,
              std::string description, Millis timeout, bool user_supplied,
              GatherViewFn view = nullptr);

  int rank() const { return rank_; }
  int size() const { return size_; }
  const std::string& description() const { return description_; }

  // dst receives size * n bytes in rank order. Thread-safe: calls from
  // several threads are serialized.
  void all_gather(const void* src, void* dst, size_t n);
  std::vector<char> all_gather(const void* src, size_t n);

  template <class T>
  std::vector<T> all_gather_value(const T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    std::vector<T> out(static_cast<size_t>(size_));
    all_gather(&v, out.data(), sizeof(T));
    return out;
  }

  // Variable-length contributions: one call carries every length and the
  // first inline_bytes() - 8 bytes; only when some contribution is longer, a
  // second call carries the rest, padded to the longest remainder.
  std::vector<std::string> all_gather_bytes(std::string_view mine);
  // The same, each rank's contribution handed to each(rank, bytes) in rank
  // order instead of copied (the view lives during that call only; each
  // must not call this channel): at
  // 1024 ranks the strings and the buffer before them were about 100 fresh
  // pages of every rank's memory, at ~10 us a page on a VM.
  void all_gather_bytes(std::string_view mine,
                        const std::function<void(int, std::string_view)>& each);

  // Fixed-size contributions of n <= inline_bytes() bytes, each rank's handed
  // to each(rank, bytes) in rank order where it arrived (the bytes live
  // during that call only, unaligned; each must not call this channel).
  void all_gather_each(const void* src, size_t n,
                       const std::function<void(int, const char*)>& each);

  // Returns once every rank has called barrier(). One all-gather is enough:
  // no rank's all-gather can complete before every rank has contributed, so
  // arrival is proven. Upstream runs two; the second only proves every rank
  // has also *left* the first, which matters when the channel is torn down
  // right after (see leave_barrier()).
  void barrier();

  // A barrier after which no rank is still inside an earlier call: use it
  // before the channel's transport goes away, so a fast rank closing its
  // sockets cannot cut off a slow rank still reading the previous result.
  void leave_barrier();

  uint64_t calls() const { return seq_; }

  // An fd that becomes readable when a set-up over this channel should give
  // up at once (the survivors' side channel of a shrink: a member has
  // failed); -1: none. The TCP set-up's connect phase polls it.
  void set_abort_fd(int fd) { abort_fd_ = fd; }
  int abort_fd() const { return abort_fd_; }

 private:
  // With in_place (and a view), dst is unused and *in_place says where the
  // result is.
  void raw_call(const char* src, char* dst, size_t n,
                const char** in_place = nullptr);
  // One call's frames (mu_ held; seq_ not advanced): where the view says
  // they are, else into `out` when the payload is at least a frame (out may
  // be null), else the channel's buffer; checked. Returns where they are,
  // frame_bytes(size_) apart.
  const char* call_frames(const void* src, char* out, size_t n);
  // Rank r's inline payload in frames from call_frames.
  const char* payload(const char* frames, size_t r) const {
    return frames + r * frame_bytes(size_) + kHeaderBytes;
  }
  // The buffer the frames are gathered into, kept between calls: at
  // thousands of ranks a fresh size * 256-byte buffer per call (mapped,
  // zeroed, faulted in, unmapped, by every rank) cost more than any
  // transport.
  char* gathered(size_t bytes);
  void check_frames(const char* frames, size_t stride, uint64_t n_bytes);

  int rank_;
  int size_;
  uint64_t fingerprint_;
  uint64_t instance_;
  AllGatherFn fn_;
  GatherViewFn view_;
  std::string description_;
  Millis timeout_;
  bool user_supplied_;
  std::mutex mu_;
  uint64_t seq_ = 0;
  std::unique_ptr<char[]> gathered_;
  size_t gathered_size_ = 0;
  int abort_fd_ = -1;
};

}  // namespace jaccl::detail
