// Copyright 2026 the jaccl authors.
#include "bootstrap/side_channel.h"

#include <cxxabi.h>

#include <algorithm>
#include <exception>
#include <map>
#include <memory>
#include <optional>

#include "common/error.h"
#include "common/log.h"
#include "common/overrun_watch.h"
#include "common/random.h"

namespace jaccl::detail {

namespace {

// "rank 3 is" / "ranks 1, 2 are": the verb that agrees with ranks_ref.
const char* verb(const std::vector<int>& ranks, const char* one,
                 const char* many) {
  return ranks.size() == 1 ? one : many;
}

constexpr uint64_t kFrameMagic = 0x4d52464c4343414aull;  // "JACCLFRM"
// 2: a payload past the frame's inline part follows with no header, and
// frames shrink past SideChannel::kFullFrameRanks (version 1 framed it).
constexpr uint16_t kFrameVersion = 2;

struct Header {
  uint64_t magic;
  uint16_t version;
  uint16_t phase;  // 1 (version 1's large payloads had frames of phase 2)
  uint32_t reserved;
  uint64_t seq;
  uint64_t n_bytes;
  int32_t rank;
  int32_t size;
  uint64_t fingerprint;
  uint64_t instance;
};
static_assert(sizeof(Header) == SideChannel::kHeaderBytes);

// Runs a user all-gather; returns what it threw. A forced unwind
// (pthread_exit, cancellation) must pass through: swallowing it aborts the
// process. UBSan's null check misfires on binding the exception-less
// __forced_unwind, hence the attribute.
template <class Call>
__attribute__((no_sanitize("undefined"))) std::exception_ptr call_user_fn(
    Call&& call) {
  try {
    call();
  } catch (abi::__forced_unwind&) {
    throw;
  } catch (...) {
    return std::current_exception();
  }
  return nullptr;
}

// Whether one rank's n input bytes lie inside the output of P * n.
bool input_in_output(const char* in, const char* out, size_t P, size_t n) {
  return out != nullptr && n > 0 && in < out + P * n && out < in + n;
}

}  // namespace

uint16_t hash16(std::string_view s) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char c : s) {
    h = (h ^ c) * 1099511628211ull;
  }
  return static_cast<uint16_t>(h ^ (h >> 16) ^ (h >> 32) ^ (h >> 48));
}

uint64_t ConfigFingerprint::pack() const {
  return (uint64_t(devices) << 48) | (uint64_t(topology) << 32) |
         (uint64_t(transport) << 16) | uint64_t(token);
}

ConfigFingerprint ConfigFingerprint::unpack(uint64_t v) {
  return {static_cast<uint16_t>(v >> 48), static_cast<uint16_t>(v >> 32),
          static_cast<uint16_t>(v >> 16), static_cast<uint16_t>(v)};
}

std::string ConfigFingerprint::diff(uint64_t a, uint64_t b) {
  auto x = unpack(a), y = unpack(b);
  std::vector<std::string> parts;
  if (x.devices != y.devices)
    parts.push_back("device matrix / size");
  if (x.topology != y.topology)
    parts.push_back("ring preference (JACCL_RING)");
  if (x.transport != y.transport)
    parts.push_back("transport / wires (JACCL_TRANSPORT, JACCL_WIRES)");
  if (x.token != y.token)
    parts.push_back("job token (JACCL_TOKEN)");
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    out += (i ? ", " : "") + parts[i];
  }
  return out;
}

SideChannel::SideChannel(int rank, int size, uint64_t fingerprint,
                         AllGatherFn fn, std::string description,
                         Millis timeout, bool user_supplied, GatherViewFn view)
    : rank_(rank),
      size_(size),
      fingerprint_(fingerprint),
      instance_(random_u64()),
      fn_(std::move(fn)),
      view_(std::move(view)),
      description_(std::move(description)),
      timeout_(timeout),
      user_supplied_(user_supplied) {
  // check_frames indexes the gathered frames by rank_, and all_gather
  // divides by size_: reject what would make those undefined.
  if (size_ < 1 || rank_ < 0 || rank_ >= size_) {
    raise(ErrorKind::Usage,
          "side channel (" + description_ + "): rank " + std::to_string(rank_) +
              " is out of range for group size " + std::to_string(size_),
          {.rank = rank_});
  }
  if (!fn_) {
    raise(ErrorKind::Usage,
          "side channel (" + description_ + "): the all-gather is empty",
          {.rank = rank_});
  }
}

char* SideChannel::gathered(size_t bytes) {
  if (bytes > gathered_size_) {
    // Not zeroed: the all-gather writes every byte.
    gathered_.reset(new char[bytes]);
    gathered_size_ = bytes;
  }
  return gathered_.get();
}

