// Copyright 2026 the jaccl authors.
// How a rank starts on another host: `ssh HOST 'exec /bin/sh -c SCRIPT ...'`.
//
// The script (POSIX sh, on the remote host):
//  1. reads the job token from the first line of its stdin (so it never
//     appears in a command line), exports it as JACCL_TOKEN;
//  2. changes to the working directory, exports the rank's variables and,
//     given a device matrix, writes it to a temporary file for
//     JACCL_IBV_DEVICES;
//  3. prints the start line (kStartMarker and its pid) on stdout, then
//     starts the program with setsid (a session and process group of its
//     own, stdin /dev/null), SIGINT and SIGQUIT back to their defaults
//     (`env --default-signal`, coreutils 8.31+, where there is one);
//  4. in the background reads the rest of stdin: a line INT, TERM, HUP or
//     KILL sends that signal to the program's process group; end of file
//     (jaccl-run closed it, died, or the connection dropped) sends SIGTERM
//     and, after the grace period, SIGKILL;
//  5. waits for the program, kills whatever is left of its process group,
//     removes the device file and exits with the program's status
//     (128+signal if it was killed).
#pragma once

#include <string>
#include <vector>

namespace jaccl::run {

inline constexpr const char* kStartMarker = "jaccl-run-remote-started ";

std::string shell_quote(const std::string& s);
std::string shell_join(const std::vector<std::string>& argv);
// Splits a command like a shell would (quotes and backslashes, no
// expansion); throws std::invalid_argument on an unterminated quote.
std::vector<std::string> shell_split(const std::string& cmd);

struct RemoteRank {
  std::string cwd;
  std::vector<std::string> env;  // K=V, in order (later wins)
  std::string devices;           // device matrix JSON, "" for none
  double grace = 3;
  std::vector<std::string> command;
};

// The command line ssh hands to the remote login shell.
std::string remote_command(const RemoteRank& r);
// ssh ... HOST 'remote_command'.
std::vector<std::string> ssh_argv(const std::vector<std::string>& ssh,
                                  const std::string& host, const RemoteRank& r);

}  // namespace jaccl::run
