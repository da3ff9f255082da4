// Copyright 2026 the jaccl authors.
// What every collective shares: op headers (mismatch detection), the op in
// flight (deadline, failure state, names) and run_transfers(), which posts
// a set of messages on the group's links (transport/endpoint.h) and
// progresses them all at once. No transport knowledge here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/deadline.h"
#include "common/op_kind.h"
#include "transport/endpoint.h"

namespace jaccl::detail {

// Mesh: direct messages; Ring: around the ring; Bruck: all_to_all in
// log2 rounds (a2a::all_to_all_bruck).
enum class Algo : uint8_t { Mesh = 1, Ring = 2, Bruck = 3 };

// What every participant of an op must agree on.
struct OpDesc {
  OpKind kind = OpKind::Barrier;
  int dtype = -1;  // -1: bytes
  uint64_t n_bytes = 0;
  uint32_t aux = 0;  // broadcast root
  Algo algo = Algo::Mesh;
  uint8_t streams = 1;  // wires the op's data is split over
};

// The op header: sent ahead of an op's first bytes on every link the op
// uses (TCP puts it in the same sendmsg as the first payload bytes).
struct OpHeader {
  uint32_t magic = 0;
  uint32_t seq = 0;  // ops so far on this (sender, receiver) link
  uint8_t kind = 0;
  uint8_t dtype = 0;
  uint8_t algo = 0;
  uint8_t streams = 0;
  uint32_t aux = 0;
  uint64_t n_bytes = 0;
};
static_assert(sizeof(OpHeader) == kMsgHeaderBytes);
inline constexpr size_t kHeaderBytes = sizeof(OpHeader);

OpHeader make_header(const OpDesc& op, uint32_t seq);
// Throws ProtocolError naming the peer and both sides' ops if got does not
// match what this rank is doing.
// rank and peer are job ranks.
void check_header(const OpHeader& got, const OpDesc& mine, uint32_t seq,
                  int rank, int peer);

// The op in flight on one rank.
struct OpContext {
  int rank = -1;          // job rank of this member, for messages
  const char* name = "";  // API name, "all_sum"
  OpDesc desc;
  Deadline deadline;
  FailureState* state = nullptr;
  // Microseconds to poll without sleeping before a blocking poll (0 when
  // ranks may outnumber cores): a loopback reply often comes within ~15 us,
  // and a sleep + wake-up costs about as much again.
  int spin_us = 0;
  // How a rank whose host's ranks outnumber its CPUs waits (never yields
  // by default).
  YieldPlan yield;
  // Job ranks of the group's members (empty: member i is rank i).
  const std::vector<int>* names = nullptr;
  // The job rank of member `peer`, for messages.
  int who(int peer) const {
    return names == nullptr || names->empty()
               ? peer
               : (*names)[static_cast<size_t>(peer)];
  }
};

// "all_sum timed out after 2 s waiting for rank 3 (<detail>)".
[[noreturn]] void raise_timeout(const OpContext& ctx, int peer,
                                const std::string& detail);

// A header plus payload to or from one peer on one link.
struct Transfer {
  Link* link = nullptr;
  int peer = -1;
  bool is_send = false;
  bool checked = false;  // receive: header checked
  // No op header: bytes that follow a headed message of the same op.
  bool bare = false;
  // Receive: posted by arm() once an earlier message said its length.
  bool deferred = false;
  bool reported = false;  // receive: RecvDone has seen it complete
  uint32_t seq = 0;       // sent, or expected
  OpHeader hdr{};
  char* buf = nullptr;
  size_t len = 0;
  Msg msg;
};

// Called once for each receive as it completes; it may arm() deferred
// receives (a length announced in the received bytes) and then returns
// true.
struct RecvDone {
  bool (*fn)(void* self, Transfer& x) = nullptr;
  void* self = nullptr;
};

// Posts a deferred receive of len bytes into buf (len 0: nothing to
// receive, done at once).
void arm(Transfer& x, char* buf, size_t len);

// Posts all transfers (sends first; deferred receives wait for arm()) and
// runs them to completion on this thread, checking each received header,
// bounded by the op deadline. scratch and ws are reusable.
void run_transfers(std::span<Transfer> xs, const OpContext& ctx, WaitSet& ws,
                   std::vector<Link*>& scratch, RecvDone on_done = {});

// The group's view of its links (owned by the Network) and the per-link op
// counters that go into headers.
struct Links {
  int rank = 0;
  int size = 1;
  std::vector<std::vector<Link*>> wires;  // wires[peer][wire]
  std::vector<uint32_t> send_seq;         // ops sent to peer so far
  std::vector<uint32_t> recv_seq;         // ops received from peer so far
  FailureState* state = nullptr;
  // Whether a send completes without the peer's receive (Network).
  bool local_send_completion = true;
  // Reused scratch of the mesh path (no allocation in the steady state).
  std::vector<Transfer> xfers;
  std::vector<Link*> used;
  WaitSet ws;
  std::vector<char> scratch;

  Transfer& add_send(int peer, int wire, const OpContext& ctx, const void* buf,
                     size_t len);
  Transfer& add_recv(int peer, int wire, void* buf, size_t len);
  // Runs the queued transfers, then counts the op on every link it used.
  // xfers must not grow while it runs (posted messages stay in place).
  void run(const OpContext& ctx, RecvDone on_done = {});
};

}  // namespace jaccl::detail