void SideChannel::raw_call(const char* src, char* dst, size_t n,
                           const char** in_place) {
  ErrorContext ctx{.rank = rank_};
  std::string what = "side-channel all-gather #" + std::to_string(seq_) + " (" +
                     description_ + ")";
  // On the calling thread, as upstream JACCL does: the function may need a
  // lock its caller holds (Python's GIL, when MLX's init calls a Python
  // factory), so a helper thread could deadlock. Nothing can interrupt it
  // there, so a user function past the deadline is reported, not abandoned;
  // built-in channels bound their own waits.
  std::optional<OverrunWatch> watch;
  if (user_supplied_) {
    watch.emplace("rank " + std::to_string(rank_) + ": " + what +
                      " has not returned after the " +
                      format_duration(timeout_) +
                      " deadline: jaccl calls a user-supplied all-gather on "
                      "the calling thread and cannot interrupt it (a rank "
                      "never called it, or the function is stuck; give it "
                      "its own deadline)",
                  timeout_);
  }
  std::exception_ptr error = call_user_fn([&] {
    if (in_place != nullptr && view_) {
      *in_place = view_(src, n);
    } else {
      fn_(src, dst, n);
    }
  });
  if (error) {
    rethrow_as_error(error, ErrorKind::Io,
                     what + (user_supplied_ ? " threw" : " failed"), ctx);
  }
}

void SideChannel::check_frames(const char* frames, size_t stride,
                               uint64_t n_bytes) {
  constexpr uint16_t phase = 1;
  ErrorContext ctx{.rank = rank_};
  std::string call = "side-channel call #" + std::to_string(seq_) + " (" +
                     description_ + "): ";
  // Read in place: a copy of every header per call is O(size) more memory
  // at every rank.
  auto header = [&](int r) {
    Header x;
    std::memcpy(&x, frames + static_cast<size_t>(r) * stride, sizeof(Header));
    return x;
  };
  // The common case in one pass (each header read once): at thousands of
  // ranks every rank checks every rank's frame on every call.
  bool all_good = true;
  for (int r = 0; r < size_ && all_good; ++r) {
    const Header x = header(r);
    all_good = x.magic == kFrameMagic && x.version == kFrameVersion &&
               x.phase == phase && x.rank == r && x.size == size_ &&
               x.seq == seq_ && x.n_bytes == n_bytes &&
               x.fingerprint == fingerprint_ &&
               (r != rank_ || x.instance == instance_);
  }
  if (all_good) {
    return;
  }
  std::vector<int> garbage, bad_version;
  for (int r = 0; r < size_; ++r) {
    if (header(r).magic != kFrameMagic) {
      garbage.push_back(r);
    } else if (header(r).version != kFrameVersion) {
      bad_version.push_back(r);
    }
  }
  if (!garbage.empty()) {
    raise(ErrorKind::Protocol,
          call + "the slots of ranks " + rank_nums(garbage) +
              " do not hold jaccl frames: the all-gather does not return " +
              "every rank's input in rank order, or another program wrote " +
              "to the channel",
          ctx);
  }
  if (!bad_version.empty()) {
    raise(ErrorKind::Protocol,
          call + ranks_ref(bad_version) + verb(bad_version, " runs", " run") +
              " another jaccl protocol version",
          ctx);
  }
  // Slot r must come from rank r, and be the same process that filled it
  // for us if r is our own rank.
  for (int r = 0; r < size_; ++r) {
    if (header(r).rank != r) {
      raise(ErrorKind::Protocol,
            call + "the slot of " + rank_ref(r) + " holds the input of " +
                rank_ref(header(r).rank) +
                ": two processes claim one rank, or the all-gather returns " +
                "inputs out of rank order",
            ctx);
    }
  }
  if (header(rank_).instance != instance_) {
    raise(ErrorKind::Config,
          call + "another process also claims " + rank_ref(rank_) +
              " (its input replaced ours)",
          ctx);
  }
  std::vector<int> other_size, other_seq, other_n, other_fp;
  for (int r = 0; r < size_; ++r) {
    const Header x = header(r);
    if (x.size != size_)
      other_size.push_back(r);
    if (x.seq != seq_ || x.phase != phase)
      other_seq.push_back(r);
    if (x.n_bytes != n_bytes)
      other_n.push_back(r);
    if (x.fingerprint != fingerprint_)
      other_fp.push_back(r);
  }
  if (!other_size.empty()) {
    int r = other_size.front();
    raise(ErrorKind::Config,
          call + ranks_ref(other_size) + verb(other_size, " runs", " run") +
              " with group size " + std::to_string(header(r).size) +
              " but this rank has size " + std::to_string(size_),
          ctx);
  }
  if (!other_seq.empty()) {
    int r = other_seq.front();
    raise(ErrorKind::Protocol,
          call + ranks_ref(other_seq) + verb(other_seq, " is", " are") +
              " at call #" + std::to_string(header(r).seq) +
              " while this rank is at this one: ranks are out of step (a "
              "rank made an extra or a missing side-channel call)",
          ctx);
  }
  if (!other_n.empty()) {
    int r = other_n.front();
    raise(ErrorKind::Protocol,
          call + ranks_ref(other_n) + " passed n_bytes=" +
              std::to_string(header(r).n_bytes) + " but this rank passed " +
              std::to_string(n_bytes) + " (every rank must pass the same size)",
          ctx);
  }
  if (!other_fp.empty()) {
    int r = other_fp.front();
    raise(ErrorKind::Config,
          call + ranks_ref(other_fp) + verb(other_fp, " has", " have") +
              " a different configuration from this rank (differs in: " +
              ConfigFingerprint::diff(header(r).fingerprint, fingerprint_) +
              ")",
          ctx);
  }
}

