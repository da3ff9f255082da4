// Copyright 2026 the jaccl authors.
// Small helpers of jaccl-run: messages, exit statuses, the job token, ports.
#pragma once

#include <string>

namespace jaccl::run {

constexpr int kUsageExit = 2;
constexpr int kTimeoutExit = 124;
constexpr int kSshExit = 255;  // what ssh exits with when it cannot connect

// "jaccl-run: msg" on stderr (queued behind the ranks' output).
void note(const std::string& msg);

std::string signal_name(int sig);         // "SIGTERM"
std::string describe_status(int status);  // "exited with code 3", ...
int exit_code_of(int status);             // 128+signal if killed
bool failed(int status);                  // not a clean exit 0
std::string random_token();               // 32 hex chars (CSPRNG)
int free_port();                          // free a moment ago, or exits
// A socket listening on 127.0.0.1 at a port the kernel picks (*port), for
// rank 0 to inherit (JACCL_COORDINATOR_FD): the port is never free between
// choosing it and rank 0's start. Close-on-exec; exits on failure.
int coordinator_socket(int* port);
std::string format_seconds(double s);  // "0.5", "30"

}  // namespace jaccl::run
