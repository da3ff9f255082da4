// Copyright 2026 the jaccl authors.
// all_to_all and all_to_allv: the counts check every group shares (the
// argument checks are in op_checks.h), and the direct exchange over a network
// group's links (every block to and from every peer posted at once, large
// blocks split over all of the pair's wires, bounded by the op deadline).
//
// all_to_allv puts every rank's send and receive counts on every rank and
// checks the whole matrix there, so a mismatch is found on every rank at the
// same point: every rank throws the same ProtocolError and the group stays
// usable (nothing is out of step: the groups run the check through
// OpRunner::agreed). The shared-memory group gathers the counts before any
// data moves; over links the counts travel ahead of the data in the same
// round (a block whose counts disagree is dropped by its receiver).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "collectives/all_to_all_math.h"

namespace jaccl::detail {
struct Links;      // exchange.h (not included: the shared-memory group
struct OpContext;  // includes this header for the rank arithmetic only)
}  // namespace jaccl::detail

namespace jaccl::detail::a2a {

// Blocks of at least this many bytes per wire go over several wires.
inline constexpr size_t kSplitBytes = 256 * 1024;

// This rank's row of the counts matrix (Counts in all_to_all_math.h):
// 2 * size entries.
void fill_row(std::span<const size_t> send, std::span<const size_t> recv,
              uint64_t* row);

// Throws the ProtocolError for the matrix's first mismatch, if it has one:
// "all_to_allv: rank 2 expects 12 bytes from rank 3, but rank 3 sends 16
// bytes to rank 2". who maps members to job ranks; rank is this rank's job
// rank.
void check_matrix(const Counts& c, int rank,
                  const std::function<int(int)>& who);

// Byte offsets of packed blocks: out[i] = counts[0] + ... + counts[i-1].
void offsets_of(std::span<const size_t> counts, std::vector<size_t>& out);

// One peer's share of a network exchange (member index of the group).
struct Block {
  int peer = -1;
  const char* send = nullptr;
  size_t send_bytes = 0;
  char* recv = nullptr;
  size_t recv_bytes = 0;
};

// Posts every block's send and receive at once and runs them to
// completion under ctx's deadline, checking each header against ctx.desc.
// Empty sends and receives are skipped (both sides of a pair know the
// size); a block of at least 2 * kSplitBytes goes over up to all of the
// pair's wires (a2a::wires_for). ctx.desc.streams should hold the group's
// wire count (checked in headers).
void exchange(Links& l, const OpContext& ctx, std::span<const Block> blocks);

// The fixed-size all_to_all over links (size >= 2, n > 0; the caller has
// checked the arguments): own block copied, the others exchanged.
void all_to_all(Links& l, const OpContext& ctx, const char* in, char* out,
                size_t n);

// The same in Bruck's rounds (bruck_rounds in all_to_all_math.h): fewer,
// larger messages, one round after another. For ranks that share CPUs,
// where every message's kernel work (a loopback send costs the sender the
// receiver's side too) is paid on the same few cores: 4 ranks send 8
// messages per call instead of 12. ctx.desc.algo must be Algo::Bruck on
// every rank. scratch is reused.
void all_to_all_bruck(Links& l, const OpContext& ctx, const char* in, char* out,
                      size_t n, std::vector<char>& scratch);

// all_to_allv's state over links, kept by the group between calls.
struct VState {
  std::vector<uint64_t> counts;  // the counts matrix (Counts)
  std::vector<size_t> soff, roff;
  std::vector<size_t> first;  // per peer: its first block receive in xfers
  // Per peer: where a block whose counts disagree goes (dropped).
  std::vector<std::vector<char>> drop;
  // Bruck's rounds (all_to_allv_bruck): per distance i, where the block
  // now held for rank + i is and its length; one round's outgoing bytes;
  // the rows that arrive in a round; each round's incoming blocks.
  std::vector<const char*> at;
  std::vector<size_t> len;
  std::vector<char> out;
  std::vector<uint64_t> rows;
  std::vector<std::vector<char>> in;
};

// all_to_allv over links in one round (one rank: no transfers): to every peer
// this rank's row of the counts matrix under the op header (ctx.desc), then its
// block without one; a receiver posts a block's receive once the sender's
// row has said how long it is: into dst where the counts agree, else
// dropped (so the streams stay in step). Returns the whole matrix, the
// same on every rank, for the caller to check; the own block is not
// copied.
Counts all_to_allv(Links& l, const OpContext& ctx, const char* src,
                   std::span<const size_t> send, char* dst,
                   std::span<const size_t> recv, VState& st);

// all_to_allv in Bruck's rounds, for the same ranks as all_to_all_bruck
// (fewer, larger messages): round k sends rank + 2^k, under the op header,
// the rows of the counts matrix this rank knows and that rank lacks (rows
// rank, rank - 1, ..., min(2^k, n - 2^k) of them), then every block it
// holds at a distance with bit k set; the receiver learns those blocks'
// lengths from the rows in front of them (a block at distance i comes
// from rank sender - i mod 2^k). After the last round every rank holds the
// whole matrix and every block sent to it; a block is copied into dst
// only where the counts agree. Returns the matrix for the caller to check;
// the own block is not copied. ctx.desc.algo must be Algo::Bruck on every
// rank.
Counts all_to_allv_bruck(Links& l, const OpContext& ctx, const char* src,
                         std::span<const size_t> send, char* dst,
                         std::span<const size_t> recv, VState& st);

}  // namespace jaccl::detail::a2a