const char* SideChannel::call_frames(const void* src, char* out, size_t n) {
  const size_t P = static_cast<size_t>(size_);
  if (n > (size_t(1) << 40) / P) {
    raise(ErrorKind::Usage,
          "side-channel all-gather of " + std::to_string(n) +
              " bytes per rank is too large",
          {.rank = rank_});
  }
  Header mine{kFrameMagic, kFrameVersion, 1,        0, seq_, n, rank_,
              size_,       fingerprint_,  instance_};
  const size_t frame_size = frame_bytes(size_);
  const char* in = static_cast<const char*>(src);
  const bool src_in_dst = input_in_output(in, out, P, n);
  // A payload of at least a frame per rank goes straight into the caller's
  // output (below), which then also holds the frames until the payloads
  // overwrite them: at 4096 ranks that is 256 KiB of fresh memory (64 page
  // faults) less per rank and call. Not when the input lies inside it.
  std::vector<char> frame(frame_size, 0);
  std::memcpy(frame.data(), &mine, sizeof(mine));
  if (n <= inline_bytes() && n > 0) {
    std::memcpy(frame.data() + kHeaderBytes, src, n);
  }
  const char* frames = nullptr;
  if (view_) {
    raw_call(frame.data(), nullptr, frame_size, &frames);
  } else {
    char* to = out != nullptr && n >= frame_size && !src_in_dst
                   ? out
                   : gathered(frame_size * P);
    raw_call(frame.data(), to, frame_size);
    frames = to;
  }
  check_frames(frames, frame_size, n);
  return frames;
}

void SideChannel::all_gather(const void* src, void* dst, size_t n) {
  std::lock_guard<std::mutex> lock(mu_);
  const size_t P = static_cast<size_t>(size_);
  char* out = static_cast<char*>(dst);
  const char* in = static_cast<const char*>(src);
  const char* frames = call_frames(src, out, n);
  if (n <= inline_bytes()) {
    for (size_t r = 0; r < P && n > 0; ++r) {
      std::memcpy(out + r * n, payload(frames, r), n);
    }
    ++seq_;
    return;
  }
  // Every rank agreed on n (and the call) in the frames: the payloads go
  // straight into the caller's output, with no header of their own (one
  // more frame per rank would be as much fresh memory again).
  std::vector<char> copy;
  if (input_in_output(in, out, P, n)) {  // keep it whole
    copy.assign(in, in + n);
    in = copy.data();
  }
  raw_call(in, out, n);
  if (std::memcmp(out + static_cast<size_t>(rank_) * n, in, n) != 0) {
    raise(ErrorKind::Protocol,
          "side-channel call #" + std::to_string(seq_) + " (" + description_ +
              "): this rank's own input came back changed: the all-gather "
              "does not return every input unchanged in rank order",
          {.rank = rank_});
  }
  ++seq_;
}

std::vector<char> SideChannel::all_gather(const void* src, size_t n) {
  std::vector<char> out(n * static_cast<size_t>(size_));
  all_gather(src, out.data(), n);
  return out;
}

std::vector<std::string> SideChannel::all_gather_bytes(std::string_view mine) {
  std::vector<std::string> out(static_cast<size_t>(size_));
  all_gather_bytes(mine, [&](int r, std::string_view b) {
    out[static_cast<size_t>(r)].assign(b);
  });
  return out;
}

