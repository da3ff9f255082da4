// Copyright 2026 the jaccl authors.
// The liveness monitor's part in elastic groups: revoke and abort told to
// the peers, a rank told it was left out, the agreement driven over the
// control connections, and the survivors' mailbox.
#include <algorithm>

#include "common/bytes.h"
#include "common/error_wire.h"
#include "common/log.h"
#include "transport/liveness_loop.h"

namespace jaccl::detail {

namespace {

// The rank whose REVOKE this thread is passing on (-1: this rank's own).
thread_local int t_revoker = -1;

}  // namespace

void register_escalation_hook(std::weak_ptr<LivenessMonitor::Shared> weak,
                              FailureState* state, int rank) {
  state->on_escalate([weak, rank](GroupStatus to) {
    auto s = weak.lock();
    if (!s) {
      return;
    }
    {
      // Even while stopping (see the ABORT hook in liveness.cpp): a revoke
      // this rank relays must reach the others before its GOODBYE.
      std::lock_guard<std::mutex> lock(s->mu);
      if (to == GroupStatus::Revoked) {
        s->notice(
            s->frame(kCtlRevoke, 0, t_revoker >= 0 ? t_revoker : rank, {}),
            t_notice_from);
      } else if (to == GroupStatus::Aborted) {
        ErrorInfo info = error_info("this rank aborted the group", {});
        s->enqueue_all(
            s->frame(kCtlAbort, static_cast<uint8_t>(ErrorKind::Aborted), rank,
                     encode_error_info(info, kCtlMaxText)),
            false);
        s->close_all = true;
      } else if (to == GroupStatus::Excluded) {
        s->close_all = true;
      }
    }
    s->cv.notify_all();
    s->wake_up();
  });
}

void LivenessMonitor::Loop::excluded(int by, const Detail& why) {
  ErrorInfo info =
      error_info("this rank was excluded from the group: " + rank_ref(by) +
                     " declared it failed (" + why +
                     "); the other members carry on without it",
                 {.rank = rank_});
  m_.state_->escalate(GroupStatus::Excluded,
                      make_error(ErrorKind::Excluded, std::move(info)));
}

void LivenessMonitor::Loop::on_dead(size_t p, int32_t root,
                                    std::string_view body) {
  if (root < 0 || static_cast<size_t>(root) >= n_) {
    return;
  }
  const Detail why = Detail::from_wire(body);
  if (root == rank_) {
    excluded(static_cast<int>(p), why);
    return;
  }
  lost(root, rank_ref(static_cast<int>(p)) + " reported: " + why, 0, why);
}

void LivenessMonitor::Loop::on_revoke(size_t p, int32_t root) {
  if (root < 0 || static_cast<size_t>(root) >= n_ ||
      static_cast<int>(m_.state_->status()) >=
          static_cast<int>(GroupStatus::Revoked)) {
    return;  // revoked (or out) already: no error to make
  }
  ErrorInfo info = error_info(
      after_first_failure(*m_.state_, rank_ref(root) + " revoked the group"),
      {.rank = rank_, .peer = root});
  if (static_cast<int>(p) != root) {
    info.relayed_by = static_cast<int>(p);
    info.peers.push_back(static_cast<int>(p));
  }
  t_revoker = root;
  m_.state_->escalate(GroupStatus::Revoked,
                      make_error(ErrorKind::Revoked, std::move(info)));
  t_revoker = -1;
}

void LivenessMonitor::Loop::on_vote(size_t p, std::string_view body) {
  auto v = decode_vote(body, static_cast<int>(n_));
  if (!v) {
    JACCL_LOG(Warn,
              "rank " << rank_ << ": ignored a malformed vote from rank " << p);
    return;
  }
  for (int r : ranks_in(v->failed)) {
    if (r == rank_) {
      excluded(static_cast<int>(p), "it voted so");
    } else {
      lost(r,
           rank_ref(static_cast<int>(p)) + " reported that " + rank_ref(r) +
               " failed",
           0);
    }
  }
  std::lock_guard<std::mutex> lock(shared_.mu);
  shared_.agreement.on_vote(static_cast<int>(p), std::move(*v));
}

void LivenessMonitor::Loop::on_decide(size_t p, std::string_view body) {
  auto d = decode_decision(body, static_cast<int>(n_));
  if (!d) {
    JACCL_LOG(Warn, "rank " << rank_
                            << ": ignored a malformed decision from rank "
                            << p);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(shared_.mu);
    if (!shared_.agreement.on_decision(*d, static_cast<int>(p))) {
      return;
    }
  }
  for (int r : ranks_in(d->failed)) {
    if (r == rank_) {
      excluded(static_cast<int>(p), "the survivors agreed it had failed");
    } else {
      lost(r, "the survivors agreed that " + rank_ref(r) + " had failed", 0);
    }
  }
  shared_.cv.notify_all();
}

void LivenessMonitor::Loop::on_mail(size_t p, std::string_view body) {
  if (body.size() < 8) {
    return;
  }
  const uint64_t tag = get_u64(reinterpret_cast<const uint8_t*>(body.data()));
  {
    std::lock_guard<std::mutex> lock(shared_.mu);
    if (tag < shared_.mail_floor) {
      return;
    }
    shared_.mail[{tag, static_cast<int>(p)}] = std::string(body.substr(8));
  }
  mail_news_ = true;  // the waiter is woken once a turn (run())
}

void LivenessMonitor::Loop::transfer() {
  bool moved = false;
  std::lock_guard<std::mutex> lock(shared_.mu);
  for (size_t p = 0; p < n_; ++p) {
    if (!shared_.handing[p] || shared_.handed[p]) {
      continue;
    }
    if (control_[p].valid()) {
      if (shared_.handed_taken.empty())
        shared_.handed_taken.resize(n_);
      Taken& t = shared_.handed_taken[p];
      // The peer's next monitor's frames, then what is not yet a frame.
      t.in = std::move(next_[p]);
      t.in += in_[p];
      in_[p].clear();
      next_[p].clear();
      t.out = std::move(shared_.out[p]);
      shared_.out[p].clear();
      shared_.handed_fd[p] = std::move(control_[p]);
    }
    shared_.handed[p] = 1;
    moved = true;
  }
  if (moved) {
    shared_.cv.notify_all();
  }
}

void LivenessMonitor::Shared::give_away(const std::vector<int>& peers) {
  handed_off = true;
  for (int r : peers) {
    const auto u = static_cast<size_t>(r);
    if (open[u]) {
      open[u] = 0;  // nothing more of ours on it
      handing[u] = 1;
    }
  }
}

void LivenessMonitor::Shared::give_away_if_decided() {
  const AgreeDecision* d =
      arm_epoch != 0 ? agreement.decision(arm_epoch) : nullptr;
  if (d == nullptr) {
    return;
  }
  arm_epoch = 0;
  auto failed = [&](int r) {
    return static_cast<size_t>(r) < d->failed.size() &&
           d->failed[static_cast<size_t>(r)] != 0;
  };
  if (d->ok && !failed(self) &&
      std::none_of(arm_peers.begin(), arm_peers.end(), failed)) {
    give_away(arm_peers);
  }
}

bool LivenessMonitor::Shared::queue_agreement(int rank) {
  const uint64_t before = agreement.pending();
  for (auto& s : agreement.poll(gone)) {
    const auto to = static_cast<size_t>(s.to);
    if (!open[to]) {
      continue;
    }
    out[to] += s.is_decision
                   ? frame(kCtlDecide, 0, rank, encode_decision(s.decision))
                   : frame(kCtlVote, 0, rank, encode_vote(s.vote));
  }
  return before != 0 && agreement.pending() == 0;
}

void LivenessMonitor::Loop::drive_agreement() {
  bool decided = false;
  {
    std::lock_guard<std::mutex> lock(shared_.mu);
    shared_.rehub();  // the hub died: the notices to the next one
    decided = shared_.queue_agreement(rank_);
    shared_.give_away_if_decided();  // after queueing what we owe
    // The parent's last decision, once whoever sent it to us is gone: it
    // may not have reached every survivor (their old monitors read it).
    const int h = shared_.parent_held_from;
    if (h == -2 || (h >= 0 && shared_.gone[static_cast<size_t>(h)])) {
      shared_.parent_held_from = -1;
      for (size_t p = 0; p < n_; ++p) {
        if (shared_.open[p]) {
          shared_.out[p] += shared_.parent_decide;
        }
      }
    }
  }
  if (decided) {
    shared_.cv.notify_all();
  }
}

// ---- callers ---------------------------------------------------------------

namespace {

RankSet set_of(const std::vector<int>& ranks, int size) {
  RankSet s(static_cast<size_t>(size), 0);
  for (int r : ranks) {
    if (r >= 0 && r < size) {
      s[static_cast<size_t>(r)] = 1;
    }
  }
  return s;
}

// Throws the group's error once this rank is out of it.
void throw_if_out(const FailureState& st) {
  const GroupStatus s = st.status();
  if (s == GroupStatus::Excluded || s == GroupStatus::Aborted) {
    st.throw_if_failed();
  }
}

constexpr Millis kCheckEvery{100};

// Waits under `lock` (on sh.mu) until done(), checked with the lock held.
// The failure state is checked each turn with the lock free, and done()
// again after relocking: the loop thread may have notified meanwhile, and
// waiting then would miss it for a whole kCheckEvery. At dl, or when the
// monitor stops, timed_out() runs with the lock held and must raise.
template <class Done, class TimedOut>
void wait_until(LivenessMonitor::Shared& sh, FailureState& st,
                std::unique_lock<std::mutex>& lock, const Deadline& dl,
                Done done, TimedOut timed_out) {
  while (!done()) {
    lock.unlock();
    throw_if_out(st);
    lock.lock();
    if (done()) {
      return;
    }
    if (dl.expired() || sh.stopping) {
      timed_out();
    }
    sh.cv.wait_for(lock, std::min(kCheckEvery, dl.remaining()));
  }
}

}  // namespace

void LivenessMonitor::check_not_handed_off(const char* what) {
  std::lock_guard<std::mutex> lock(shared_->mu);
  if (shared_->handed_off) {
    raise(ErrorKind::Usage,
          std::string(what) +
              ": this group's control connections went to the group its "
              "shrink returned; use that group",
          {.rank = rank_});
  }
}

LivenessMonitor::HandOff LivenessMonitor::hand_off(
    const std::vector<int>& peers, const Deadline& dl) {
  throw_if_out(*state_);
  std::unique_lock<std::mutex> lock(shared_->mu);
  shared_->handed_off = true;
  // What this monitor owes the others goes out first (in the taken
  // connections' queues). The last decision it holds is inherited: the new
  // monitor passes it on once its sender is gone (this one passes nothing
  // on any more), and answers an old monitor's vote with it.
  shared_->queue_agreement(rank_);
  HandOff out;
  out.inherit.generation = static_cast<uint8_t>(shared_->gen + 1);
  if (const AgreeDecision* last = shared_->agreement.last()) {
    out.inherit.decide =
        shared_->frame(kCtlDecide, 0, rank_, encode_decision(*last));
    out.inherit.held_from = shared_->agreement.held_from(last->epoch);
  }
  shared_->give_away(peers);  // done already after agree(hand_off_to)
  shared_->wake_up();
  auto waiting_for = [&] {
    std::vector<int> waiting;
    for (int r : peers) {
      const auto u = static_cast<size_t>(r);
      if (shared_->handing[u] && !shared_->handed[u]) {
        waiting.push_back(r);
      }
    }
    return waiting;
  };
  wait_until(
      *shared_, *state_, lock, dl, [&] { return waiting_for().empty(); },
      [&] {
        const std::vector<int> waiting = waiting_for();
        lock.unlock();
        raise(ErrorKind::Timeout,
              "timed out after " + format_duration(dl.total()) +
                  " waiting for the liveness thread to hand the control "
                  "connections to " +
                  ranks_ref(waiting) + " over to the shrunk group",
              {.rank = rank_});
      });
  out.peers.resize(peers.size());
  for (size_t i = 0; i < peers.size(); ++i) {
    const auto u = static_cast<size_t>(peers[i]);
    out.peers[i].fd = std::move(shared_->handed_fd[u]);
    if (u < shared_->handed_taken.size())
      out.peers[i].taken = std::move(shared_->handed_taken[u]);
    out.peers[i].taken.lost = !out.peers[i].fd.valid();
  }
  return out;
}

LivenessMonitor::Decision LivenessMonitor::agree(
    const std::vector<int>& exclude, bool ok, const Deadline& dl,
    const std::vector<int>* hand_off_to) {
  throw_if_out(*state_);
  check_not_handed_off("agreeing on the failed ranks");
  std::unique_lock<std::mutex> lock(shared_->mu);
  const uint64_t epoch = shared_->agreement.begin(set_of(exclude, size_), ok);
  if (hand_off_to != nullptr) {
    shared_->arm_epoch = epoch;
    shared_->arm_peers = *hand_off_to;
  }
  shared_->wake_up();
  wait_until(
      *shared_, *state_, lock, dl,
      [&] { return shared_->agreement.decision(epoch) != nullptr; },
      [&] {
        const auto waiting = shared_->agreement.waiting_for(shared_->gone);
        lock.unlock();
        raise(ErrorKind::Timeout,
              "timed out after " + format_duration(dl.total()) +
                  " agreeing on the failed ranks, waiting for " +
                  ranks_ref(waiting),
              {.rank = rank_});
      });
  const AgreeDecision* d = shared_->agreement.decision(epoch);
  return Decision{d->epoch, ranks_in(d->failed), ranks_in(d->exclude), d->ok};
}

void LivenessMonitor::post(uint64_t tag, const std::vector<int>& to,
                           std::string_view bytes) {
  std::string body(8, '\0');
  put_u64(reinterpret_cast<uint8_t*>(body.data()), tag);
  body.append(bytes);
  const std::string f = shared_->frame(kCtlMail, 0, rank_, body);
  {
    std::lock_guard<std::mutex> lock(shared_->mu);
    for (int r : to) {
      const auto u = static_cast<size_t>(r);
      if (r != rank_ && u < shared_->open.size() && shared_->open[u]) {
        shared_->out[u] += f;
      }
    }
  }
  shared_->wake_up();
}

std::string LivenessMonitor::take(uint64_t tag, int from, const Deadline& dl,
                                  const std::vector<int>& watch) {
  return std::move(take_all(tag, {from}, dl, watch).front());
}

std::vector<std::string> LivenessMonitor::take_all(
    uint64_t tag, const std::vector<int>& from, const Deadline& dl,
    const std::vector<int>& watch) {
  // The first rank of from + watch known gone, or -1 (caller holds mu).
  auto lost_one = [&]() -> int {
    for (const std::vector<int>* v : {&from, &watch}) {
      for (int r : *v) {
        if (r != rank_ && shared_->gone[static_cast<size_t>(r)]) {
          return r;
        }
      }
    }
    return -1;
  };
  auto missing = [&] {
    std::vector<int> out;
    for (int r : from) {
      if (shared_->mail.count({tag, r}) == 0) {
        out.push_back(r);
      }
    }
    return out;
  };
  check_not_handed_off("the survivors' side channel");
  std::unique_lock<std::mutex> lock(shared_->mu);
  wait_until(
      *shared_, *state_, lock, dl,
      [&] { return missing().empty() || lost_one() >= 0; },
      [&] {
        const std::vector<int> waiting = missing();
        lock.unlock();
        raise(ErrorKind::Timeout,
              "timed out after " + format_duration(dl.total()) +
                  " waiting for " + ranks_ref(waiting) +
                  " in the survivors' side channel",
              {.rank = rank_, .peer = waiting.empty() ? -1 : waiting.front()});
      });
  if (missing().empty()) {
    std::vector<std::string> out;
    for (int r : from) {
      auto it = shared_->mail.find({tag, r});
      out.push_back(std::move(it->second));
      shared_->mail.erase(it);
    }
    return out;
  }
  const int r = lost_one();
  lock.unlock();
  throw_if_out(*state_);  // aborted or excluded: that first
  raise(ErrorKind::PeerLost,
        rank_ref(r) + " was lost while the survivors set up their group",
        {.rank = rank_, .peer = r});
}

void LivenessMonitor::drop_mail_below(uint64_t tag) {
  std::lock_guard<std::mutex> lock(shared_->mu);
  shared_->mail_floor = std::max(shared_->mail_floor, tag);
  std::erase_if(shared_->mail,
                [&](const auto& kv) { return kv.first.first < tag; });
}

}  // namespace jaccl::detail
