// Copyright 2026 the jaccl authors.
// Worker for tests/unit/test_split.cpp: one rank of a job that splits its
// group. Prints "SPLIT_OK" when every check passed, "FAIL <what>" for each
// check that did not (exit 1), "ERROR <kind> <class> | <what>" for an
// unexpected jaccl::Error (exit 3).
//
// Modes (argv[1]):
//   grid     8 ranks: a 2x4 and a 4x2 grid (rows and columns), collectives
//            on a row, a column and the parent at the same time from three
//            threads; key order, color -1, a nested split; the children
//            outlive the parent. Prints "BACKEND <name> <backend>" per child.
//   layout   any size: split(rank / SPLIT_PER), split(rank % SPLIT_PER) and
//            split(0); prints the backends (for hosts made of namespaces).
//   kill     rows of 2 and one all-ranks child; the row works once, then
//            the parent and the all-ranks child loop ("LOOPING") until a
//            rank is killed ("FIRST <kind> | <what> | fields rank=<r>
//            peers=<a,b>"); once the file SPLIT_GO exists (every survivor
//            is out of its loop), every group is probed: "PROBE <group>
//            <kind> | <what> | fields ..." or "PROBE <group> ok", and a
//            split of the failed parent ("PROBE split ...").
//   partial  rank 0 never calls split (it holds its group for SPLIT_HOLD_MS);
//            the others print what their split threw.
// TEST_SIDE_DIR: bootstrap through a shared-directory all-gather factory and
// print "FACTORY_CALLS n SIDE_CALLS_AFTER_INIT m" at the end.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <mutex>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "jaccl/jaccl.h"
#include "support/dir_allgather.h"

