// Copyright 2026 the jaccl authors.
// The elastic calls of jaccl::Group: the defaults for groups outside jaccl,
// and GroupHandle's, which move the group's state (transport/failure.h)
// and hand agreement and shrink to the liveness monitor and group/shrink.h.
#include <string>

#include "common/error.h"
#include "group/group_handle.h"
#include "group/grow.h"
#include "group/shrink.h"
#include "transport/failure.h"
#include "transport/liveness.h"

namespace jaccl {

namespace {

[[noreturn]] void unsupported(Group& g, const char* call) {
  detail::raise(ErrorKind::Usage,
                std::string(call) + " is not supported by this group (" +
                    g.backend_name() + ")",
                {.rank = g.rank()});
}

}  // namespace

void Group::abort() {
  unsupported(*this, "abort");
}
void Group::revoke() {
  unsupported(*this, "revoke");
}
std::vector<int> Group::failed_ranks() {
  unsupported(*this, "failed_ranks");
}
std::vector<int> Group::agree_failed() {
  unsupported(*this, "agree_failed");
}
std::shared_ptr<Group> Group::shrink(std::span<const int>) {
  unsupported(*this, "shrink");
}
std::shared_ptr<Group> Group::grow(int, AllGatherFactory) {
  unsupported(*this, "grow");
}
int Group::generation() {
  return 0;
}

namespace detail {

void GroupHandle::abort() {
  control_.state->escalate(
      GroupStatus::Aborted,
      make_error(ErrorKind::Aborted,
                 error_info("this rank aborted the group", {.rank = rank()})));
}

void GroupHandle::revoke() {
  control_.state->escalate(
      GroupStatus::Revoked,
      make_error(ErrorKind::Revoked,
                 error_info(after_first_failure(*control_.state,
                                                "this rank revoked the group"),
                            {.rank = rank()})));
}

std::vector<int> GroupHandle::failed_ranks() {
  return control_.state->failed_ranks();
}

std::vector<int> GroupHandle::agree_failed() {
  if (!control_.monitor) {
    return {};
  }
  require_full_mesh(*this, *control_.monitor, "agree_failed");
  try {
    return control_.monitor
        ->agree({}, true, Deadline::after(cfg_.get_timeout()))
        .failed;
  } catch (const Error& e) {
    throw_renamed(e, names_);
  }
}

std::shared_ptr<Group> GroupHandle::shrink(std::span<const int> exclude) {
  // Not guarded: shrink_group's errors already name job ranks.
  return shrink_group(*this, exclude);
}

std::shared_ptr<Group> GroupHandle::grow(int new_size,
                                         AllGatherFactory factory) {
  return grow_group(*this, new_size, std::move(factory));
}

}  // namespace detail
}  // namespace jaccl
