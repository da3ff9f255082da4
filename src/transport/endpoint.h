// Copyright 2026 the jaccl authors.
// The one interface between the collectives and a network transport: a
// Link is one wire to one peer on which the algorithms post messages (a
// byte range, optionally preceded by the op's fixed-size header) to send or
// to receive, without blocking; progress() moves what can move; a WaitSet
// sleeps until some link may progress, the group fails or the op's deadline
// passes. The shape is that of NCCL's net plugin (isend/irecv/test) and
// Gloo's Pair/UnboundBuffer: TCP implements it over a byte stream
// (transport/tcp_endpoint.h), libfabric over tagged RDM messages
// (transport/ofi_link.h, on the endpoints of transport/ofi/). Shared memory
// is not a Link: its channel is transport/shm_channel.h. No OS header here:
// the collectives include it.
//
// Contract, for every implementation:
// - Messages posted on one link in one direction are delivered and
//   complete in post order; sender and receiver post the same sequence of
//   lengths (the algorithms guarantee it; the op header catches ranks that
//   disagree).
// - A message with a header carries kMsgHeaderBytes header bytes before its
//   payload. On a receive, hdr_in becomes true once the header is in; the
//   caller checks it and calls accept(). A transport may land payload bytes
//   in buf before accept() (TCP reads header and payload in one recvmsg),
//   never beyond buf + len; one that cannot tell a short message from a
//   long one (libfabric truncation) holds the link's receives until then.
// - post_*() never block and never fail for lack of room: a transport that
//   cannot issue a message now (EAGAIN, -FI_EAGAIN) keeps it and retries in
//   progress().
// - progress() throws a jaccl::Error naming this rank and the peer (a lost
//   peer is PeerLost; other failures Io) and never blocks.
// - A Msg stays in place, untouched by the caller, from its post until done
//   (or until clear()).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/deadline.h"
#include "common/host_load.h"
#include "transport/failure.h"

namespace jaccl::detail {

// Size of the op header the collectives put ahead of an op's first bytes.
inline constexpr size_t kMsgHeaderBytes = 24;

// One message posted on a Link. Owned by the caller.
struct Msg {
  // Set by the caller before posting.
  void* hdr = nullptr;  // kMsgHeaderBytes to send first / to receive into
  char* buf = nullptr;
  size_t len = 0;
  // The op's whole payload to this peer on this link, not one piece of a
  // stream of them (the ring's): a transport may size its buffers by it.
  bool whole = false;
  // Set by the link.
  bool hdr_in = false;  // receive: the header has arrived
  bool done = false;    // header and all len bytes moved
  size_t moved = 0;     // payload bytes moved so far (for messages)
  // Private to the link that holds the message.
  size_t hdr_done = 0;
  Msg* next = nullptr;
  bool accepted = false;
  alignas(8) unsigned char priv[128] = {};

  // Resets the results before a (re)post.
  void prepare(void* h, const void* b, size_t n) {
    hdr = h;
    buf = const_cast<char*>(static_cast<const char*>(b));
    len = n;
    whole = hdr_in = done = accepted = false;
    moved = hdr_done = 0;
    next = nullptr;
  }
};

// A FIFO of posted messages through Msg::next (intrusive: no allocation),
// as every link keeps its sends and receives.
struct MsgQueue {
  Msg* head = nullptr;
  Msg* tail = nullptr;
  void push(Msg& m) {
    m.next = nullptr;
    (tail != nullptr ? tail->next : head) = &m;
    tail = &m;
  }
  void pop() {
    head = head->next;
    if (head == nullptr) {
      tail = nullptr;
    }
  }
  bool empty() const { return head == nullptr; }
};

class WaitSet;

// One wire to one peer.
class Link {
 public:
  virtual ~Link() = default;
  virtual void post_send(Msg& m) = 0;
  virtual void post_recv(Msg& m) = 0;
  // The header of the received m was checked and matches.
  virtual void accept(Msg& m) = 0;
  // Moves what can move without blocking; true if anything moved. op names
  // the collective for messages.
  virtual bool progress(const char* op) = 0;
  // Tells the wait set what this link waits for (nothing when idle).
  virtual void want(WaitSet& ws) = 0;
  // Best effort, never blocks or throws: puts the rest of every queued
  // header on the wire, so a peer that waits for our op's header sees it
  // (and reports a mismatch instead of timing out).
  virtual void flush_headers() = 0;
  // Forgets every posted message (end of an op, or after a failure).
  virtual void clear() = 0;
};

// Waiting on a set of links: spin briefly, then sleep until a link may
// progress, bounded by the deadline and woken by the group's failure.
class WaitSet {
 public:
  WaitSet();
  ~WaitSet();
  WaitSet(const WaitSet&) = delete;
  WaitSet& operator=(const WaitSet&) = delete;

