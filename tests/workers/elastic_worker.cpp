// Copyright 2026 the jaccl authors.
// One rank of an elastic-group test (tests/unit/test_elastic.cpp).
//
// Modes (argv[1]):
//   kill     every rank loops on ELASTIC_OP (all_sum, all_gather,
//            sum_scatter, all_to_all, sendrecv, barrier); the ranks in
//            ELASTIC_VICTIMS SIGKILL themselves at one random moment of it
//            (ELASTIC_SEED). Each survivor prints "ERROR <kind> | <what> |
//            peers=<a,b>", revokes, prints "AGREED <failed ranks>", shrinks
//            and checks every op on the new group ("VERIFIED <size>
//            <backend> members=<job ranks>"); then drops the old group and
//            counts the jaccl segments still mapped ("SEGMENTS <n>").
//            ELASTIC_DURING: that rank takes part in the shrink's first
//            agreement (agree_failed) and SIGKILLs itself right after, so it
//            dies during the set-up.
//   stop     like kill with barrier, but the harness SIGSTOPs the victim;
//            survivors shrink and verify, then wait for the file
//            ELASTIC_RESUMED and verify again ("VERIFIED2"). The victim,
//            woken by the harness, prints what its group throws ("ERROR
//            ...") and what shrink throws ("SHRINK <kind> | <what>").
//   split    rows of ELASTIC_ROW ranks (split by rank / ELASTIC_ROW); the
//            victim dies in a loop on its row; the survivors of its row
//            shrink the row ("ROW_VERIFIED"), the other rows check theirs
//            ("ROW_OK"), then everyone shrinks the parent ("VERIFIED").
//   abort    rank ELASTIC_ABORTER waits in a recv that never completes and
//            another of its threads calls abort(): "ABORTED <kind> | <what>"
//            and, for shrink, "SHRINK <kind> | ..."; the others, idle, wait
//            until failed_ranks() names it ("SAW_FAILED <ranks>"), then
//            print the error of a barrier and shrink without it.
//   revoke   rank 1 revokes while rank 0 waits in a recv from rank 2 and
//            rank 2 sleeps (idle); each prints "REVOKED <kind> | <what>"
//            (rank 2 on its next call), then all shrink ("VERIFIED").
//   busy     3 ranks; rank 2 SIGKILLs itself after ELASTIC_DIE_MS. Ranks 0
//            and 1 each start a thread that waits in a recv from the other
//            (never sent: an op of the old group in flight) and stop that
//            thread inside its wait (a signal whose handler blocks:
//            "HELD"); once the death is known they revoke and shrink while
//            it is held, check every op on the new group ("VERIFIED
//            <size> <backend> members=<job ranks>"), let the thread go on
//            ("BUSY_OP <kind> | <what>"), and check again ("VERIFIED2").
//   grow     like kill (ELASTIC_VICTIMS die in a loop on ELASTIC_OP); the
//            survivors revoke, shrink ("SHRUNK <size>"), then grow back to
//            ELASTIC_GROW_TO (default: the job's size) and check every op
//            on the grown group ("GROWN <size> <backend> gen=<g>
//            rank=<r>"). A process started with JACCL_JOIN is a newcomer
//            (any mode): init() joins the grow, it checks every op and
//            prints the same GROWN line.
//   soak     under jaccl-run --elastic --restart: ELASTIC_CYCLES times, all
//            ranks check an all_sum, then the group's rank size-1 (even
//            generations) or size-2 (odd) SIGKILLs itself; the others
//            shrink and grow back, and jaccl-run's replacement joins. Ranks
//            0 and 1 are never killed: they print "SOAK <fds first> <fds
//            last> <rss KiB first> <rss KiB last>" at the end (sampled from
//            generation 5 on), and fail if fds grew or RSS grew by more
//            than ELASTIC_RSS_SLACK_KIB (default 16384).
// Exit 0: every check passed; 1: a check failed ("FAIL <what>"); 3: an
// unexpected jaccl error ("UNEXPECTED <kind> | <what>").
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "jaccl/jaccl.h"
#include "support/rank_list.h"