namespace {

using namespace std::chrono_literals;
using GroupPtr = std::shared_ptr<jaccl::Group>;

std::mutex g_out;
int g_failures = 0;
std::atomic<int> g_factory_calls{0};
std::atomic<int> g_side_calls{0};

void fail(const std::string& what) {
  std::lock_guard<std::mutex> lock(g_out);
  std::cout << "FAIL " << what << std::endl;
  ++g_failures;
}

void check(bool ok, const std::string& what) {
  if (!ok)
    fail(what);
}

int env_int(const char* name, int dflt) {
  const char* v = std::getenv(name);
  return v ? std::atoi(v) : dflt;
}

// The job ranks of a group's members, in member order (an all_gather).
std::vector<int> members_of(jaccl::Group& g, int job_rank) {
  std::vector<int> out(static_cast<size_t>(g.size()));
  g.all_gather(&job_rank, out.data(), sizeof(int));
  return out;
}

// all_to_all and all_to_allv in a child: member i sends member j
// job_i * 100 + job_j + salt; a counts mismatch names job ranks on every
// member and leaves the child working.
void exercise_all_to_all(jaccl::Group& g, const std::vector<int>& members,
                         int job_rank, const std::string& name, int salt) {
  const int n = g.size();
  const auto un = static_cast<size_t>(n);
  std::vector<int32_t> in(un), out(un, -1);
  for (size_t j = 0; j < un; ++j)
    in[j] = job_rank * 100 + members[j] + salt;
  g.all_to_all(in.data(), out.data(), 4);
  for (size_t i = 0; i < un; ++i) {
    check(out[i] == members[i] * 100 + job_rank + salt,
          name + " all_to_all from member " + std::to_string(i));
  }
  std::vector<size_t> send(un, 4), recv(un, 4);
  if (g.rank() == n - 1)
    recv[0] = 5;
  std::vector<int32_t> big(un + 1, -1);
  try {
    g.all_to_allv(in.data(), send, big.data(), recv);
    fail(name + " all_to_allv with mismatched counts did not throw");
  } catch (const jaccl::ProtocolError& e) {
    const std::string want = "rank " + std::to_string(members[un - 1]) +
                             " expects 5 bytes from rank " +
                             std::to_string(members[0]) + ", but rank " +
                             std::to_string(members[0]) + " sends 4 bytes";
    check(std::string(e.what()).find(want) != std::string::npos,
          name + " all_to_allv mismatch: '" + e.what() + "' lacks '" + want +
              "'");
  }
  std::fill(out.begin(), out.end(), -1);
  recv.assign(un, 4);
  g.all_to_allv(in.data(), send, out.data(), recv);
  check(out[0] == members[0] * 100 + job_rank + salt,
        name + " all_to_allv after the mismatch");
}

// A few collectives whose results are known from the members' job ranks.
void exercise(jaccl::Group& g, const std::vector<int>& members, int job_rank,
              const std::string& name, int salt) {
  const int n = g.size();
  const size_t count = 4096 + static_cast<size_t>(salt % 7);
  std::vector<int32_t> in(count), out(count);
  for (size_t i = 0; i < count; ++i)
    in[i] = job_rank * 1000 + salt + static_cast<int>(i % 13);
  g.all_sum(in.data(), out.data(), count * 4, jaccl::Int32);
  int64_t base = 0;
  for (int m : members)
    base += m * 1000 + salt;
  for (size_t i = 0; i < count; ++i) {
    if (out[i] != base + n * static_cast<int>(i % 13)) {
      fail(name + " all_sum at " + std::to_string(i) + ": got " +
           std::to_string(out[i]));
      break;
    }
  }
  int32_t mx = job_rank;
  int32_t got = 0;
  g.all_max(&mx, &got, 4, jaccl::Int32);
  int want_max = 0;
  for (int m : members)
    want_max = std::max(want_max, m);
  check(got == want_max, name + " all_max " + std::to_string(got));
  int32_t b = g.rank() == n - 1 ? salt : -1;
  g.broadcast(&b, 4, n - 1);
  check(b == salt, name + " broadcast " + std::to_string(b));
  if (n > 1) {
    // A ring of send/recv: to the next member, from the previous one.
    const int next = (g.rank() + 1) % n, prev = (g.rank() + n - 1) % n;
    int32_t mine = job_rank + salt, theirs = -1;
    if (g.rank() % 2 == 0) {
      g.send(&mine, 4, next);
      g.recv(&theirs, 4, prev);
    } else {
      g.recv(&theirs, 4, prev);
      g.send(&mine, 4, next);
    }
    check(theirs == members[static_cast<size_t>(prev)] + salt,
          name + " send/recv from member " + std::to_string(prev));
  }
  exercise_all_to_all(g, members, job_rank, name, salt);
  g.barrier();
}

void print_backend(const std::string& name, const GroupPtr& g) {
  std::lock_guard<std::mutex> lock(g_out);
  std::cout << "BACKEND " << name << " " << (g ? g->backend_name() : "none")
            << std::endl;
}

void expect_members(jaccl::Group& g, int job_rank, const std::vector<int>& want,
                    const std::string& name) {
  const auto got = members_of(g, job_rank);
  check(got == want, name + ": members in the wrong order or set");
  check(g.size() == static_cast<int>(want.size()), name + ": size");
}

int grid(GroupPtr world) {
  const int me = world->rank();
  check(world->size() == 8, "grid wants 8 ranks");
  // 2x4: rows of 4 (key: column), columns of 2.
  GroupPtr row = world->split(me / 4, me % 4);
  GroupPtr col = world->split(me % 4);
  // 4x2: rows of 2, columns of 4.
  GroupPtr row2 = world->split(me / 2);
  GroupPtr col2 = world->split(me % 2);
  print_backend("row", row);
  print_backend("col", col);
  check(row && row->rank() == me % 4, "row rank");
  check(col && col->rank() == me / 4, "col rank");
  std::vector<int> want_row, want_col, want_row2, want_col2;
  for (int r = 0; r < 8; ++r) {
    if (r / 4 == me / 4)
      want_row.push_back(r);
    if (r % 4 == me % 4)
      want_col.push_back(r);
    if (r / 2 == me / 2)
      want_row2.push_back(r);
    if (r % 2 == me % 2)
      want_col2.push_back(r);
  }
  expect_members(*row, me, want_row, "row");
  expect_members(*col, me, want_col, "col");
  expect_members(*row2, me, want_row2, "row2");
  expect_members(*col2, me, want_col2, "col2");

  // Rows, columns and the parent at the same time, from three threads.
  std::vector<int> everyone(8);
  std::iota(everyone.begin(), everyone.end(), 0);
  auto loop = [&](jaccl::Group& g, const std::vector<int>& members,
                  const std::string& name) {
    try {
      for (int i = 0; i < 12; ++i)
        exercise(g, members, me, name, i);
    } catch (const jaccl::Error& e) {
      fail(name + " threw: " + e.what());
    }
  };
  std::thread t1([&] { loop(*row, want_row, "row"); });
  std::thread t2([&] { loop(*col, want_col, "col"); });
  std::thread t3([&] { loop(*world, everyone, "world"); });
  loop(*col2, want_col2, "col2");
  t1.join();
  t2.join();
  t3.join();

  // Key order: reversed.
  GroupPtr rev = world->split(7, 7 - me);
  check(rev->rank() == 7 - me,
        "reversed key: rank " + std::to_string(rev->rank()));
  // Equal keys: ties by parent rank.
  GroupPtr tie = world->split(1, 5);
  check(tie->rank() == me, "tied keys: rank " + std::to_string(tie->rank()));
  // Color -1: no child.
  GroupPtr some = world->split(me % 3 == 0 ? -1 : 4);
  check((me % 3 == 0) == (some == nullptr), "color -1");
  if (some) {
    std::vector<int> want;
    for (int r = 0; r < 8; ++r)
      if (r % 3 != 0)
        want.push_back(r);
    expect_members(*some, me, want, "color-4");
    exercise(*some, want, me, "color-4", 3);
  }
  // Nested: the row split into pairs.
  GroupPtr pair = row->split(row->rank() / 2);
  std::vector<int> want_pair = {me - me % 2, me - me % 2 + 1};
  expect_members(*pair, me, want_pair, "pair");
  exercise(*pair, want_pair, me, "pair", 5);
  print_backend("pair", pair);

  // The children outlive the parent.
  world.reset();
  row.reset();
  exercise(*col, want_col, me, "col-after-parent", 9);
  exercise(*pair, want_pair, me, "pair-after-parents", 11);
  return 0;
}

int layout(GroupPtr world) {
  const int me = world->rank();
  const int per = env_int("SPLIT_PER", 2);
  GroupPtr a = world->split(me / per);
  GroupPtr b = world->split(me % per);
  GroupPtr c = world->split(0);
  print_backend("block", a);
  print_backend("stride", b);
  print_backend("all", c);
  for (auto [g, name] :
       {std::pair{a, "block"}, std::pair{b, "stride"}, std::pair{c, "all"}}) {
    const auto members = members_of(*g, me);
    for (int i = 0; i < 3; ++i)
      exercise(*g, members, me, name, i);
  }
  return 0;
}

// "<kind> | <what> | fields rank=<r> peers=<a,b>".
std::string describe(const jaccl::Error& e) {
  std::string peers;
  for (int p : e.peers()) {
    peers += (peers.empty() ? "" : ",") + std::to_string(p);
  }
  return std::string(jaccl::to_string(e.kind())) + " | " + e.what() +
         " | fields rank=" + std::to_string(e.rank()) + " peers=" + peers;
}

int kill_mode(GroupPtr world) {
  const int me = world->rank();
  // Reversed keys: member numbers differ from job ranks, so a message that
  // names a member number instead of the job rank is caught.
  GroupPtr row = world->split(me / 2, 1 - me % 2);
  GroupPtr all = world->split(0, world->size() - 1 - me);
  const auto row_members = members_of(*row, me);
  const auto all_members = members_of(*all, me);
  std::vector<int> everyone(static_cast<size_t>(world->size()));
  std::iota(everyone.begin(), everyone.end(), 0);
  // Not in the loop: a collective can complete on one rank and fail on
  // another (the victim's data reached one of them), so the two ranks of a
  // row without the victim could leave the loop an op apart and meet in
  // different ops. Every op in the loop holds the victim, and one that
  // completes on one rank only leaves the other nothing to meet.
  exercise(*row, row_members, me, "row", 0);
  {
    std::lock_guard<std::mutex> lock(g_out);
    std::cout << "LOOPING" << std::endl;
  }
  try {
    for (int i = 0;; ++i) {
      exercise(*world, everyone, me, "world", i);
      exercise(*all, all_members, me, "all", i);
    }
  } catch (const jaccl::Error& e) {
    std::cout << "FIRST " << describe(e) << std::endl;
  }
  // A rank that probed while another was still in its loop would meet it
  // in a different op of a group that still works.
  const char* go = std::getenv("SPLIT_GO");
  for (int waited = 0; go != nullptr && ::access(go, F_OK) != 0; ++waited) {
    if (waited == 6000) {
      fail("SPLIT_GO never appeared");
      return 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  auto probe = [&](const char* name, jaccl::Group& g,
                   const std::vector<int>& members) {
    try {
      exercise(g, members, me, name, 77);
      std::cout << "PROBE " << name << " ok" << std::endl;
    } catch (const jaccl::Error& e) {
      std::cout << "PROBE " << name << " " << describe(e) << std::endl;
    }
  };
  probe("world", *world, everyone);
  probe("all", *all, all_members);
  probe("row", *row, row_members);
  try {
    world->split(0);
    std::cout << "PROBE split ok" << std::endl;
  } catch (const jaccl::Error& e) {
    std::cout << "PROBE split " << describe(e) << std::endl;
  }
  return 0;
}

int partial(GroupPtr world) {
  if (world->rank() == 0) {
    std::this_thread::sleep_for(
        std::chrono::milliseconds(env_int("SPLIT_HOLD_MS", 8000)));
    return 0;
  }
  try {
    world->split(1);
    std::cout << "SPLIT returned" << std::endl;
  } catch (const jaccl::Error& e) {
    std::cout << "SPLIT_ERROR " << describe(e) << std::endl;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "grid";
  GroupPtr world;
  try {
    jaccl::Config cfg = jaccl::Config::from_env();
    if (const char* side = std::getenv("TEST_SIDE_DIR")) {
      std::string dir = side;
      cfg.set_all_gather_factory([dir](int rank, int size) {
        ++g_factory_calls;
        auto fn = jaccl::test::dir_all_gather(dir, rank, size);
        return jaccl::AllGatherFn([fn](const char* src, char* dst, size_t n) {
          ++g_side_calls;
          fn(src, dst, n);
        });
      });
    }
    world = jaccl::init(cfg, true);
    const int side_at_init = g_side_calls.load();
    int rc = 0;
    if (mode == "grid") {
      rc = grid(std::move(world));
    } else if (mode == "layout") {
      rc = layout(std::move(world));
    } else if (mode == "kill") {
      rc = kill_mode(std::move(world));
    } else if (mode == "partial") {
      rc = partial(std::move(world));
    } else {
      std::cout << "unknown mode " << mode << std::endl;
      return 2;
    }
    if (std::getenv("TEST_SIDE_DIR")) {
      std::cout << "FACTORY_CALLS " << g_factory_calls.load()
                << " SIDE_CALLS_AFTER_INIT "
                << g_side_calls.load() - side_at_init << std::endl;
    }
    if (rc != 0 || g_failures > 0)
      return 1;
  } catch (const jaccl::Error& e) {
    std::cout << "ERROR " << describe(e) << std::endl;
    return 3;
  }
  std::cout << "SPLIT_OK" << std::endl;
  return 0;
}
