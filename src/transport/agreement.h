// Copyright 2026 the jaccl authors.
// The agreement of elastic groups (Group::agree_failed, shrink): the live
// members of a group agree on one set of failed ranks, one set of ranks to
// leave out and whether every one of them succeeded (shrink's commit).
// Pure logic, no I/O: the liveness monitor feeds it what arrives on the
// control connections and sends what it asks for.
//
// Each call is an epoch (1, 2, ... in call order on every member). A member
// sends its vote (its failed set, its exclusions, ok, and the last epoch it
// has decided with that decision) to the coordinator: the lowest rank it
// believes alive and not excluded. The coordinator decides once it holds a
// vote for the epoch from every member it believes alive and not excluded
// (the failed set is then its view, which every vote has been merged into),
// or adopts a decision a voter already holds. The coordinator sends its
// decision to every live member. A member that got a decision passes it on
// to every live member once the rank it got it from is gone (lazily: at 64
// ranks an eager relay was n^2 frames a round, each a process wake-up), so
// a decision that reached one survivor reaches all of them, also when its
// coordinator dies half-way: every survivor learns of that death. A vote
// for an epoch the receiver holds the decision of is answered with it. A
// coordinator that dies before deciding is replaced by the next lowest
// rank, to which the others vote again. Failed sets only grow, so every
// member ends with the same coordinator.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace jaccl::detail {

// Rank sets are one byte per rank of the group (0 or 1).
using RankSet = std::vector<char>;

std::vector<int> ranks_in(const RankSet& s);

struct AgreeDecision {
  uint64_t epoch = 0;
  RankSet failed;
  RankSet exclude;
  bool ok = true;
};

struct AgreeVote {
  uint64_t epoch = 0;  // the epoch voted in (0: none pending)
  RankSet failed;
  RankSet exclude;
  bool ok = true;
  AgreeDecision last;  // the last decision this voter holds (epoch 0: none)
};

// Wire forms (control frame bodies); decode returns nullopt on a body that
// is not one for a group of `size`.
std::string encode_vote(const AgreeVote& v);
std::optional<AgreeVote> decode_vote(std::string_view body, int size);
std::string encode_decision(const AgreeDecision& d);
std::optional<AgreeDecision> decode_decision(std::string_view body, int size);

class Agreement {
 public:
  Agreement(int rank, int size);

  // The local caller enters the next epoch (returned) asking to leave out
  // `exclude`, with its ok.
  uint64_t begin(RankSet exclude, bool ok);
  // The decision of epoch e, once made (here or elsewhere).
  const AgreeDecision* decision(uint64_t e) const;
  // The epoch the local caller waits for (0: none).
  uint64_t pending() const { return pending_; }

  void on_vote(int from, AgreeVote v);
  // A decision from peer `from`; true when it is new here (the caller then
  // marks its failed ranks). It is passed on once `from` is gone.
  bool on_decision(const AgreeDecision& d, int from);
  // The latest decision held (nullptr: none).
  const AgreeDecision* last() const;
  // The peer epoch e's decision came from while it is not yet passed on
  // (its sender not seen gone), or -1.
  int held_from(uint64_t e) const;

  struct Send {
    int to;
    bool is_decision;
    AgreeVote vote;
    AgreeDecision decision;
  };
  // What to send now, given which ranks are gone (failed or left): votes to
  // the coordinator, decisions on to every live member. May decide.
  std::vector<Send> poll(const RankSet& gone);
  // Whom the pending epoch waits for (for a timeout's message).
  std::vector<int> waiting_for(const RankSet& gone) const;

 private:
  int coordinator(const RankSet& gone) const;
  void decide(AgreeDecision d);

  int rank_;
  int size_;
  uint64_t epoch_ = 0;    // the last epoch the caller began
  uint64_t pending_ = 0;  // the epoch waited for (0: none)
  RankSet exclude_;
  bool ok_ = true;
  int voted_to_ = -1;  // where the pending epoch's vote went
  std::map<int, AgreeVote> votes_;
  std::map<int, uint64_t> answered_;  // voter -> epoch answered to it
  std::map<uint64_t, AgreeDecision> decisions_;
  std::map<uint64_t, int> held_;  // epoch -> sender, not yet passed on
  std::vector<AgreeDecision> to_forward_;
};

}  // namespace jaccl::detail
