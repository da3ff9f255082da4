// Copyright 2026 the jaccl authors.
// A group whose ranks all share one host: collectives through the host's
// shared-memory channel (transport/shm_channel.h: slots, sync steps,
// send/recv rings), designed for memory rather than as a pipe under socket
// algorithms. Small reductions: every rank stages its input and reduces all
// staged inputs itself (one sync). Large ones: a pipeline over cache-sized
// chunks (one sync per chunk, double-buffered) in which each rank stages
// the slices of a chunk its peers reduce, reduces its own 1/N slice into a
// shared result, and copies the result out; only the caller's buffers
// reach DRAM, whose bandwidth all local ranks share.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "collectives/all_to_all_math.h"
#include "collectives/op_runner.h"
#include "collectives/shm_strategy.h"
#include "common/reduce.h"
#include "jaccl/group.h"
#include "transport/shm_channel.h"

namespace jaccl::detail {

class ShmGroup : public Group {
 public:
  // ch: this rank's channel over a segment whose creator wrote the
  // group's strategy (ShmStrategy) and default_chunk_bytes() into the
  // header; op_timeout: one op's budget (0 = none).
  ShmGroup(ShmChannel ch, Millis op_timeout);
  ~ShmGroup() override;

  int rank() override { return rank_; }
  int size() override { return size_; }
  void all_sum(const void* in, void* out, size_t n, int dtype) override;
  void all_max(const void* in, void* out, size_t n, int dtype) override;
  void all_min(const void* in, void* out, size_t n, int dtype) override;
  void all_reduce(const void* in, void* out, size_t n, int dtype,
                  ReduceOp op) override;
  void all_gather(const void* in, void* out, size_t n) override;
  void sum_scatter(const void* in, void* out, size_t n, int dtype) override;
  void send(const void* in, size_t n, int dst) override;
  void recv(void* out, size_t n, int src) override;
  void barrier() override;
  void broadcast(void* buf, size_t n, int root) override;
  const char* backend_name() const override { return "shm"; }
  // shm_all_to_all.cpp: every rank stages its blocks, then copies its own
  // block out of every peer's staging slot (chunked when the blocks do not
  // fit a slot).
  void all_to_all(const void* in, void* out, size_t n) override;
  void all_to_allv(const void* in, std::span<const size_t> send_counts,
                   void* out, std::span<const size_t> recv_counts) override;

  // The chunk large ops stage in, chosen once by the segment's creator
  // (header) so that every rank stages the same chunks.
  static uint64_t default_chunk_bytes();

  // How often this rank has moved itself off a CPU it shared with a rank
  // it waited for (tests and logs).
  int cpu_moves() const { return ch_.cpu_moves(); }

  // Whether this host's ranks outnumber the CPUs this rank may use (then
  // every wait yields; tests).
  bool oversubscribed() const { return ch_.oversubscribed(); }

  // The copy-out used for large ops of this kind and size from now on
  // (Auto while still measuring).
  ShmStrategy strategy_for(ShmTuner::Kind kind, size_t bytes) const {
    return tuner_.chosen(kind, bytes);
  }

