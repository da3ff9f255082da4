// Copyright 2026 the jaccl authors.
#include "group/shrink.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <utility>

#include "bootstrap/side_channel.h"
#include "common/error.h"
#include "common/log.h"
#include "group/group_handle.h"
#include "group/make_group.h"
#include "group/plan.h"
#include "group/split.h"
#include "transport/control_block.h"
#include "transport/failure.h"
#include "transport/liveness.h"

namespace jaccl::detail {

namespace {

// An error of the parent's monitor while it carries the new group's
// set-up: its ranks are the parent's, not the new group's.
class ParentError : public Error {
 public:
  explicit ParentError(const Error& e) : Error(e) {}
};

bool has(const std::vector<int>& v, int r) {
  return std::find(v.begin(), v.end(), r) != v.end();
}

// A group of one: nothing to agree with, a side channel that copies.
std::shared_ptr<Group> shrink_alone(GroupHandle& parent) {
  Config cfg = child_config(parent.config(), {0}, 0);
  SideChannel sc(
      0, 1, config_fingerprint(cfg),
      [](const char* src, char* dst, size_t n) { std::memcpy(dst, src, n); },
      "a group of one", cfg.get_timeout(), false);
  GroupControl control;
  auto inner = make_group(cfg, sc, &control);
  auto h = std::make_shared<GroupHandle>(std::move(inner), std::move(cfg),
                                         std::vector<int>{parent.job_rank(0)},
                                         std::move(control));
  h->set_generation(parent.generation());
  return h;
}

// The shrunk group's liveness monitor, on the parent's control connections
// between the members (LivenessMonitor::hand_off): no new mesh to dial.
std::shared_ptr<LivenessMonitor> take_over_connections(
    LivenessMonitor& mon, const std::vector<int>& members, int new_rank,
    const Config& cfg, std::shared_ptr<FailureState> state,
    const Deadline& dl) {
  std::vector<int> others;
  for (size_t i = 0; i < members.size(); ++i) {
    if (static_cast<int>(i) != new_rank) {
      others.push_back(members[i]);
    }
  }
  auto handed = mon.hand_off(others, dl);
  std::vector<Fd> control(members.size());
  std::vector<LivenessMonitor::Taken> taken(members.size());
  for (size_t i = 0, j = 0; i < members.size(); ++i) {
    if (static_cast<int>(i) == new_rank) {
      continue;
    }
    control[i] = std::move(handed.peers[j].fd);
    taken[i] = std::move(handed.peers[j].taken);
    ++j;
  }
  // The parent's rank the last decision came from, as a member (not one:
  // gone, pass it on at once).
  LivenessMonitor::Inherit inherit = std::move(handed.inherit);
  if (inherit.held_from >= 0) {
    auto at = std::find(members.begin(), members.end(), inherit.held_from);
    inherit.held_from =
        at == members.end() ? -2 : static_cast<int>(at - members.begin());
  }
  return std::make_shared<LivenessMonitor>(
      new_rank, std::move(control), std::move(state),
      cfg.get_heartbeat_timeout(), std::move(taken), std::move(inherit));
}

}  // namespace

std::vector<int> survivors(int size, const std::vector<int>& failed,
                           const std::vector<int>& excluded) {
  std::vector<int> out;
  for (int r = 0; r < size; ++r) {
    if (!has(failed, r) && !has(excluded, r)) {
      out.push_back(r);
    }
  }
  return out;
}

AllGatherFn survivors_all_gather(LivenessMonitor& monitor,
                                 std::vector<int> members, int me_index,
                                 uint64_t tag0, Millis timeout) {
  auto calls = std::make_shared<uint64_t>(0);
  // A star at the first member: 2 (n - 1) frames a call, not n (n - 1)
  // (each one a wake-up of a monitor thread: at 64 ranks on a few cores the
  // mesh's 4000 frames a call were most of a shrink's set-up). Every take
  // watches every member, so the death of any one fails the call on every
  // survivor at once, not only on the first member.
  return [&monitor, members = std::move(members), me_index, tag0, timeout,
          calls](const char* src, char* dst, size_t n) {
    const uint64_t tag = tag0 + ++*calls;
    const size_t total = members.size() * n;
    auto expect = [&](int from, const std::string& got, size_t want) {
      if (got.size() != want) {
        raise(ErrorKind::Protocol,
              rank_ref(from) + " sent " + std::to_string(got.size()) +
                  " bytes to the survivors' side channel, " +
                  std::to_string(want) + " expected",
              {.rank = monitor.rank(), .peer = from});
      }
    };
    try {
      const Deadline dl = Deadline::after(timeout);
      std::memcpy(dst + static_cast<size_t>(me_index) * n, src, n);
      if (me_index != 0) {
        monitor.post(tag, {members[0]}, std::string_view(src, n));
        const std::string got = monitor.take(tag, members[0], dl, members);
        expect(members[0], got, total);
        std::memcpy(dst, got.data(), total);
        return;
      }
      const std::vector<int> others(members.begin() + 1, members.end());
      const auto got = monitor.take_all(tag, others, dl, members);
      for (size_t i = 1; i < members.size(); ++i) {
        expect(members[i], got[i - 1], n);
        std::memcpy(dst + i * n, got[i - 1].data(), n);
      }
      monitor.post(tag, others, std::string_view(dst, total));
    } catch (const ParentError&) {
      throw;
    } catch (const Error& e) {
      throw ParentError(e);
    }
  };
}

std::function<std::string(std::string_view, int)> survivors_broadcast(
    LivenessMonitor& monitor, std::vector<int> members, int me_index,
    uint64_t tag0, Millis timeout) {
  auto calls = std::make_shared<uint64_t>(0);
  // Tags apart from survivors_all_gather's (tag0 + its calls).
  return [&monitor, members = std::move(members), me_index, tag0, timeout,
          calls](std::string_view mine, int root) {
    const uint64_t tag = tag0 + (uint64_t(1) << 31) + ++*calls;
    try {
      if (root == me_index) {
        std::vector<int> others;
        for (size_t i = 0; i < members.size(); ++i) {
          if (static_cast<int>(i) != root) {
            others.push_back(members[i]);
          }
        }
        monitor.post(tag, others, mine);
        return std::string(mine);
      }
      return monitor.take(tag, members[static_cast<size_t>(root)],
                          Deadline::after(timeout), members);
    } catch (const ParentError&) {
      throw;
    } catch (const Error& e) {
      throw ParentError(e);
    }
  };
}

void require_full_mesh(const GroupHandle& g, const LivenessMonitor& monitor,
                       const char* call) {
  if (!monitor.full_mesh()) {
    raise(ErrorKind::Usage,
          std::string(call) + ": a one-host group of " +
              std::to_string(monitor.size()) + " ranks (more than " +
              std::to_string(kFullControlMeshMax) +
              ") keeps its control connections as a star at rank 0, and the "
              "survivors of a failure could not reach each other; split it "
              "into groups of at most " +
              std::to_string(kFullControlMeshMax) + " ranks to shrink them",
          {.rank = g.job_rank(monitor.rank())});
  }
}

std::shared_ptr<Group> shrink_group(GroupHandle& parent,
                                    std::span<const int> exclude) {
  const int n = parent.size();
  const int me = parent.rank();
  std::vector<int> excl;
  for (int r : exclude) {
    if (r < 0 || r >= n) {
      raise(ErrorKind::Usage,
            "shrink: rank " + std::to_string(r) +
                " to exclude is out of range for a group of " +
                std::to_string(n),
            {.rank = parent.job_rank(me)});
    }
    if (!has(excl, r)) {
      excl.push_back(r);
    }
  }
  const GroupControl& ctl = parent.control();
  const GroupStatus status = ctl.state->status();
  if (status == GroupStatus::Aborted || status == GroupStatus::Excluded) {
    try {
      ctl.state->throw_if_failed();
    } catch (const Error& e) {
      throw_renamed(e, parent.names());
    }
  }
  if (!ctl.monitor) {
    return has(excl, 0) ? nullptr : shrink_alone(parent);
  }
  LivenessMonitor& mon = *ctl.monitor;
  require_full_mesh(parent, mon, "shrink");
  const auto t0 = std::chrono::steady_clock::now();
  // "N ms [wall W]": since the call, and the wall clock's milliseconds
  // (mod 10^6), which line up the phases of every rank (and
  // bench/shrink_bench's SHRINK_TRACE lines) on one time line.
  auto ms = [&t0] {
    using std::chrono::duration_cast;
    using std::chrono::milliseconds;
    const auto wall = duration_cast<milliseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
    return std::to_string(duration_cast<milliseconds>(
                              std::chrono::steady_clock::now() - t0)
                              .count()) +
           " ms [wall " + std::to_string(wall % 1000000) + "]";
  };
  JACCL_LOG(Debug,
            "rank " << parent.job_rank(me) << ": shrink: start " << ms());
  const Millis timeout = parent.config().get_timeout();
  // Every agreement's errors name the parent's members: job ranks out.
  auto agree = [&](bool ok, const std::vector<int>* hand_off_to = nullptr) {
    try {
      return mon.agree(excl, ok, Deadline::after(timeout), hand_off_to);
    } catch (const Error& e) {
      throw_renamed(e, parent.names());
    }
  };
  // The first attempt takes the quick ways (the parent's TCP connections,
  // a shared-memory segment opened through /proc); when it fails with no
  // member lost, the next one makes the group as init does.
  bool quick = true;
  for (;;) {
    const auto d = agree(true);
    const std::vector<int> members = survivors(n, d.failed, d.excluded);
    JACCL_LOG(Debug, "rank " << parent.job_rank(me) << ": shrink: agreed on "
                             << members.size() << " survivors after " << ms());
    if (!has(members, me)) {
      if (has(d.excluded, me)) {
        return nullptr;
      }
      raise(ErrorKind::Excluded,
            "this rank is not among the survivors of the group",
            {.rank = parent.job_rank(me)});
    }
    const int new_rank = static_cast<int>(
        std::find(members.begin(), members.end(), me) - members.begin());
    std::vector<int> names;
    for (int m : members) {
      names.push_back(parent.job_rank(m));
    }
    // Calls of this attempt are tagged by its epoch; older mail is stale.
    const uint64_t tag0 = d.epoch << 32;
    mon.drop_mail_below(tag0);
    Config cfg = child_config(parent.config(), members, new_rank);
    std::shared_ptr<Group> inner;
    GroupControl control;
    // After a failure the parent is of no more use: the new group takes its
    // control connections over (every survivor decides alike, from d).
    auto slot = d.failed.empty() ? nullptr : std::make_shared<MonitorSlot>();
    Takeover takeover{slot, {}, quick ? ctl.wires : nullptr, members, {}};
    if (quick) {
      takeover.broadcast =
          survivors_broadcast(mon, members, new_rank, tag0, timeout);
      // Tags apart from the side channel's calls (tag0 + 1, 2 ...) and the
      // broadcast's (tag0 + 2^31 + ...).
      takeover.gather = survivors_all_gather(
          mon, members, new_rank, tag0 + (uint64_t(1) << 30), timeout);
    }
    if (ctl.cards && ctl.cards->size() == static_cast<size_t>(n)) {
      for (size_t i = 0; i < members.size(); ++i) {
        takeover.cards.push_back((*ctl.cards)[static_cast<size_t>(members[i])]);
        takeover.cards.back().rank = static_cast<int>(i);
      }
    }
    std::exception_ptr error;
    bool parent_error = false;
    try {
      std::vector<int> others;
      for (int m : members) {
        if (m != me) {
          others.push_back(m);
        }
      }
      auto watch = ctl.state->watch(others);
      SideChannel sc(
          new_rank, static_cast<int>(members.size()), config_fingerprint(cfg),
          survivors_all_gather(mon, members, new_rank, tag0, timeout),
          "the survivors' control connections", timeout,
          /*user_supplied=*/false);
      sc.set_abort_fd(watch->fd);
      inner = make_group(cfg, sc, &control, slot ? &takeover : nullptr);
    } catch (const ParentError&) {
      error = std::current_exception();
      parent_error = true;
    } catch (const Error&) {
      error = std::current_exception();
    }
    JACCL_LOG(Debug, "rank " << parent.job_rank(me)
                             << ": shrink: new group set up after " << ms());
    // Every survivor keeps the new group, or none does. When it is kept,
    // the monitor's thread gives the connections to the other members away
    // as soon as the decision is in (take_over_connections then finds them
    // handed already).
    std::vector<int> peers;
    for (int m : members) {
      if (m != me) {
        peers.push_back(m);
      }
    }
    const auto c =
        agree(inner != nullptr, inner != nullptr && slot ? &peers : nullptr);
    JACCL_LOG(Debug, "rank " << parent.job_rank(me)
                             << ": shrink: committed after " << ms());
    const bool member_lost =
        std::any_of(members.begin(), members.end(),
                    [&](int m) { return has(c.failed, m); });
    if (c.ok && !member_lost && slot) {
      try {
        slot->monitor =
            take_over_connections(mon, members, new_rank, cfg, control.state,
                                  Deadline::after(timeout));
        control.monitor = slot->monitor;
      } catch (const Error& e) {
        throw_renamed(e, parent.names());
      }
    }
    if (c.ok && !member_lost) {
      JACCL_LOG(Info, "rank " << parent.job_rank(me) << ": shrink: rank "
                              << new_rank << " of " << members.size()
                              << " (job ranks " << rank_list(names) << ") on "
                              << inner->backend_name() << " after " << ms());
      auto h =
          std::make_shared<GroupHandle>(std::move(inner), std::move(cfg),
                                        std::move(names), std::move(control));
      h->set_generation(parent.generation());
      return h;
    }
    inner.reset();
    control = {};
    if (member_lost || c.failed != d.failed) {
      JACCL_LOG(Info, "rank " << parent.job_rank(me)
                              << ": shrink: a member failed during the set-up"
                                 ", trying again without it");
      continue;  // at most n times: the failed set grows each time
    }
    if (quick) {
      std::string why;
      if (error) {
        try {
          std::rethrow_exception(error);
        } catch (const Error& e) {
          why = std::string(" (here: ") + e.what() + ")";
        }
      }
      JACCL_LOG(Info, "rank " << parent.job_rank(me)
                              << ": shrink: a survivor could not set up the "
                                 "new group the quick way"
                              << why << ", trying again as init does");
      quick = false;
      continue;
    }
    // Nobody failed, yet some survivor could not set up: it will not work
    // the next time either.
    if (error) {
      try {
        std::rethrow_exception(error);
      } catch (const Error& e) {
        throw_renamed(e, parent_error ? parent.names() : names);
      }
    }
    raise(ErrorKind::Protocol,
          "shrink: another survivor could not set up the new group (its "
          "error says why)",
          {.rank = parent.job_rank(me)});
  }
}

}  // namespace jaccl::detail