namespace {

using namespace std::chrono_literals;
using jaccl::test::has_rank;
using jaccl::test::rank_list;
using GroupPtr = std::shared_ptr<jaccl::Group>;

std::mutex g_out;
int g_failures = 0;

void say(const std::string& line) {
  std::lock_guard<std::mutex> lock(g_out);
  std::cout << line << std::endl;
}

void check(bool ok, const std::string& what) {
  if (!ok) {
    say("FAIL " + what);
    std::lock_guard<std::mutex> lock(g_out);
    ++g_failures;
  }
}

int env_int(const char* name, int dflt) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::atoi(v) : dflt;
}

std::string env_str(const char* name, const char* dflt = "") {
  const char* v = std::getenv(name);
  return v != nullptr ? v : dflt;
}

std::vector<int> env_list(const char* name) {
  std::vector<int> out;
  std::istringstream in(env_str(name));
  for (std::string p; std::getline(in, p, ',');) {
    if (!p.empty())
      out.push_back(std::stoi(p));
  }
  return out;
}

std::string describe(const jaccl::Error& e) {
  return std::string(jaccl::to_string(e.kind())) + " | " + e.what() +
         " | peers=" + rank_list(e.peers());
}

[[noreturn]] void die_now() {
  ::kill(::getpid(), SIGKILL);
  for (;;)
    ::pause();
}

// Polls done() every step until it holds or limit passes; its last value.
template <class Done>
bool await_until(Done done, std::chrono::milliseconds limit,
                 std::chrono::milliseconds step) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= until)
      return false;
    std::this_thread::sleep_for(step);
  }
  return true;
}

void wait_for_file(const std::string& path) {
  await_until([&] { return std::filesystem::exists(path); }, 60s, 5ms);
}

// Until g knows a failed member (at most 30 s).
void await_failure(jaccl::Group& g) {
  await_until([&] { return !g.failed_ranks().empty(); }, 30s, 5ms);
}

// The job ranks of g's members, in member order.
std::vector<int> members_of(jaccl::Group& g, int job) {
  std::vector<int> out(static_cast<size_t>(g.size()));
  g.all_gather(&job, out.data(), sizeof(int));
  return out;
}

// Element counts of the ops the loop runs and the checks use.
size_t count() {
  return static_cast<size_t>(env_int("ELASTIC_COUNT", 16384));
}

// One op of the loop (results not checked: it runs until a rank dies).
void run_op(jaccl::Group& g, const std::string& op, std::vector<float>& a,
            std::vector<float>& b) {
  const size_t n = count();
  const auto size = static_cast<size_t>(g.size());
  const int r = g.rank();
  const size_t block = n / size * 4;
  if (op == "all_sum") {
    g.all_sum(a.data(), b.data(), n * 4, jaccl::Float32);
  } else if (op == "all_gather") {
    g.all_gather(a.data(), b.data(), block);
  } else if (op == "sum_scatter") {
    g.sum_scatter(a.data(), b.data(), block, jaccl::Float32);
  } else if (op == "all_to_all") {
    g.all_to_all(a.data(), b.data(), block);
  } else if (op == "sendrecv") {
    const int next = (r + 1) % g.size(), prev = (r + g.size() - 1) % g.size();
    if (r == 0) {
      g.send(a.data(), n * 4, next);
      g.recv(b.data(), n * 4, prev);
    } else {
      g.recv(b.data(), n * 4, prev);
      g.send(a.data(), n * 4, next);
    }
  } else {
    g.barrier();
  }
}