 private:
  void reduce_all(ReduceOp op, OpKind kind, const void* in, void* out, size_t n,
                  int dtype);
  void reduce_large(ReduceOp op, const ShmStepDesc& d, const char* src,
                    char* dst, size_t n, int dtype);
  // The one-sync path's reduction, after the step that staged the inputs
  // at `band` in every slot.
  void reduce_small(ReduceOp op, const ShmStepDesc& d, const char* in,
                    char* out, size_t n, int dtype, size_t band);
  // The channel's sync step under the op's deadline, carrying this rank's
  // timing report to the tuner and the slowest rank's back.
  // `carry`: operands for the step's line (ShmChannel::arrive).
  void step(const ShmStepDesc& d, std::span<const char> carry = {}) {
    arrive(d, carry);
    await();
  }
  // The step in halves (ShmChannel::arrive/await): between them this rank
  // may copy between its own buffers while the others arrive.
  void arrive(const ShmStepDesc& d, std::span<const char> carry = {});
  void await();
  // The host's first rank logs each size class's choice (JACCL_LOG=debug).
  void log_decision() const;
  // all_to_all(v)'s bodies (shm_all_to_all.cpp).
  void a2a_fixed(const char* src, char* dst, size_t n);
  void a2a_varying(const char* src, std::span<const size_t> send, char* dst,
                   std::span<const size_t> recv);
  // One all_to_all(v)'s blocks: block j of this rank (send[j] bytes at
  // in + soff[j]) goes to rank j, block i from rank i (recv[i] bytes at
  // out + roff[i]); peer_off[q] is where block `rank` starts in rank q's
  // input; `largest` is the job's largest block, `total` the tuner's size
  // (the bytes of a rank's input, on average over the ranks). Blocks of at
  // least stream_from bytes are staged with streaming stores whatever the
  // way (all_to_allv's small ops).
  struct A2aBlocks {
    const char* in;
    const size_t* send;
    const size_t* soff;
    char* out;
    const size_t* recv;
    const size_t* roff;
    const size_t* peer_off;
    uint64_t largest;
    size_t total;
    size_t stream_from = SIZE_MAX;
    // Direct only (null: every block read by its receiver): pushes, the
    // plan of a2a::balance_pushes (pushes[i * n + j]: the bytes at the end
    // of rank i's block for rank j that rank i writes into j's output);
    // peer_roff[j], where block `rank` starts in rank j's output.
    const uint64_t* pushes = nullptr;
    const uint64_t* peer_roff = nullptr;
  };
  // all_to_allv's row in a slot: this rank's send and receive counts, then
  // its output's address (where peers' direct writes go), in whole lines.
  size_t a2a_row_bytes() const {
    return ShmLayout::align(
        (2 * static_cast<size_t>(size_) + 1) * sizeof(uint64_t), 64);
  }
  // Where a round stages: block q's window at slot + off + q * window.
  struct A2aPlace {
    size_t off;
    size_t window;
  };
  // The window of rank `stager`'s slot that holds its block for rank
  // `reader`: rotated, so that a rank's own (unused) window comes first and
  // its block for the next rank second.
  size_t a2a_window(size_t stager, size_t reader) const {
    const auto P = static_cast<size_t>(size_);
    return reader >= stager ? reader - stager : reader + P - stager;
  }
  // The staging windows of a slot whose first `off` bytes hold something
  // else (all_to_allv's counts, when they do not fit the result buffer).
  A2aPlace a2a_place(size_t off) const;
  // all_to_all(v)'s windows for calls whose rounds would outgrow the
  // caches (a2a_in_cache: by the op's size, the same on every rank).
  A2aPlace a2a_cache_place() const;
  bool a2a_in_cache(size_t total) const;
  // Moves them the way the tuner picks (staged rounds or direct reads).
  void a2a_blocks(const ShmStepDesc& d, const A2aBlocks& b);
  // Staged: rounds of windows through the slots, stored as `way` says.
  // staged0: every rank staged round 0 before the last sync step (which
  // all_to_allv's counts rode), so that round begins with the copy-out;
  // own_done: bytes of this rank's own block already copied.
  void a2a_rounds(const ShmStepDesc& d, const A2aBlocks& b, const ShmWay& way,
                  const A2aPlace& pl, bool staged0, size_t own_done);
  // Direct: every block read straight out of its sender's input with
  // process_vm_readv (one copy), or its tail written into its receiver's
  // output (process_vm_writev) where b.pushes says. Two syncs: addresses
  // published, copies done; one when the addresses rode the last step
  // (published: then a2a_peers_ holds them).
  void a2a_direct(const ShmStepDesc& d, const A2aBlocks& b, bool published,
                  size_t own_done);
  // What every rank published at a step: its pid and its input's address
  // (and all_to_allv's: its output's, from its row).
  struct PeerInput {
    int32_t pid;
    uint64_t addr;
    uint64_t out = 0;
  };
  void note_peer_inputs();
  // all_to_allv's direct way: who copies which part of each block
  // (a2a::balance_pushes), into b's push fields where any rank writes.
  void plan_pushes(const a2a::Counts& c, A2aBlocks& b);
  // Whether direct reads are a way for an op of `total` bytes a rank
  // (tuner_ways' size rule).
  bool a2a_direct_size(size_t total) const;
  // all_gather's direct way: every peer's input read into the output.
  void gather_direct(const ShmStepDesc& d, const char* src, char* dst,
                     size_t n);
  // Whether every rank of the host can read every peer's memory (probed
  // on the first large all_to_all, the same verdict on every rank).
  bool a2a_direct_ok(const ShmStepDesc& d);
  // How many ways the tuner tries for a call: direct reads join the stored
  // ones where the call is eligible (size), the strategy allows them and
  // the probe passed (the same answer on every rank).
  int tuner_ways(bool eligible, const ShmStepDesc& d);
  // The job rank of member q, for messages.
  int who(int q) const { return ch_.who(q); }
  // Sync steps so far: a rank stages into slot(rank_, steps() + 1) and
  // reads slot(q, steps()) after the step.
  uint64_t steps() const { return ch_.steps(); }
  // Where in its slot (and the result) an all_sum or a small all_gather of
  // `bytes` stages this call (0 when it stays put; shm_group.cpp says why).
  size_t band_of(size_t bytes);
  char* slot(int r, uint64_t s) const { return ch_.slot(r, s); }
  char* result(uint64_t s) const { return ch_.result(s); }

