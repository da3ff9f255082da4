// Copyright 2026 the jaccl authors.
// The rendezvous protocol behind the store-based side channels: an all-gather
// over a tiny key-value namespace (RendezvousStore). The shared directory
// (file_channel.h, file://), Redis (redis_channel.h, redis://) and torch's
// c10d store (torch/store_all_gather.cpp, the PyTorch backend) are stores.
//
// Protocol, per job namespace (a directory <dir>/<job>/, or the Redis key
// prefix <prefix>/<job>/):
//
//   hello/<r>      rank r != 0: a fresh random nonce N_r (this process only)
//   epoch          rank 0: "E N_1 N_2 ... N_{size-1}", E a fresh random epoch
//   E/<k>/<r>      rank r's input to call k (header + bytes)
//   E/done/<r>     rank r has read everything it will ever read
//
// A rank r != 0 accepts an epoch only once the epoch record lists *its own*
// nonce: that proves rank 0 wrote it after rank r started, so a leftover
// `epoch` from a crashed run with the same job id is never taken for current.
// Rank 0 keeps re-reading the hello records of ranks it has not heard from
// during call 0 and rewrites the epoch record when one changes (a stale hello
// replaced by a fresh one), so start order does not matter. Every data record
// is named by E and carries (E, call, rank, size, n) in its header, so nothing
// written by another run is ever read as current data.
//
// Clean-up: rank r deletes its record of call k-1 once call k completes
// (every rank writes call k only after reading all of call k-1). When the
// channel is destroyed, rank r writes E/done/<r>; the rank that then sees all
// done records removes the last call's records, the done records and the
// epoch. This is barrier-free and best effort: a crashed or slow-to-exit rank
// leaves records behind, which rank 0 of the next run with the same job id
// removes once its own call 0 has completed (records of other epochs), and
// which Redis also expires. A failed channel (a call threw) removes only its
// own records.
//
// Job ids: each job lives in its own namespace. Two jobs that run at the
// same time with the same job id and the same directory / Redis prefix
// collide (see job_id() in uri.h); a job id may be reused once the previous
// job with that id has ended, even if it crashed.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/deadline.h"
#include "jaccl/side_channel.h"

namespace jaccl::detail {

// A tiny key-value namespace (gloo's Store, reduced). Keys are short ASCII
// paths like "E/3/7". Errors are jaccl::Errors naming where().
class RendezvousStore {
 public:
  virtual ~RendezvousStore() = default;
  // For messages: "directory /shared/jaccl/job1", "redis://h:6379 keys a/b/".
  virtual const std::string& where() const = 0;
  // The address to put in an ErrorContext (a path or host:port).
  virtual const std::string& address() const = 0;
  // Publishes atomically: a reader sees the whole value or nothing.
  virtual void put(const std::string& key, std::string_view value) = 0;
  // The values of keys, nullopt where absent; never waits for a key (the
  // protocol polls, and a key may be removed between two looks).
  virtual std::vector<std::optional<std::string>> get(
      const std::vector<std::string>& keys) = 0;
  // Best effort; never throws.
  virtual void remove(const std::vector<std::string>& keys) noexcept = 0;
  // Every key in the namespace; only for removing earlier runs' records, so
  // a store that cannot list returns none (its leftovers stay, unread).
  virtual std::vector<std::string> list() = 0;
  // The namespace is empty for now (e.g. rmdir); best effort.
  virtual void finish() noexcept {}
};

// The all-gather over a store (the protocol above). timeout bounds each call
// (<= 0: no limit); expiry is a TimeoutError naming the missing ranks and
// store->where().
AllGatherFn make_store_all_gather(std::shared_ptr<RendezvousStore> store,
                                  int rank, int size, Millis timeout,
                                  std::string channel_name);

}  // namespace jaccl::detail
