// Copyright 2026 the jaccl authors.
// The TCP star's shared replies: rank 0 writes a call's result once into a
// sealed memfd and tells each rank that can open it (through
// /proc/<pid>/fd, as the shared-memory data plane does: same kernel, pid
// namespace and user) where it is, instead of sending every rank all of it
// through loopback. At 4096 thread ranks the socket work of those replies
// (1 GiB a round, written and read by the kernel) was most of a call. A
// memfd has no name, so nothing outlives rank 0. Other ranks get the result
// over TCP as before. Internal to src/bootstrap.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/deadline.h"
#include "common/error.h"
#include "common/shm_segment.h"

namespace jaccl::detail::star {

// Where a shared result is, the body of a reply with flag kShared:
//   magic u32, pid u32, fd u32, key u64, segment bytes u64, offset u64,
//   length u64
struct SharedRef {
  uint32_t pid = 0;            // rank 0's process
  int32_t fd = -1;             // its descriptor of the memfd
  uint64_t key = 0;            // random, in the segment's header and its name
  uint64_t segment_bytes = 0;  // the segment's size
  uint64_t offset = 0;         // where the result starts in it
  uint64_t length = 0;         // the result's bytes
};

inline constexpr size_t kSharedRefBytes = 44;

// The memfd's name for a key: "jaccl-star-" and the key in hex.
std::string shared_label(uint64_t key);

std::vector<uint8_t> encode_shared_ref(const SharedRef& r);
// nullopt (and *why) when the bytes are not a well-formed reference: a bad
// size or magic, no process or descriptor, or a result outside its
// segment.
std::optional<SharedRef> decode_shared_ref(std::span<const uint8_t> b,
                                           std::string* why);

// What decides whether a rank can open rank 0's memfd through /proc: the
// kernel (boot id), the pid namespace and the user, hashed. Equal keys: a
// segment one side makes, the other can map. 0 when this process cannot
// tell.
uint64_t shared_host_key();

// Rank 0's segment for results, made on first use and grown by making
// another. Each rank counts itself in the segment's header once it has
// mapped it: a segment lives on in its ranks' mappings, but they open it
// through rank 0's descriptor. A new segment replaces the old one only when
// every rank has asked for the next call, so after mapping the old one; the
// last one, at destruction, once each rank told of it has counted itself
// (or `linger` has passed).
class SharedResults {
 public:
  SharedResults(std::string address, Millis linger)
      : address_(std::move(address)), linger_(linger) {}
  ~SharedResults();
  SharedResults(const SharedResults&) = delete;
  SharedResults& operator=(const SharedResults&) = delete;

  // Copies the result into the segment for `ranks` ranks to read; nullopt
  // (logged) when no segment can hold it: those replies go over TCP.
  std::optional<SharedRef> publish(const char* result, size_t bytes, int ranks);
  // Nobody will read the last result (rank 0 failed the call).
  void abandon() { told_ = 0; }

 private:
  std::string address_;
  Millis linger_;
  ShmSegment seg_;
  uint64_t key_ = 0;
  int told_ = 0;  // ranks sent a reference to seg_
  bool warned_ = false;
};

// A rank's side: copies a shared result into its output, or says where it
// is. The mapping is shared by the ranks of a process (thread ranks by the
// thousand would otherwise each fault the segment's pages in).
class SharedReader {
 public:
  // Throws Io when the segment cannot be opened, Protocol when it is not the
  // one the reference names.
  void read(const SharedRef& ref, char* dst, const ErrorContext& ctx);
  // Where the result is in the mapping: valid until this rank's next call
  // (rank 0 writes the next result only once every rank has asked for it).
  const char* locate(const SharedRef& ref, const ErrorContext& ctx);

 private:
  std::shared_ptr<const ShmSegment> seg_;
  uint64_t key_ = 0;  // seg_'s, in whose header this rank counted itself
};

}  // namespace jaccl::detail::star