void SideChannel::all_gather_bytes(
    std::string_view mine,
    const std::function<void(int, std::string_view)>& each) {
  // Contributions are set-up metadata (cards): a length past this is a
  // corrupt or hostile slot, refused before anything is allocated for it.
  constexpr uint64_t kMaxPart = uint64_t(16) << 20;
  if (mine.size() > kMaxPart) {
    raise(ErrorKind::Usage,
          "side-channel all-gather of " + std::to_string(mine.size()) +
              " bytes from one rank is too large (at most " +
              std::to_string(kMaxPart) + ")",
          {.rank = rank_});
  }
  // The first call carries each length and the first `head` bytes (what
  // the frame holds inline after the length), so contributions that fit
  // (most cards) take one call; the rest of the longer ones follows in a
  // second, padded to the longest remainder. The first call's slots are
  // read where the frames arrived (no copy: the frames are the channel's
  // own buffer, already in memory).
  const size_t slot = inline_bytes();
  const size_t head = slot - sizeof(uint64_t);
  std::vector<char> first(slot, 0);
  const uint64_t len = mine.size();
  std::memcpy(first.data(), &len, sizeof(len));
  std::memcpy(first.data() + sizeof(len), mine.data(),
              std::min<size_t>(mine.size(), head));
  std::unique_lock<std::mutex> lock(mu_);
  const char* frames = call_frames(first.data(), nullptr, slot);
  ++seq_;
  const size_t P = static_cast<size_t>(size_);
  std::vector<uint64_t> lens(P);
  for (size_t r = 0; r < P; ++r) {
    std::memcpy(&lens[r], payload(frames, r), sizeof(uint64_t));
  }
  std::vector<int> oversized;
  for (size_t r = 0; r < P; ++r) {
    if (lens[r] > kMaxPart) {
      oversized.push_back(static_cast<int>(r));
    }
  }
  if (!oversized.empty()) {
    raise(ErrorKind::Protocol,
          "side-channel call #" + std::to_string(seq_ - 1) + " (" +
              description_ + "): " + ranks_ref(oversized) + " announced " +
              std::to_string(lens[static_cast<size_t>(oversized.front())]) +
              " bytes, more than the " + std::to_string(kMaxPart) +
              " a side-channel contribution may have",
          {.rank = rank_});
  }
  if (lens[static_cast<size_t>(rank_)] != len) {
    raise(ErrorKind::Protocol,
          "side-channel call #" + std::to_string(seq_ - 1) + " (" +
              description_ + "): this rank's own slot came back with length " +
              std::to_string(lens[static_cast<size_t>(rank_)]) +
              " instead of " + std::to_string(len) +
              ": the all-gather does not return every input unchanged",
          {.rank = rank_});
  }
  const uint64_t longest = *std::max_element(lens.begin(), lens.end());
  if (longest <= head) {
    // Under the lock: another thread's call would overwrite the frames.
    for (size_t r = 0; r < P; ++r) {
      each(static_cast<int>(r),
           std::string_view(payload(frames, r) + sizeof(uint64_t),
                            static_cast<size_t>(lens[r])));
    }
    return;
  }
  std::vector<std::string> heads(P);
  for (size_t r = 0; r < P; ++r) {
    heads[r].assign(payload(frames, r) + sizeof(uint64_t),
                    std::min<size_t>(static_cast<size_t>(lens[r]), head));
  }
  lock.unlock();
  const size_t rest = static_cast<size_t>(longest) - head;
  std::vector<char> padded(rest, 0);
  if (mine.size() > head) {
    std::memcpy(padded.data(), mine.data() + head, mine.size() - head);
  }
  auto all = all_gather(padded.data(), rest);
  for (size_t r = 0; r < P; ++r) {
    if (lens[r] > head) {
      heads[r].append(all.data() + r * rest,
                      static_cast<size_t>(lens[r]) - head);
    }
    each(static_cast<int>(r), heads[r]);
  }
}

void SideChannel::all_gather_each(
    const void* src, size_t n,
    const std::function<void(int, const char*)>& each) {
  if (n > inline_bytes()) {
    raise(ErrorKind::Internal,
          "side-channel all_gather_each of " + std::to_string(n) +
              " bytes, more than a frame holds (" +
              std::to_string(inline_bytes()) + ")",
          {.rank = rank_});
  }
  std::lock_guard<std::mutex> lock(mu_);
  const char* frames = call_frames(src, nullptr, n);
  ++seq_;
  for (int r = 0; r < size_; ++r) {
    each(r, payload(frames, static_cast<size_t>(r)));
  }
}

void SideChannel::barrier() {
  char token = 0;
  all_gather(&token, 1);
}

void SideChannel::leave_barrier() {
  barrier();
  barrier();
}

}  // namespace jaccl::detail
