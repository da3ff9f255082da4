// Copyright 2026 the jaccl authors.
// The elastic calls of jaccl.Group (docs/failures.md, "Elastic groups"):
// abort, revoke, failed_ranks, agree_failed, shrink, grow. abort, revoke and
// failed_ranks reach the group without its lock, so another thread can
// stop a collective that is stuck; the collective ones (agree_failed,
// shrink) queue behind the group's other calls like any collective.
#include <pybind11/stl.h>

#include <vector>

#include "jaccl_py.h"

namespace jaccl::python {

namespace {

py::object shrink(const std::shared_ptr<GroupHandle>& self,
                  const std::vector<int>& exclude) {
  std::shared_ptr<Group> child;
  self->run([&](Group& g) { child = g.shrink(exclude); });
  if (!child) {
    return py::none();
  }
  return py::cast(adopt(std::move(child)));
}

py::object grow(const std::shared_ptr<GroupHandle>& self, int new_size) {
  std::shared_ptr<Group> child;
  self->run([&](Group& g) { child = g.grow(new_size); });
  return py::cast(adopt(std::move(child)));
}

// failed_ranks (kNow: without the group's lock) or agree_failed.
template <bool kNow>
std::vector<int> ranks_of(GroupHandle& self,
                          std::vector<int> (Group::*call)()) {
  std::vector<int> out;
  auto fn = [&](Group& g) { out = (g.*call)(); };
  if constexpr (kNow) {
    self.run_now(fn);
  } else {
    self.run(fn);
  }
  return out;
}

}  // namespace

void bind_elastic(
    py::class_<GroupHandle, std::shared_ptr<GroupHandle>>& group) {
  group
      .def(
          "abort",
          [](GroupHandle& self) { self.run_now([](Group& g) { g.abort(); }); },
          R"(Any thread, any time: every collective of this group running in
this process (on any thread) raises jaccl.AbortedError promptly, and so does
every later call (shrink too); the peers see this rank as failed.)")
      .def(
          "revoke",
          [](GroupHandle& self) { self.run_now([](Group& g) { g.revoke(); }); },
          R"(Not collective, any thread: every member's running and later
collectives on this group raise jaccl.RevokedError naming this rank (its
peers), also members that are idle. The group can still be shrunk.)")
      .def(
          "failed_ranks",
          [](GroupHandle& self) {
            return ranks_of<true>(self, &Group::failed_ranks);
          },
          "The ranks (of this group) this rank knows to have failed, "
          "ascending; no communication.")
      .def(
          "agree_failed",
          [](GroupHandle& self) {
            return ranks_of<false>(self, &Group::agree_failed);
          },
          R"(Collective over the live members: every one returns the same
failed ranks, ascending; a rank that fails meanwhile is in it everywhere.)")
      .def("shrink", &shrink, py::arg("exclude") = std::vector<int>{},
           R"(Collective over the live members (ranks in exclude need not call
it; every caller passes the same list): a new Group of the live ranks not in
exclude, numbered in this group's order, set up over the connections that
survive (no side channel; rank 0 may be the dead one). Returns None on a rank
in exclude; raises jaccl.ExcludedError on a rank the others declared failed.
Works on a failed, revoked or healthy group; the new group is independent of
this one (drop the old one once shrink has returned).)")
      .def("grow", &grow, py::arg("new_size"),
           R"(Collective over every member (all alive: shrink first): a new
Group of new_size ranks in which the members keep their ranks and processes
started later take ranks size() .. new_size - 1. A newcomer is an ordinary
program started with JACCL_JOIN=<generation() + 1> (jaccl-run --elastic
--restart N does that); its jaccl.init() returns its rank in the new group.
They meet through the grow channel (JACCL_GROW_CHANNEL; jaccl-run --elastic
sets one), never at a rank. Drop this group once grow has returned.)")
      .def(
          "generation",
          [](GroupHandle& self) {
            int gen = 0;
            self.run_now([&](Group& g) { gen = g.generation(); });
            return gen;
          },
          "0 for a group from init(); each grow adds 1 (shrink and split "
          "keep it). A newcomer joins generation() + 1.");
}

}  // namespace jaccl::python