// Every op on g, results checked against what its members (job ranks)
// must produce. Returns the member list.
std::vector<int> verify(jaccl::Group& g, int job, const std::string& tag) {
  const std::vector<int> members = members_of(g, job);
  const size_t size = members.size();
  const int me = g.rank();
  const size_t n = count();
  check(members[static_cast<size_t>(me)] == job, tag + ": member order");
  for (size_t i = 1; i < size; ++i) {
    check(members[i - 1] < members[i], tag + ": members out of order");
  }
  float jsum = 0;
  int jmax = -1, jmin = 1 << 30;
  for (int m : members) {
    jsum += static_cast<float>(m + 1);
    jmax = std::max(jmax, m);
    jmin = std::min(jmin, m);
  }
  // all_sum
  std::vector<float> in(n), out(n);
  for (size_t i = 0; i < n; ++i)
    in[i] = static_cast<float>((job + 1) * static_cast<int>(i % 7 + 1));
  g.all_sum(in.data(), out.data(), n * 4, jaccl::Float32);
  bool ok = true;
  for (size_t i = 0; i < n; ++i)
    ok = ok && out[i] == jsum * static_cast<float>(i % 7 + 1);
  check(ok, tag + ": all_sum");
  // all_max / all_min
  std::vector<int32_t> iin(n), iout(n);
  for (size_t i = 0; i < n; ++i)
    iin[i] = job * 1000 + static_cast<int32_t>(i % 13);
  g.all_max(iin.data(), iout.data(), n * 4, jaccl::Int32);
  ok = true;
  for (size_t i = 0; i < n; ++i)
    ok = ok && iout[i] == jmax * 1000 + static_cast<int32_t>(i % 13);
  check(ok, tag + ": all_max");
  g.all_min(iin.data(), iout.data(), n * 4, jaccl::Int32);
  ok = true;
  for (size_t i = 0; i < n; ++i)
    ok = ok && iout[i] == jmin * 1000 + static_cast<int32_t>(i % 13);
  check(ok, tag + ": all_min");
  // all_gather
  const size_t k = n / size;
  std::vector<int32_t> gin(k), gout(k * size);
  for (size_t i = 0; i < k; ++i)
    gin[i] = job * 100000 + static_cast<int32_t>(i);
  g.all_gather(gin.data(), gout.data(), k * 4);
  ok = true;
  for (size_t q = 0; q < size; ++q)
    for (size_t i = 0; i < k; ++i)
      ok = ok && gout[q * k + i] == members[q] * 100000 + static_cast<int>(i);
  check(ok, tag + ": all_gather");
  // sum_scatter: chunk c, element i of member m is (m+1) * (c + 1 + i % 3)
  std::vector<float> sin(k * size), sout(k);
  for (size_t c = 0; c < size; ++c)
    for (size_t i = 0; i < k; ++i)
      sin[c * k + i] =
          static_cast<float>((job + 1) * static_cast<int>(c + 1 + i % 3));
  g.sum_scatter(sin.data(), sout.data(), k * 4, jaccl::Float32);
  ok = true;
  for (size_t i = 0; i < k; ++i)
    ok = ok && sout[i] == jsum * static_cast<float>(me + 1 + i % 3);
  check(ok, tag + ": sum_scatter");
  // all_to_all: block for member j holds job * 1000 + members[j] * 10 + i%10
  std::vector<int32_t> ain(k * size), aout(k * size);
  for (size_t j = 0; j < size; ++j)
    for (size_t i = 0; i < k; ++i)
      ain[j * k + i] = job * 1000 + members[j] * 10 + static_cast<int>(i % 10);
  g.all_to_all(ain.data(), aout.data(), k * 4);
  ok = true;
  for (size_t q = 0; q < size; ++q)
    for (size_t i = 0; i < k; ++i)
      ok = ok && aout[q * k + i] ==
                     members[q] * 1000 + job * 10 + static_cast<int>(i % 10);
  check(ok, tag + ": all_to_all");
  // send/recv around the ring
  if (size > 1) {
    const int next = (me + 1) % static_cast<int>(size);
    const int prev = (me + static_cast<int>(size) - 1) % static_cast<int>(size);
    std::vector<int32_t> rin(k, job), rout(k, -1);
    if (me == 0) {
      g.send(rin.data(), k * 4, next);
      g.recv(rout.data(), k * 4, prev);
    } else {
      g.recv(rout.data(), k * 4, prev);
      g.send(rin.data(), k * 4, next);
    }
    ok = true;
    for (size_t i = 0; i < k; ++i)
      ok = ok && rout[i] == members[static_cast<size_t>(prev)];
    check(ok, tag + ": send/recv");
  }
  // broadcast from the last member, then a barrier
  std::vector<int32_t> bc(k, me == static_cast<int>(size) - 1 ? 4242 : 0);
  g.broadcast(bc.data(), k * 4, static_cast<int>(size) - 1);
  ok = true;
  for (size_t i = 0; i < k; ++i)
    ok = ok && bc[i] == 4242;
  check(ok, tag + ": broadcast");
  g.barrier();
  return members;
}

