// Copyright 2026 the jaccl authors.
// The liveness monitor's insides, shared by liveness.cpp (the thread's
// I/O, heartbeats, deaths and abort notices) and liveness_elastic.cpp
// (revoke, exclusion, the agreement and the survivors' mailbox).
#pragma once

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "common/error.h"
#include "transport/agreement.h"
#include "transport/control_frame.h"
#include "transport/liveness.h"

namespace jaccl::detail {

// The peer whose frame the monitor thread is handling (-1: none, or a
// caller's thread): a notice learned from the hub is not sent back to it.
inline thread_local int t_notice_from = -1;

struct LivenessMonitor::Shared {
  Shared(int rank, int size, uint8_t generation)
      : self(rank), gen(generation), agreement(rank, size) {}

  const int self;
  const uint8_t gen;  // of this monitor's frames (control_frame.h)
  std::mutex mu;
  std::condition_variable cv;    // callers wait for decisions and mail
  std::vector<std::string> out;  // bytes queued per peer
  std::vector<char> open;        // control socket still usable
  bool stopping = false;
  bool loop_ended = false;  // the thread reads nothing more
  bool close_all = false;   // aborted or excluded: drop every connection
  // FailureState::catch_up: requests made, and the last one the thread
  // answered after reading everything received before it.
  uint64_t sync_asked = 0, sync_done = 0;
  Fd wake;
  // Elastic state (under mu): ranks failed or gone (GOODBYE), the
  // agreement, mail by (tag, sender).
  RankSet gone;
  Agreement agreement;
  std::map<std::pair<uint64_t, int>, std::string> mail;
  uint64_t mail_floor = 0;
  // hand_off (under mu): HANDOFF queued to p (nothing more goes out), the
  // connection left this monitor (with fd and what goes with it; invalid
  // fd: lost first), and whether any hand-off happened.
  std::vector<char> handing, handed;
  std::vector<Fd> handed_fd;
  std::vector<Taken> handed_taken;  // sized at the first hand-off
  bool handed_off = false;
  // Taken over (under mu): the parent's last decision as its monitor sent
  // it, and whom it came from (liveness.h: Inherit).
  std::string parent_decide;
  int parent_held_from = -1;
  // agree(hand_off_to): the epoch whose ok decision hands these peers'
  // connections off (0: none).
  uint64_t arm_epoch = 0;
  std::vector<int> arm_peers;

  // Notices (DEAD, ABORT, REVOKE) travel through a hub, the lowest rank
  // neither gone nor unreachable (the agreement's coordinator): a member
  // sends its notice to the hub alone, and the hub passes what is new to it
  // on to every peer. At 64 ranks on a few cores, every member telling
  // every peer was n (n - 1) frames a notice, each a monitor's wake-up (most
  // of a shrink's time). Every notice sent is kept: when the hub changes (it
  // died, maybe half-way through passing one on), each member sends all of
  // them to the new hub, and a member that becomes the hub sends them to
  // every peer; notices only ever add to what a member knows, so one twice
  // is harmless.
  std::vector<std::string> notices;
  int notice_hub = -1;  // where the notices went last (-1: nowhere yet)

  // A frame of this monitor's generation.
  std::string frame(uint8_t type, uint8_t kind, int32_t root,
                    std::string_view body) const {
    return ctl_frame(type, kind, root, body, gen);
  }
  void wake_up();
  // Caller holds mu.
  void enqueue_all(const std::string& f, bool droppable);
  // Caller holds mu. A notice, learned from peer `from` (-1: here); not
  // sent back to the hub when it came from there.
  void notice(const std::string& f, int from);
  // Caller holds mu. After a change of hub, every notice again (above).
  void rehub();
  int hub() const;
  // Queues the agreement's votes and decisions to send (caller holds mu);
  // true when the pending epoch was decided now.
  bool queue_agreement(int rank);
  // Caller holds mu: nothing more of this monitor's goes out to peers,
  // whose connections the thread moves out at its next transfer().
  void give_away(const std::vector<int>& peers);
  // Caller holds mu: agree(hand_off_to)'s decision is in: give away.
  void give_away_if_decided();
};

// Registers the hook that tells the peers of a revoke or an abort, and
// drops every connection once this rank is out (liveness_elastic.cpp).
void register_escalation_hook(std::weak_ptr<LivenessMonitor::Shared> shared,
                              FailureState* state, int rank);

// The thread's own state: the sockets and what has been read from them.
class LivenessMonitor::Loop {
 public:
  Loop(LivenessMonitor& m);
  void run();

 private:
  // liveness.cpp
  void flush();
  void service(size_t p);
  void handle(size_t p, uint8_t type, uint8_t kind, int32_t root,
              std::string_view body);
  void on_abort_frame(size_t p, uint8_t kind, int32_t root,
                      std::string_view body);
  void close_peer(size_t p);
  void fail(ErrorKind kind, const Detail& what, const ErrorContext& ctx);
  // A peer lost first-hand or by report: r is marked failed, every peer
  // told (DEAD, carrying cause: what happened to r, as first seen; what
  // when empty), r's connection closed after telling it too, and the group
  // fails with what (when it has not yet).
  void lost(int r, const Detail& what, int sys_errno, const Detail& cause = {});
  void close_all();

  // liveness_elastic.cpp
  // Moves every connection hand_off asked for out of this monitor.
  void transfer();
  void on_dead(size_t p, int32_t root, std::string_view body);
  void on_revoke(size_t p, int32_t root);
  void on_vote(size_t p, std::string_view body);
  void on_decide(size_t p, std::string_view body);
  void on_mail(size_t p, std::string_view body);
  // This rank was declared failed by `by` (why: their reason).
  void excluded(int by, const Detail& why);
  // Runs the agreement once per loop turn: votes and decisions to send.
  void drive_agreement();

  LivenessMonitor& m_;
  const int rank_;
  const size_t n_;
  std::vector<Fd>& control_;
  Shared& shared_;
  std::vector<Clock::time_point> last_;
  // handoff_: p's next monitor spoke (its frames go to next_[p], for ours;
  // its EOF is the next monitor's to read). eof_: p's stream ended after
  // that (not polled any more).
  std::vector<char> goodbye_, reported_, servicing_, handoff_, eof_;
  std::vector<std::string> in_, next_;
  // service()'s reads: a survivors' side-channel reply (33 KiB at 64 ranks)
  // in one call. Not zeroed: its pages come as replies fill them (a fresh
  // page costs microseconds in a VM, and most jobs never send one).
  static constexpr size_t kReadBytes = size_t(64) << 10;
  std::unique_ptr<char[]> rbuf_;
  bool mail_news_ = false;  // mail arrived this turn: wake the callers
};

}  // namespace jaccl::detail
