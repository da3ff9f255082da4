// Copyright 2026 the jaccl authors.
// Spawning real processes for multi-process tests: N ranks started together,
// their output captured, their deaths bounded by deadlines.
//
// Every child runs with stdin on /dev/null, stdout and stderr on one pipe
// (interleaved, drained by a reader thread so a chatty child never blocks),
// all other inherited descriptors closed at exec, PR_SET_PDEATHSIG(SIGKILL)
// so a crashed test leaves no orphans, and a process group of its own (a
// rank a test stopped is not hung up when the suite's group is orphaned). Note
// that the death signal fires when the *thread* that started the job exits:
// start jobs from a thread that outlives them (the test's main thread is fine).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "support/slowdown.h"

namespace jaccl::test {

struct ProcResult {
  int exit_code = -1;      // exit status if the process exited, else -1
  int term_signal = 0;     // signal that killed it, else 0
  bool timed_out = false;  // it was SIGKILLed by us at a deadline
  std::string output;      // stdout+stderr interleaved

  bool exited_ok() const { return exit_code == 0 && term_signal == 0; }
  // "exit 3", "signal 9 (Killed)", "timed out (signal 9 (Killed))", ...
  std::string describe() const;
};

// Absolute path of a test worker / tool built by this tree.
std::string worker_path(const std::string& name);
std::string tool_path(const std::string& name);

// A loopback TCP port that was free a moment ago, from below the kernel's
// ephemeral range, never the same for two tests running at once.
int free_loopback_port();
// errno of binding a listening socket to 127.0.0.1:port as jaccl's rank 0
// does (SO_REUSEADDR), 0 if that worked (the socket is closed again).
int loopback_bind_errno(int port);

// slowdown(): tests/support/slowdown.h.

// True if a process with this pid exists and is not a zombie.
bool pid_alive(pid_t pid);

// Value that removes a variable from the child's environment.
inline constexpr const char* kUnsetEnv = "\x01unset";

using EnvFn = std::function<std::map<std::string, std::string>(int rank)>;

// N processes started together.
class Job {
 public:
  // Starts n copies of program (an absolute or relative path, or a name looked
  // up on PATH). env(rank) gives extra variables for that rank, added to the
  // current environment; the value kUnsetEnv removes a variable. env may be
  // empty. Throws std::system_error if a process cannot be started (those
  // already started are killed).
  static Job start(const std::string& program,
                   const std::vector<std::string>& args, int n,
                   const EnvFn& env);

  Job(Job&&) noexcept;
  Job& operator=(Job&&) noexcept;
  Job(const Job&) = delete;
  Job& operator=(const Job&) = delete;
  ~Job();  // SIGKILLs and reaps whatever is still running

  int size() const;
  pid_t pid(int rank) const;

  // Sends sig to the rank unless it has already been reaped (never signals a
  // recycled pid).
  void kill(int rank, int sig);

  // Waits for all ranks; any still running at the deadline is SIGKILLed and
  // marked timed_out. Never hangs. Results are in rank order. May be called
  // again (returns the same results).
  std::vector<ProcResult> wait(std::chrono::milliseconds deadline);
  // Waits for one rank only (same deadline rules).
  ProcResult wait_one(int rank, std::chrono::milliseconds deadline);

  // Output captured so far (the rank may still be running).
  std::string output(int rank) const;
  // Waits until the rank's output contains needle; false if the deadline
  // passes or the rank's output ends (it exited) without it.
  bool wait_for_output(int rank, const std::string& needle,
                       std::chrono::milliseconds deadline) const;
  // True once the rank has been reaped.
  bool finished(int rank) const;

 private:
  struct Impl;
  explicit Job(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Runs one command to completion with a deadline (SIGKILLed at the deadline).
ProcResult run(const std::string& program, const std::vector<std::string>& args,
               const std::map<std::string, std::string>& env,
               std::chrono::milliseconds deadline);

// The environment of one rank of a test job: JACCL_RANK and JACCL_SIZE,
// generous deadlines (JACCL_TIMEOUT 30 s, JACCL_OP_TIMEOUT 600 s), and every
// other JACCL_* or TEST_* variable the workers read removed, so the
// caller's environment cannot leak into the job. Callers add the rest.
std::map<std::string, std::string> clean_rank_env(int rank, int size);
// The same, bootstrapping through the TCP coordinator on 127.0.0.1:port,
// with JACCL_TRANSPORT=transport ("ofi:<provider>" sets JACCL_TRANSPORT=ofi
// and JACCL_OFI_PROVIDER).
std::map<std::string, std::string> coordinator_rank_env(
    int rank, int size, int port, const std::string& transport);

// The first line of out starting with prefix ("" if none).
std::string line_of(const std::string& out, const std::string& prefix);

// How many times needle occurs in haystack (overlapping ones too).
int count_of(const std::string& haystack, const std::string& needle);

// Every rank's status and output, for a failure message.
std::string all_output(const std::vector<ProcResult>& rs);

}  // namespace jaccl::test