// Loops on op until it throws; victims (job ranks) die at one random moment
// of it, after three warm-up calls. Returns the error (on a survivor). A
// victim's last warm-up call can end while another rank is still in its
// own (a collective ends on one rank before all have their results): that
// rank's error then comes from the warm-up, and is the same death's.
std::string loop_until_error(jaccl::Group& g, int job, const std::string& op,
                             const std::vector<int>& victims) {
  std::vector<float> a(count(), static_cast<float>(job + 1)), b(count());
  try {
    for (int i = 0; i < 3; ++i)
      run_op(g, op, a, b);
    if (has_rank(victims, job)) {
      std::mt19937 rng(static_cast<unsigned>(env_int("ELASTIC_SEED", 1)));
      const int delay_us = static_cast<int>(rng() % 20000);
      std::thread([delay_us] {
        std::this_thread::sleep_for(std::chrono::microseconds(delay_us));
        die_now();
      }).detach();
    }
    say("LOOPING");
    const auto until = std::chrono::steady_clock::now() + 60s;
    while (std::chrono::steady_clock::now() < until)
      run_op(g, op, a, b);
  } catch (const jaccl::Error& e) {
    if (has_rank(victims, job))
      die_now();  // another victim died first: this one dies now too
    return describe(e);
  }
  say("FAIL no error within 60 s");
  std::exit(1);
}

// Shared-memory segments of jaccl mapped in this process (memfd or
// /dev/shm, "jaccl-<nonce>"), each counted once.
int mapped_segments() {
  std::ifstream maps("/proc/self/maps");
  std::set<std::string> names;
  for (std::string line; std::getline(maps, line);) {
    const size_t at = line.find("jaccl-");
    if (at != std::string::npos) {
      names.insert(line.substr(at, line.find(' ', at) - at));
    }
  }
  return static_cast<int>(names.size());
}

int survivor_recovery(GroupPtr g, int job, const std::string& err) {
  say("ERROR " + err);
  g->revoke();
  say("AGREED " + rank_list(g->agree_failed()));
  say("FAILED_RANKS " + rank_list(g->failed_ranks()));
  GroupPtr s = g->shrink();
  if (!s) {
    say("FAIL shrink returned nullptr");
    return 1;
  }
  const auto members = verify(*s, job, "shrunk");
  say("VERIFIED " + std::to_string(s->size()) + " " + s->backend_name() +
      " members=" + rank_list(members));
  // The new group took the old one's control connections: the old one
  // still knows whom it lost, but agrees no more.
  say("PARENT_FAILED " + rank_list(g->failed_ranks()));
  try {
    g->agree_failed();
    say("PARENT_AGREED");
  } catch (const jaccl::Error& e) {
    say("PARENT " + describe(e));
  }
  g.reset();  // the last reference: the old group's segment goes
  say("SEGMENTS " + std::to_string(mapped_segments()));
  return 0;
}

int mode_kill(GroupPtr g, int job) {
  const auto victims = env_list("ELASTIC_VICTIMS");
  const std::string err =
      loop_until_error(*g, job, env_str("ELASTIC_OP", "all_sum"), victims);
  if (job == env_int("ELASTIC_DURING", -1)) {
    say("ERROR " + err);
    g->revoke();
    g->agree_failed();  // the recipe's agreement
    g->agree_failed();  // the shrink's first step, then gone
    die_now();
  }
  return survivor_recovery(std::move(g), job, err);
}

