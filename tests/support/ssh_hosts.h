// Copyright 2026 the jaccl authors.
// Several "hosts" for launcher tests, each reached over real ssh: a network
// namespace of its own joined to a bridge in this one by a veth pair (one
// /24 for all, so hosts reach each other and us), its own IPC namespace,
// and its own sshd (started by us on a test-only host key, a free port and
// a client key of ours). ssh_command() is an ssh that reaches them by
// address ("ssh -F <config> -o BatchMode=yes"). Root only: skip_reason()
// says why not elsewhere. Everything is removed at destruction (also when
// the test failed): the processes in the namespaces, the namespaces, the
// bridge, the keys.
//
// The namespaces share this machine's filesystem and pid space, so a test
// sees every process a host runs (pids_in) and every command line.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "support/fixtures.h"

namespace jaccl::test {

class Job;

class SshHosts {
 public:
  explicit SshHosts(int count);
  ~SshHosts();
  SshHosts(const SshHosts&) = delete;
  SshHosts& operator=(const SshHosts&) = delete;

  // Non-empty: the machine cannot do this (not root, no sshd): skip.
  const std::string& skip_reason() const { return skip_; }
  // Non-empty: setting up failed although it should work: fail.
  const std::string& error() const { return error_; }

  int size() const { return static_cast<int>(ips_.size()); }
  const std::string& ip(int h) const { return ips_[static_cast<size_t>(h)]; }
  const std::string& netns(int h) const { return ns_[static_cast<size_t>(h)]; }
  // Host h's end of its veth pair (the interface its address is on).
  const std::string& ifname(int h) const {
    return ifs_[static_cast<size_t>(h)];
  }
  // Our own address on the bridge (the root namespace).
  const std::string& bridge_ip() const { return bridge_ip_; }
  // An ssh command line (for jaccl-run --ssh) that reaches every host.
  std::string ssh_command() const;
  // Adds a Host entry for an address that is none of the hosts (to point
  // ssh at something unreachable); port 0 keeps ssh's default.
  void add_alias(const std::string& address, int port);
  const TempDir& dir() const { return dir_; }

  // Processes in host h's network namespace, other than its sshd listener.
  std::vector<pid_t> pids_in(int h) const;
  // True once no host runs anything but its sshd listener (polls up to
  // the deadline).
  bool all_quiet(std::chrono::milliseconds deadline) const;
  // Every host's leftover processes with their command lines, for messages.
  std::string describe_leftovers() const;

 private:
  bool sh(const std::string& script, std::string* out = nullptr);
  std::string setup(int count);
  void write_ssh_config();
  void remove_stale();

  TempDir dir_;
  std::string id_, bridge_, bridge_ip_, skip_, error_;
  std::vector<std::string> ns_, ips_, ifs_;
  std::vector<int> ports_;
  std::vector<std::pair<std::string, int>> aliases_;
  std::vector<std::unique_ptr<Job>> sshd_;
};

}  // namespace jaccl::test
