// Copyright 2026 the jaccl authors.
#include "group/grow.h"

#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <thread>

#include "bootstrap/file_channel.h"
#include "bootstrap/kv_store.h"
#include "bootstrap/redis_channel.h"
#include "bootstrap/side_channel.h"
#include "bootstrap/store_channel.h"
#include "bootstrap/uri.h"
#include "common/error.h"
#include "common/log.h"
#include "group/group_handle.h"
#include "group/make_group.h"
#include "transport/failure.h"

namespace jaccl::detail {

namespace {

constexpr uint32_t kVoteMagic = 0x574f5247;  // "GROW"

// What every participant of a grow sends first.
struct GrowVote {
  uint32_t magic = kVoteMagic;
  uint32_t generation = 0;
  int32_t old_size = 0;
  int32_t new_size = 0;
  int32_t member = 0;  // 1: a member of the group that grows
  int32_t pid = 0;
};

bool is_kv(const std::string& uri) {
  return uri.rfind("kv://", 0) == 0;
}

// The namespace `ns` of the store named by uri (kv://, file://, redis://).
std::shared_ptr<RendezvousStore> open_store(const std::string& uri,
                                            const std::string& ns,
                                            const Config& cfg, int rank) {
  if (is_kv(uri)) {
    return make_kv_store(uri.substr(5), ns, cfg.get_token(), cfg.get_timeout(),
                         rank);
  }
  const ParsedSideChannelUri p = parse_side_channel_uri(uri);
  if (p.scheme == SideChannelScheme::File) {
    return make_file_store(p.path, ns, rank);
  }
  if (p.scheme == SideChannelScheme::Redis) {
    return make_redis_store(redis_options(p, ns, rank, cfg.get_timeout()));
  }
  raise(ErrorKind::Config,
        "the grow channel " + redact_uri(uri) +
            " is not kv://, file:// or redis:// (a grow cannot meet at a "
            "rank: it may be the one that died)",
        {.rank = rank});
}

std::string control_ns(const Config& cfg) {
  return job_id(cfg.get_job(), cfg.get_token()) + ".grow";
}

std::string data_ns(const Config& cfg, uint32_t gen) {
  return control_ns(cfg) + "." + std::to_string(gen);
}

std::string plan_key(uint32_t gen) {
  return "plan." + std::to_string(gen);
}

// The side channel of the grown group, and its description.
struct Meeting {
  AllGatherFn fn;
  std::string what;
  bool user = false;
};

Meeting meet_by_factory(const AllGatherFactory& factory, int rank, int size) {
  AllGatherFn fn;
  try {
    fn = factory(rank, size);
  } catch (...) {
    rethrow_as_error(std::current_exception(), ErrorKind::Config,
                     "grow: the all-gather factory threw", {.rank = rank});
  }
  if (!fn) {
    raise(ErrorKind::Config, "grow: the all-gather factory returned nothing",
          {.rank = rank});
  }
  return {std::move(fn), "user factory (grow)", true};
}

Meeting meet_by_store(const std::string& uri, const Config& cfg, uint32_t gen,
                      int rank, int size) {
  auto store = open_store(uri, data_ns(cfg, gen), cfg, rank);
  const std::string what = "grow channel " + redact_uri(uri) + " (generation " +
                           std::to_string(gen) + ")";
  return {make_store_all_gather(store, rank, size, cfg.get_timeout(), what),
          what, false};
}

// Sends the votes, checks them, builds the group.
std::shared_ptr<Group> build(Config cfg, Meeting m, const GrowVote& mine) {
  const int rank = cfg.get_rank(), size = cfg.get_size();
  SideChannel sc(rank, size, config_fingerprint(cfg), std::move(m.fn), m.what,
                 cfg.get_timeout(), m.user);
  const auto votes = sc.all_gather_value(mine);
  // Rank 0 is a member (a group has one): its vote is the grow's, so every
  // rank names the same odd ones out.
  const GrowVote& ref = votes[0];
  std::map<std::string, std::vector<int>> wrong;
  for (int r = 0; r < size; ++r) {
    const GrowVote& v = votes[static_cast<size_t>(r)];
    std::string why;
    if (v.magic != kVoteMagic) {
      why = "is not growing (another set-up on this channel?)";
    } else if (v.generation != ref.generation) {
      why = "came for generation " + std::to_string(v.generation);
    } else if ((v.old_size >= 0 && v.old_size != ref.old_size) ||
               v.new_size != ref.new_size) {
      why = "grows from " + std::to_string(v.old_size) + " to " +
            std::to_string(v.new_size) + " ranks";
    } else if ((v.member != 0) != (r < ref.old_size)) {
      why = v.member != 0 ? "is a member, with a newcomer's rank"
                          : "is a newcomer, with a member's rank";
    }
    if (!why.empty()) {
      wrong[why].push_back(r);
    }
  }
  if (!wrong.empty()) {
    Detail d = "grow to generation " + std::to_string(ref.generation) +
               " from " + std::to_string(ref.old_size) + " to " +
               std::to_string(ref.new_size) + " ranks: ";
    bool first = true;
    for (const auto& [why, ranks] : wrong) {
      d = d + (first ? "" : "; ") + ranks_ref(ranks) + " " + why;
      first = false;
    }
    raise(ErrorKind::Config, d, {.rank = rank});
  }
  GroupControl control;
  auto inner = make_group(cfg, sc, &control);
  JACCL_LOG(Info, "rank " << rank << ": grow: generation " << mine.generation
                          << ", rank " << rank << " of " << size << " on "
                          << inner->backend_name());
  auto h = std::make_shared<GroupHandle>(
      std::move(inner), std::move(cfg), std::vector<int>{}, std::move(control));
  h->set_generation(static_cast<int>(mine.generation));
  return h;
}

}  // namespace

std::string grow_channel_uri(const Config& cfg) {
  if (!cfg.get_grow_channel().empty()) {
    return cfg.get_grow_channel();
  }
  const std::string& sc = cfg.get_side_channel();
  if (sc.rfind("file://", 0) == 0 || sc.rfind("redis://", 0) == 0) {
    return sc;
  }
  return "";
}

std::shared_ptr<Group> grow_group(GroupHandle& parent, int new_size,
                                  AllGatherFactory factory) {
  const int me = parent.rank(), n = parent.size();
  const int job_me = parent.job_rank(me);
  const GroupControl& ctl = parent.control();
  if (ctl.state) {
    const GroupStatus st = ctl.state->status();
    if (st == GroupStatus::Aborted || st == GroupStatus::Excluded) {
      try {
        ctl.state->throw_if_failed();
      } catch (const Error& e) {
        throw_renamed(e, parent.names());
      }
    }
    const auto failed = ctl.state->failed_ranks();
    if (!failed.empty()) {
      std::vector<int> names;
      for (int r : failed) {
        names.push_back(parent.job_rank(r));
      }
      raise(ErrorKind::Usage,
            "grow: " + ranks_ref(names) +
                " of this group failed; shrink() to the survivors first",
            {.rank = job_me});
    }
  }
  if (new_size <= n) {
    raise(ErrorKind::Usage,
          "grow: the new size " + std::to_string(new_size) +
              " is not above the group's " + std::to_string(n),
          {.rank = job_me});
  }
  Config cfg = parent.config();
  if (!cfg.get_devices().empty()) {
    raise(ErrorKind::Usage,
          "grow: a group with a device matrix (JACCL_IBV_DEVICES) cannot "
          "grow: the newcomers' devices are not in it",
          {.rank = job_me});
  }
  cfg.set_size(new_size);
  cfg.set_rank(me);
  const uint32_t gen = static_cast<uint32_t>(parent.generation() + 1);
  const GrowVote vote{kVoteMagic, gen, n,
                      new_size,   1,   static_cast<int32_t>(::getpid())};
  if (factory) {
    return build(std::move(cfg), meet_by_factory(factory, me, new_size), vote);
  }
  const std::string uri = grow_channel_uri(cfg);
  if (uri.empty()) {
    raise(ErrorKind::Config,
          "grow: no grow channel: pass an all-gather factory, or set "
          "JACCL_GROW_CHANNEL / Config::set_grow_channel (kv://, file://, "
          "redis://; jaccl-run --elastic sets it)",
          {.rank = job_me});
  }
  std::shared_ptr<RendezvousStore> control;
  if (me == 0) {
    control = open_store(uri, control_ns(cfg), cfg, me);
    if (gen == 1) {
      // An earlier job with this job id (file:// keeps records) grew: its
      // record would call this job's newcomers stale.
      control->remove({"grown"});
    }
    control->put(plan_key(gen),
                 std::to_string(n) + " " + std::to_string(new_size));
  }
  Meeting m = meet_by_store(uri, cfg, gen, me, new_size);
  auto grown = build(std::move(cfg), std::move(m), vote);
  if (control) {
    // Every newcomer has read the plan (it is in the grown group): a
    // newcomer for this generation that comes now is stale.
    control->put("grown", std::to_string(gen));
    control->remove({plan_key(gen)});
  }
  return grown;
}

std::shared_ptr<Group> join_group(const Config& in) {
  Config cfg = in;
  const uint32_t gen = static_cast<uint32_t>(cfg.get_join());
  const int pid = static_cast<int>(::getpid());
  if (cfg.get_all_gather_factory() || cfg.get_all_gather()) {
    const int rank = cfg.get_rank(), size = cfg.get_size();
    // The old size is the members': a newcomer sends -1 (build takes rank
    // 0's).
    const GrowVote vote{kVoteMagic, gen, -1, size, 0, pid};
    Meeting m =
        cfg.get_all_gather_factory()
            ? meet_by_factory(cfg.get_all_gather_factory(), rank, size)
            : Meeting{cfg.get_all_gather(), "user function (grow)", true};
    return build(std::move(cfg), std::move(m), vote);
  }
  const std::string uri = grow_channel_uri(cfg);
  const int start_rank = cfg.get_rank();
  auto control = open_store(uri, control_ns(cfg), cfg, start_rank);
  const Deadline dl = Deadline::after(cfg.get_timeout());
  int old_size = 0, new_size = 0;
  std::string latest = "none";
  for (int attempt = 0;; ++attempt) {
    auto got = control->get({plan_key(gen), "grown"});
    if (got[1]) {
      latest = *got[1];
      const long long l = std::atoll(latest.c_str());
      if (l >= static_cast<long long>(gen)) {
        raise(ErrorKind::Config,
              "this newcomer came to join grow generation " +
                  std::to_string(gen) +
                  " (JACCL_JOIN), but the group has "
                  "grown to generation " +
                  latest +
                  " already (a stale "
                  "joiner: start it with JACCL_JOIN=" +
                  std::to_string(l + 1) + " for the next grow)",
              {.rank = start_rank, .address = control->address()});
      }
    }
    if (got[0] &&
        std::sscanf(got[0]->c_str(), "%d %d", &old_size, &new_size) == 2) {
      break;
    }
    if (dl.expired()) {
      raise(ErrorKind::Timeout,
            "this newcomer waited " + format_duration(cfg.get_timeout()) +
                " for the members to start grow generation " +
                std::to_string(gen) + " at " + control->where() +
                " (latest generation grown there: " + latest + ")",
            {.rank = start_rank, .address = control->address()});
    }
    std::this_thread::sleep_for(
        std::min(Millis(100), Millis(1) * (1 << std::min(attempt, 7))));
  }
  if (cfg.get_size() >= 1 && cfg.get_size() != new_size) {
    raise(ErrorKind::Config,
          "this newcomer was started for a group of " +
              std::to_string(cfg.get_size()) +
              " ranks (JACCL_SIZE), but the members grow to " +
              std::to_string(new_size) + " ranks (generation " +
              std::to_string(gen) + ", from " + std::to_string(old_size) + ")",
          {.rank = start_rank, .address = control->address()});
  }
  int rank = start_rank;
  if (rank < 0) {
    if (new_size - old_size != 1) {
      raise(ErrorKind::Config,
            "the members grow from " + std::to_string(old_size) + " to " +
                std::to_string(new_size) + " ranks (generation " +
                std::to_string(gen) +
                "): with more than one newcomer, each needs its rank "
                "(JACCL_RANK)",
            {.address = control->address()});
    }
    rank = old_size;
  } else if (rank < old_size || rank >= new_size) {
    raise(ErrorKind::Config,
          "this newcomer's rank " + std::to_string(rank) +
              " (JACCL_RANK) is not among the newcomers' ranks " +
              std::to_string(old_size) + ".." + std::to_string(new_size - 1) +
              " of grow generation " + std::to_string(gen),
          {.rank = rank, .address = control->address()});
  }
  control.reset();
  cfg.set_size(new_size);
  cfg.set_rank(rank);
  const GrowVote vote{kVoteMagic, gen, old_size, new_size, 0, pid};
  return build(cfg, meet_by_store(uri, cfg, gen, rank, new_size), vote);
}

}  // namespace jaccl::detail