int mode_stop(GroupPtr g, int job) {
  const int victim = env_list("ELASTIC_VICTIMS").at(0);
  std::vector<float> a(count(), 1.0f), b(count());
  say("LOOPING");
  try {
    for (;;)
      run_op(*g, "all_sum", a, b);
  } catch (const jaccl::Error& e) {
    if (job == victim) {
      // Woken after the others left it out.
      say("ERROR " + describe(e));
      try {
        g->shrink();
        say("SHRINK none");
      } catch (const jaccl::Error& s) {
        say("SHRINK " + describe(s));
      }
      return 0;
    }
    say("ERROR " + describe(e));
  }
  GroupPtr s = g->shrink();
  const auto members = verify(*s, job, "shrunk");
  say("VERIFIED " + std::to_string(s->size()) + " " + s->backend_name() +
      " members=" + rank_list(members));
  wait_for_file(env_str("ELASTIC_RESUMED"));
  verify(*s, job, "after resume");
  say("VERIFIED2");
  return 0;
}

int mode_split(GroupPtr g, int job) {
  const int row_len = env_int("ELASTIC_ROW", 2);
  const int victim = env_list("ELASTIC_VICTIMS").at(0);
  GroupPtr row = g->split(job / row_len);
  g->barrier();  // every row is set up (over the parent) before a death
  const bool mine = job / row_len == victim / row_len;
  if (mine) {
    const std::string err = loop_until_error(*row, job, "all_sum", {victim});
    say("ROW_ERROR " + err);
    GroupPtr s = row->shrink();
    const auto members = verify(*s, job, "row shrunk");
    say("ROW_VERIFIED " + std::to_string(s->size()) +
        " members=" + rank_list(members));
  } else {
    // The parent fails (the victim is in it); this row keeps working.
    std::this_thread::sleep_for(300ms);
    verify(*row, job, "other row");
    say("ROW_OK");
  }
  try {
    g->barrier();
  } catch (const jaccl::Error& e) {
    say("PARENT_ERROR " + describe(e));
  }
  GroupPtr s = g->shrink();
  const auto members = verify(*s, job, "parent shrunk");
  say("VERIFIED " + std::to_string(s->size()) + " " + s->backend_name() +
      " members=" + rank_list(members));
  return 0;
}

int mode_abort(GroupPtr g, int job) {
  const int aborter = env_int("ELASTIC_ABORTER", 1);
  if (job == aborter) {
    std::thread t([g] {
      std::this_thread::sleep_for(300ms);
      g->abort();
    });
    std::vector<char> buf(64);
    try {
      g->recv(buf.data(), buf.size(), (g->rank() + 1) % g->size());
      say("FAIL the recv returned");
    } catch (const jaccl::Error& e) {
      say("ABORTED " + describe(e));
    }
    t.join();
    try {
      g->barrier();
      say("FAIL a barrier after abort returned");
    } catch (const jaccl::Error& e) {
      say("AGAIN " + describe(e));
    }
    try {
      g->shrink();
      say("FAIL shrink after abort returned");
    } catch (const jaccl::Error& e) {
      say("SHRINK " + describe(e));
    }
    return 0;
  }
  // Idle (a barrier would not match the aborter's recv): wait until the
  // aborter is known failed, then find the group failed.
  await_failure(*g);
  say("SAW_FAILED " + rank_list(g->failed_ranks()));
  try {
    g->barrier();
    say("FAIL a barrier after the abort returned");
    return 1;
  } catch (const jaccl::Error& e) {
    return survivor_recovery(g, job, describe(e));
  }
}

int mode_revoke(GroupPtr g, int job) {
  if (job == 1) {
    std::this_thread::sleep_for(300ms);
    g->revoke();
  } else if (job == 0) {
    std::vector<char> buf(64);
    try {
      g->recv(buf.data(), buf.size(), 2);
      say("FAIL the recv returned");
    } catch (const jaccl::Error& e) {
      say("REVOKED " + describe(e));
    }
  } else {
    std::this_thread::sleep_for(1500ms);  // idle while rank 1 revokes
  }
  if (job != 0) {
    try {
      g->all_sum(&job, &job, sizeof(int), jaccl::Int32);
      say("FAIL all_sum on a revoked group returned");
    } catch (const jaccl::Error& e) {
      say("REVOKED " + describe(e));
    }
  }
  say("FAILED_RANKS " + rank_list(g->failed_ranks()));
  GroupPtr s = g->shrink();
  const auto members = verify(*s, job, "shrunk");
  say("VERIFIED " + std::to_string(s->size()) + " " + s->backend_name() +
      " members=" + rank_list(members));
  return 0;
}

