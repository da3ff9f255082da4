// Copyright 2026 the jaccl authors.
// Starting the processes jaccl-run supervises (the ranks, or the ssh
// clients that carry remote ranks), and the signal self-pipe.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "run/output.h"

namespace jaccl::run {

struct Rank {
  pid_t pid = -1;
  bool running = false;
  int status = 0;
  Stream out, err;
  // A rank on another host: pid is its ssh client.
  bool remote = false;
  std::string host;         // ssh destination
  int ctl = -1;             // write end of ssh's stdin (signal lines)
  bool started = false;     // the remote shell printed its start line
  bool ssh_killed = false;  // we SIGKILLed the ssh client
  bool lost = false;        // --elastic: given up on (already reported)
};

struct SpawnSpec {
  std::string path;  // the executable, resolved
  std::vector<std::string> argv;
  std::vector<std::string> env;  // the whole environment
  bool capture = true;           // stdout/stderr to pipes we prefix
  bool stdin_ours = false;       // inherit our stdin (else /dev/null)
  bool ctl = false;              // stdin from a pipe we keep (Rank::ctl)
  bool own_group = false;        // a process group of its own
  std::string first_input;       // written to the ctl pipe at once
  std::vector<int> cpus;         // bind to these (empty: inherit our mask)
  int pass_fd = -1;              // left open across exec (rank 0's listener)
};

// Forks and execs; r.running is false if that failed (said why).
Rank spawn(int rank, const SpawnSpec& spec);

// Finds the program like execvp: a name containing '/' is used as is,
// other names are looked up on PATH. Returns "" and sets err if not found.
std::string resolve_program(const std::string& program, int& err);

// Installs handlers for SIGINT, SIGTERM, SIGHUP and SIGCHLD that write the
// signal number to a self-pipe; returns its read end. Ignores SIGPIPE.
int install_signal_handlers();

// Our environment as K=V strings.
std::vector<std::string> our_environment();

}  // namespace jaccl::run