  ShmChannel ch_;
  const int rank_;
  const int size_;
  const ShmLayout layout_;
  OpRunner ops_;        // every op's lock, checks, deadline and failure rule
  size_t chunk_bytes_;  // large ops' unit of staging (<= slot_bytes)
  size_t llc_bytes_;    // last-level cache (sysfs)
  size_t l2_bytes_;     // one core's L2 (stage_stream)
  ShmTuner tuner_;      // cached or streaming copy-out, measured per size
  std::vector<uint64_t> counts_;      // all_to_allv's counts matrix
  std::vector<size_t> a2a_scratch_;   // all_to_all(v)'s counts and offsets
  std::vector<PeerInput> a2a_peers_;  // a2a_direct: every rank's input
  // plan_pushes: the plan (n x n), its loads (n), then peer_roff (n).
  std::vector<uint64_t> a2a_pushes_;
  const int32_t pid_;  // this process (direct reads)
  // all_to_all(v)'s staging windows: whole slots, after all_to_allv's
  // counts where they ride the slot's head, and a core's cache share for
  // large ops (shm_all_to_all.cpp).
  const A2aPlace a2a_whole_;
  const A2aPlace a2a_after_row_;
  const A2aPlace a2a_cache_;
  std::vector<char> reduce_scratch_;  // reduce_large in place, rank >= 2
  uint64_t bands_ = 0;                // band_of: bands handed out so far
  bool populated_ = false;            // band_of: the window is mapped
  int direct_ = -1;                   // a2a_direct_ok: -1 not probed yet
  uint64_t probe_word_ = 0;           // what peers read in the probe
  // The first guess at whether an op whose ranks each touch `bytes` of
  // their own buffers should write its output with non-temporal stores:
  // when all ranks' buffers together overflow the last-level cache. Only
  // the first trial of each size class uses it; the tuner then measures.
  bool streaming(size_t bytes) const {
    return bytes * static_cast<size_t>(size_) >= llc_bytes_;
  }
  // Whether a block of `bytes` staged for rank q goes out with streaming
  // stores, where the way asks for them (`stream`): not when q comes back
  // to this rank's CPU (oversubscribed ranks share CPUs in bands) and both
  // directions of the pair's double-buffered staging fit half of the
  // L2: q read those lines last on this core, so ordinary stores hit this
  // core's cache and q reads them back from it, where streaming stores
  // send both trips through memory.
  bool stage_stream(int q, size_t bytes, bool stream) const {
    return stream && !(ch_.shares_home(q) && 4 * bytes <= l2_bytes_ / 2);
  }
  // The tuner's first guess for an all_to_all(v) of `total` bytes a rank
  // (each rank reads its input and writes its output).
  ShmStrategy a2a_guess(size_t total) const {
    return streaming(2 * total / static_cast<size_t>(size_))
               ? ShmStrategy::Stream
               : ShmStrategy::Cached;
  }
};

}  // namespace jaccl::detail