// mode_busy's held thread: the handler blocks until the pipe has a byte.
int g_hold[2] = {-1, -1};

void hold_here(int) {
  const int saved = errno;
  char c;
  while (::read(g_hold[0], &c, 1) < 0 && errno == EINTR) {
  }
  errno = saved;
}

// The system call thread tid is in (/proc: its first field), -1 if none
// can be read.
long syscall_of(pid_t tid) {
  std::ifstream f("/proc/self/task/" + std::to_string(tid) + "/syscall");
  long nr = -1;
  return f >> nr ? nr : -1;
}

bool await_syscall(pid_t tid, const std::vector<long>& nrs) {
  return await_until(
      [&] {
        return std::find(nrs.begin(), nrs.end(), syscall_of(tid)) != nrs.end();
      },
      30s, 1ms);
}

int mode_busy(GroupPtr g, int job) {
  if (job == 2) {
    std::this_thread::sleep_for(
        std::chrono::milliseconds(env_int("ELASTIC_DIE_MS", 3000)));
    die_now();
  }
  if (::pipe(g_hold) != 0) {
    say("FAIL pipe");
    return 1;
  }
  struct sigaction sa {};
  sa.sa_handler = hold_here;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGUSR1, &sa, nullptr);
  std::atomic<pid_t> tid{0};
  std::thread busy([&] {
    tid = static_cast<pid_t>(::syscall(SYS_gettid));
    std::vector<char> buf(64);
    try {
      g->recv(buf.data(), buf.size(), 1 - job);
      say("FAIL the busy recv returned");
    } catch (const jaccl::Error& e) {
      say("BUSY_OP " + describe(e));
    }
  });
  if (!await_until([&] { return tid != 0; }, 30s, 1ms)) {
    say("FAIL the busy thread never started");
    std::exit(1);
  }
  // Held only once it waits inside the op: then the op holds the group.
  std::vector<long> waits = {SYS_ppoll};
#ifdef SYS_poll
  waits.push_back(SYS_poll);
#endif
  check(await_syscall(tid, waits), "the busy thread never waited in poll");
  ::syscall(SYS_tgkill, ::getpid(), static_cast<pid_t>(tid), SIGUSR1);
  check(await_syscall(tid, {SYS_read}), "the busy thread was not held");
  say("HELD");
  await_failure(*g);
  g->revoke();
  GroupPtr s = g->shrink();
  auto members = verify(*s, job, "shrunk");
  say("VERIFIED " + std::to_string(s->size()) + " " + s->backend_name() +
      " members=" + rank_list(members));
  const char go = 1;
  check(::write(g_hold[1], &go, 1) == 1, "release the busy thread");
  busy.join();
  members = verify(*s, job, "shrunk, old op over");
  say("VERIFIED2 " + std::to_string(s->size()));
  return 0;
}

// Every op on a grown group, whose ranks are its own.
int after_grow(GroupPtr g) {
  const auto members = verify(*g, g->rank(), "grown");
  say("GROWN " + std::to_string(g->size()) + " " + g->backend_name() +
      " gen=" + std::to_string(g->generation()) +
      " rank=" + std::to_string(g->rank()) + " members=" + rank_list(members));
  return 0;
}

int mode_grow(GroupPtr g, int job) {
  const int n = g->size();
  const auto victims = env_list("ELASTIC_VICTIMS");
  const std::string err =
      loop_until_error(*g, job, env_str("ELASTIC_OP", "all_sum"), victims);
  say("ERROR " + err);
  g->revoke();
  GroupPtr s = g->shrink();
  g.reset();
  verify(*s, job, "shrunk");
  say("SHRUNK " + std::to_string(s->size()));
  GroupPtr grown = s->grow(env_int("ELASTIC_GROW_TO", n));
  s.reset();
  return after_grow(std::move(grown));
}