  void clear();
  // Readable / writable interest in a descriptor.
  void add_fd(int fd, bool read, bool write);
  // Something can progress already (completions pending): do not sleep.
  void ready_now() { ready_ = true; }
  // A link whose progress must be driven by calls, not only by a
  // descriptor (a libfabric provider with manual progress): spin by
  // calling progress(), and sleep at most max_sleep_ms at a time.
  void driven(int max_sleep_ms) {
    driven_ = true;
    if (max_sleep_ms_ < 0 || max_sleep_ms < max_sleep_ms_) {
      max_sleep_ms_ = max_sleep_ms;
    }
  }
  // Starts a new spin window (call when the links made progress).
  void progressed() { spinning_ = false; }
  // Whether the next wait() still spins (a new window, or one not yet
  // over): a driven link can then skip arming its descriptor.
  bool spinning() const;
  // Waits: true when a link may progress (or the spin window asks for
  // another round of progress), false when the deadline expired. Rethrows
  // the group's failure when woken by it. With yp.ranks > 0 (this host's
  // ranks outnumber its CPUs) and while YieldGate::host() allows, it polls
  // and yields for up to kYieldNs after the last progress before it
  // sleeps.
  bool wait(const Deadline& dl, FailureState& state, int spin_us,
            const YieldPlan& yp, const char* op, int rank);

 private:
  struct Item {
    int fd;
    short events;
    short revents;
  };
  void yield_now(const YieldPlan& yp);

  std::vector<Item> items_;
  bool ready_ = false;
  bool driven_ = false;
  int max_sleep_ms_ = -1;
  bool spinning_ = false;
  long long spin_until_ns_ = 0;
  // Yielding stops this long after the last progress, so that a rank
  // waiting for a stopped or computing peer goes to sleep.
  static constexpr long long kYieldNs = 2 * 1000 * 1000;
  static constexpr long long kHomeEveryNs = 1000 * 1000;
  long long yield_until_ns_ = 0;
  long long next_home_ns_ = 0;
  // The clock as wait() last read it: spinning() answers from it, one
  // round stale, to save a clock read per round of a spinning op.
  long long now_ns_ = 0;
  // The next sleep of a driven wait (doubles up to the cap).
  static constexpr long long kMinBackoffUs = 8;
  long long backoff_us_ = kMinBackoffUs;
};

// What a network transport hands to the collectives.
struct Network {
  int rank = -1;
  int size = 0;
  // links[peer][w]: the w-th wire to peer (empty for self and for peers
  // this topology does not connect).
  std::vector<std::vector<std::unique_ptr<Link>>> links;
  // names[i]: the job rank of member i, when the group is a subset of the
  // job (the hosts' leaders); empty: member i is rank i.
  std::vector<int> names;
  Millis op_timeout{0};  // one blocking operation's budget (0 = none)
  std::shared_ptr<FailureState> state = std::make_shared<FailureState>();
  // Keeps what the links need alive (liveness monitor, libfabric domain).
  std::shared_ptr<void> keepalive;
  // "tcp", "ofi (tcp;ofi_rxm)": what carries the data, for backend_name().
  std::string transport = "tcp";
  // Whether a send completes without the peer having posted its receive
  // (true for TCP's socket buffer; libfabric may wait for the receiver).
  bool local_send_completion = true;
  // Microseconds small ops spin before sleeping (-1: the group decides from
  // the core count).
  int spin_us = -1;
  // The lock the group's ops hold while they run (OpRunner's), shared with
  // the WireBank (null: the group makes its own).
  std::shared_ptr<std::mutex> op_lock;
  // As in ControlBlock: the members on this kernel and their CPUs (0:
  // unknown).
  int host_ranks = 0;
  int host_cpus = 0;
  // This rank's place among them, in rank order (-1: unknown).
  int host_index = -1;
};

}  // namespace jaccl::detail
