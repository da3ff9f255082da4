// Copyright 2026 the jaccl authors.
// The communication group, source-compatible with standalone JACCL: the first
// virtuals are JACCL's, in JACCL's order; ours come after them.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <vector>

#include "jaccl/reduce_op.h"
#include "jaccl/side_channel.h"
#include "jaccl/types.h"

namespace jaccl {

class Group {
 public:
  virtual ~Group() {}

  virtual int rank() = 0;
  virtual int size() = 0;

  virtual void all_sum(const void* input, void* output, size_t n_bytes,
                       int dtype) = 0;
  virtual void all_max(const void* input, void* output, size_t n_bytes,
                       int dtype) = 0;
  virtual void all_min(const void* input, void* output, size_t n_bytes,
                       int dtype) = 0;

  // output holds size() * n_bytes: every rank's input in rank order.
  virtual void all_gather(const void* input, void* output, size_t n_bytes) = 0;

  // input holds size() chunks of n_bytes; rank r receives in output the
  // element-wise sum over ranks of chunk r.
  virtual void sum_scatter(const void* input, void* output, size_t n_bytes,
                           int dtype) = 0;

  // Messages between a pair of ranks arrive in order; recv must name the same
  // n_bytes the matching send used.
  virtual void send(const void* input, size_t n_bytes, int dst) = 0;
  virtual void recv(void* output, size_t n_bytes, int src) = 0;

  virtual void barrier() = 0;

  // ---- jaccl extensions -------------------------------------------------

  // buf on root is sent; on every other rank it is overwritten.
  virtual void broadcast(void* buf, size_t n_bytes, int root) = 0;

  // Short description of the group's data plane and algorithm, for logs.
  virtual const char* backend_name() const = 0;

  // Collective over this group (every rank calls it), MLX's semantics: the
  // ranks that pass the same color form a child group, ordered by key, ties
  // by rank in this group; key -1 means this group's rank. A negative color
  // joins no child and returns nullptr (MPI_UNDEFINED). The child is set up
  // over this group (never the side channel again) on the best data plane
  // for its members; it is independent of this group and of its siblings
  // (usable from other threads at the same time, and after this group is
  // destroyed), and its errors name job ranks. The default throws
  // UsageError, for Group implementations outside jaccl.
  virtual std::shared_ptr<Group> split(int color, int key = -1);

  // input holds size() blocks of n_bytes, block j goes to rank j; output
  // holds size() blocks, block i from rank i. Input and output must not
  // overlap (input == output is a UsageError).
  virtual void all_to_all(const void* input, void* output, size_t n_bytes);
  // Variable sizes (MoE routing): input packs size() blocks back to back,
  // block j (send_counts[j] bytes) to rank j; output packs the blocks
  // received, block i (recv_counts[i] bytes) from rank i. Both spans have
  // size() entries (else UsageError); input and output must not overlap.
  // Counts are checked across ranks: rank a expecting x bytes from rank b
  // while b sends y != x is a ProtocolError naming both ranks and both
  // counts, on every rank (output is then unspecified; the group stays
  // usable). The defaults of both throw
  // UsageError, for Group implementations outside jaccl (as split's).
  virtual void all_to_allv(const void* input,
                           std::span<const size_t> send_counts, void* output,
                           std::span<const size_t> recv_counts);

  // Element-wise reduction of every rank's input with op (reduce_op.h);
  // ReduceOp::Sum is all_sum. Buffers as all_sum's: the same (in place) or
  // disjoint. jaccl's groups run every op on their own algorithms; the
  // default (for Group implementations outside jaccl) runs Sum/Max/Min as
  // all_sum/all_max/all_min and the others as an all_gather reduced in
  // rank order.
  virtual void all_reduce(const void* input, void* output, size_t n_bytes,
                          int dtype, ReduceOp op);

  // Rooted ops, MPI's Reduce, Gather and Scatter. Every rank names the same
  // root. The root's output (reduce, gather) and input (scatter) may be null
  // on the other ranks.
  // reduce: root's output holds the reduction of every rank's input (n_bytes
  // each); in place (input == output) on the root, or disjoint.
  virtual void reduce(const void* input, void* output, size_t n_bytes,
                      int dtype, ReduceOp op, int root);
  // gather: root's output holds size() blocks of n_bytes, block r from rank
  // r. scatter: root's input holds size() blocks; rank r receives block r
  // in output. Input and output must not overlap. Built on all_to_allv, so
  // ranks that disagree on the root or the size fail alike with a
  // ProtocolError.
  virtual void gather(const void* input, void* output, size_t n_bytes,
                      int root);
  virtual void scatter(const void* input, void* output, size_t n_bytes,
                       int root);

  // ---- jaccl extensions: elastic groups ----------------------------------
  // Carrying on after a failure (docs/failures.md, "Elastic groups"): catch
  // the error, revoke() so every member stops, shrink() to the survivors,
  // continue on the new group. Ranks are ranks of this group. The output of
  // a collective that failed is unspecified; no user buffer is freed or
  // kept. The defaults throw UsageError, for Group implementations outside
  // jaccl (as split's).

  // Any thread, any time: every operation of this group in flight in this
  // process returns promptly with an Aborted error, and so does every later
  // one (shrink too); the peers see this rank as failed.
  virtual void abort();
  // Not collective: every member's pending and later operations on this
  // group fail with a Revoked error naming the rank that revoked (peers()),
  // also members that are idle. The group can still be shrunk.
  virtual void revoke();
  // The ranks this rank knows to have failed, ascending (no communication).
  virtual std::vector<int> failed_ranks();
  // Collective over the live members: every one returns the same failed
  // ranks, ascending; a rank that fails meanwhile is in it on every member.
  virtual std::vector<int> agree_failed();
  // Collective over the live members (the excluded ranks need not call it;
  // every caller passes the same list): a new group of the live ranks not in
  // `exclude`, numbered in this group's order, set up over the control
  // connections that survive (never the side channel). It works whichever
  // ranks died, rank 0 too, also when one dies during the shrink. nullptr on
  // a rank in `exclude`; an Excluded error on a rank the others declared
  // failed (one stopped too long, say). Works on a failed, revoked or
  // healthy group; the new group is independent of this one.
  virtual std::shared_ptr<Group> shrink(std::span<const int> exclude = {});
  // Collective over every member (all alive: shrink() first), as
  // ncclCommGrow: a new group of new_size ranks in which the members keep
  // their ranks and the newcomers -- processes that call init() with
  // Config::set_join(generation() + 1), JACCL_JOIN -- take ranks size() ..
  // new_size - 1. They meet through `factory` (called with (rank,
  // new_size) on every member and newcomer) or, when it is empty, the grow
  // channel (Config::set_grow_channel, JACCL_GROW_CHANNEL: kv:// from
  // jaccl-run --elastic, file://, redis://), never through a rank, so
  // growing works whichever ranks died. A newcomer of another generation
  // or size is a ConfigError naming it; a newcomer that never comes, a
  // Timeout after the set-up timeout. The new group is independent of
  // this one; its errors name its own ranks.
  virtual std::shared_ptr<Group> grow(int new_size,
                                      AllGatherFactory factory = {});
  // 0 for a group from init(); a grown group is its parent's + 1 (shrink
  // and split keep it). A newcomer joins generation() + 1.
  virtual int generation();
};

}  // namespace jaccl