int open_fds() {
  int n = 0;
  for ([[maybe_unused]] const auto& e :
       std::filesystem::directory_iterator("/proc/self/fd")) {
    ++n;
  }
  return n;
}

long rss_kib() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmRSS:", 0) == 0) {
      return std::atol(line.c_str() + 6);
    }
  }
  return -1;
}

// One soak rank, from init (job = its first rank) or from a join.
int mode_soak(GroupPtr g, bool original) {
  const int cycles = env_int("ELASTIC_CYCLES", 50);
  const int n = g->size();
  const bool long_lived = original && g->rank() < 2;
  int fds0 = -1, fds1 = -1;
  long rss0 = -1, rss1 = -1;
  while (g->generation() < cycles) {
    const int gen = g->generation();
    if (long_lived && gen >= 5) {
      fds1 = open_fds();
      rss1 = rss_kib();
      if (fds0 < 0) {
        fds0 = fds1;
        rss0 = rss1;
      }
    }
    const int victim = gen % 2 == 0 ? n - 1 : n - 2;
    int32_t x = g->rank() + 1, sum = 0;
    try {
      g->all_sum(&x, &sum, sizeof(x), jaccl::Int32);
      check(sum == n * (n + 1) / 2, "soak all_sum at generation " +
                                        std::to_string(gen) + ": " +
                                        std::to_string(sum));
      if (g->rank() == victim) {
        die_now();
      }
      const auto until = std::chrono::steady_clock::now() + 30s;
      while (std::chrono::steady_clock::now() < until) {
        g->all_sum(&x, &sum, sizeof(x), jaccl::Int32);
      }
      say("FAIL no error within 30 s at generation " + std::to_string(gen));
      return 1;
    } catch (const jaccl::Error&) {
    }
    g->revoke();
    GroupPtr s = g->shrink();
    g.reset();
    g = s->grow(n);
  }
  const auto members = verify(*g, g->rank(), "soak end");
  say("SOAK_END gen=" + std::to_string(g->generation()) +
      " members=" + rank_list(members));
  if (long_lived) {
    say("SOAK " + std::to_string(fds0) + " " + std::to_string(fds1) + " " +
        std::to_string(rss0) + " " + std::to_string(rss1));
    check(fds1 <= fds0, "fds grew from " + std::to_string(fds0) + " to " +
                            std::to_string(fds1));
    check(rss1 - rss0 <= env_int("ELASTIC_RSS_SLACK_KIB", 16384),
          "RSS grew from " + std::to_string(rss0) + " to " +
              std::to_string(rss1) + " KiB");
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "kill";
  try {
    GroupPtr g = jaccl::init(true);
    const int job = g->rank();
    const bool newcomer = !env_str("JACCL_JOIN").empty();
    if (mode == "soak") {
      const int rc = mode_soak(std::move(g), !newcomer);
      return g_failures > 0 ? 1 : rc;
    }
    if (newcomer) {
      const int rc = after_grow(std::move(g));
      return g_failures > 0 ? 1 : rc;
    }
    say("READY " + std::string(g->backend_name()));
    int rc = 0;
    if (mode == "kill") {
      rc = mode_kill(std::move(g), job);
    } else if (mode == "stop") {
      rc = mode_stop(g, job);
    } else if (mode == "split") {
      rc = mode_split(g, job);
    } else if (mode == "abort") {
      rc = mode_abort(g, job);
    } else if (mode == "revoke") {
      rc = mode_revoke(g, job);
    } else if (mode == "busy") {
      rc = mode_busy(std::move(g), job);
    } else if (mode == "grow") {
      rc = mode_grow(std::move(g), job);
    } else {
      say("FAIL unknown mode " + mode);
      return 1;
    }
    return g_failures > 0 ? 1 : rc;
  } catch (const jaccl::Error& e) {
    say("UNEXPECTED " + describe(e));
    return 3;
  }
}
