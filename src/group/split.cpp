// Copyright 2026 the jaccl authors.
#include "group/split.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <string>
#include <utility>

#include "bootstrap/side_channel.h"
#include "common/error.h"
#include "common/log.h"
#include "group/group_handle.h"
#include "group/make_group.h"

namespace jaccl::detail {

namespace {

// An error of the parent while it carries the child's set-up: its fields
// already hold job ranks, so they must not be renamed with the child's.
// (An Error, so the side channel passes it through as it is.)
class ParentError : public Error {
 public:
  explicit ParentError(const Error& e) : Error(e) {}
};

// The child's side channel: a star at the child's first member over the
// parent's send/recv. Children of other colors use other pairs, so they set
// up at the same time without meeting; every wait is the parent's, bounded
// by its op deadline.
AllGatherFn over_parent(GroupHandle& parent, std::vector<int> members, int me) {
  return [&parent, members = std::move(members), me](const char* src, char* dst,
                                                     size_t n) {
    const size_t k = members.size();
    try {
      if (me == 0) {
        std::memcpy(dst, src, n);
        for (size_t i = 1; i < k; ++i) {
          parent.recv(dst + i * n, n, members[i]);
        }
        for (size_t i = 1; i < k; ++i) {
          parent.send(dst, k * n, members[i]);
        }
      } else {
        parent.send(src, n, members[0]);
        parent.recv(dst, k * n, members[0]);
      }
    } catch (const Error& e) {
      throw ParentError(e);
    }
  };
}

}  // namespace

std::vector<int> split_members(const std::vector<SplitVote>& votes, int me) {
  const int mine = votes[static_cast<size_t>(me)].color;
  std::vector<int> members;
  if (mine < 0) {
    return members;
  }
  for (int r = 0; r < static_cast<int>(votes.size()); ++r) {
    if (votes[static_cast<size_t>(r)].color == mine) {
      members.push_back(r);
    }
  }
  auto key = [&](int r) {
    const int k = votes[static_cast<size_t>(r)].key;
    return k == -1 ? r : k;
  };
  std::stable_sort(members.begin(), members.end(), [&](int a, int b) {
    return key(a) != key(b) ? key(a) < key(b) : a < b;
  });
  return members;
}

Config child_config(const Config& parent, const std::vector<int>& members,
                    int child_rank) {
  Config c = parent;
  const auto& devices = parent.get_devices();
  if (!devices.empty()) {
    Config::DeviceMatrix sub(members.size());
    for (size_t i = 0; i < members.size(); ++i) {
      for (int m : members) {
        sub[i].push_back(
            devices[static_cast<size_t>(members[i])][static_cast<size_t>(m)]);
      }
    }
    c.set_devices(std::move(sub));
  }
  c.set_size(static_cast<int>(members.size()));
  c.set_rank(child_rank);
  return c;
}

std::shared_ptr<Group> split_group(GroupHandle& parent, int color, int key) {
  const int me = parent.rank();
  const int job_me = parent.job_rank(me);
  const SplitVote vote{color < 0 ? -1 : color, key};
  std::vector<SplitVote> votes(static_cast<size_t>(parent.size()));
  parent.all_gather(&vote, votes.data(), sizeof(vote));
  const std::vector<int> members = split_members(votes, me);
  if (members.empty()) {
    JACCL_LOG(Debug,
              "rank " << job_me << ": split: no child (color " << color << ")");
    return nullptr;
  }
  const int child_rank = static_cast<int>(
      std::find(members.begin(), members.end(), me) - members.begin());
  std::vector<int> names;
  for (int m : members) {
    names.push_back(parent.job_rank(m));
  }
  Config cfg = child_config(parent.config(), members, child_rank);
  try {
    SideChannel sc(child_rank, static_cast<int>(members.size()),
                   config_fingerprint(cfg),
                   over_parent(parent, members, child_rank),
                   std::string("parent group (") + parent.backend_name() + ")",
                   cfg.get_timeout(), /*user_supplied=*/false);
    GroupControl control;
    auto inner = make_group(cfg, sc, &control);
    JACCL_LOG(Info, "rank " << job_me << ": split color " << color
                            << ": child rank " << child_rank << " of "
                            << members.size() << " (job ranks "
                            << rank_list(names) << ") on "
                            << inner->backend_name());
    auto h = std::make_shared<GroupHandle>(
        std::move(inner), std::move(cfg), std::move(names), std::move(control));
    h->set_generation(parent.generation());
    return h;
  } catch (const ParentError& e) {
    throw_renamed(e, {});  // no names: rethrown of its own class, as it is
  } catch (const Error& e) {
    throw_renamed(e, names);
  }
}

}  // namespace jaccl::detail
