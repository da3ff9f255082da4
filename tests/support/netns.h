// Copyright 2026 the jaccl authors.
// A second "host" for multi-process tests: a throwaway network namespace
// joined to this one by a veth pair with a /30 subnet of its own (root
// only; ok() is false where the kernel refuses). Removed at destruction.
#pragma once

#include <unistd.h>

#include <chrono>
#include <string>

#include "support/proc.h"

namespace jaccl::test {

class Netns {
 public:
  Netns() {
    // Names and a /30 subnet unique per test process: ctest runs tests of
    // this binary in parallel processes.
    const int pid = static_cast<int>(::getpid());
    const std::string id = std::to_string(pid);
    ns_ = "jshm" + id;
    host_if_ = "jsa" + id;
    ns_if_ = "jsb" + id;
    const std::string net = "10." + std::to_string(200 + pid / 16384 % 50) +
                            "." + std::to_string(pid / 64 % 256) + ".";
    host_ip_ = net + std::to_string(pid % 64 * 4 + 1);
    ns_ip_ = net + std::to_string(pid % 64 * 4 + 2);
    // Whatever already carries this pid's names was left by a killed test
    // process whose pid was reused: remove it first.
    const std::string script =
        "ip link del " + host_if_ + " 2>/dev/null; ip netns del " + ns_ +
        " 2>/dev/null; set -e; ip netns add " + ns_ + "; ip link add " +
        host_if_ + " type veth peer name " + ns_if_ + " netns " + ns_ +
        "; ip addr add " + host_ip_ + "/30 dev " + host_if_ + "; ip link set " +
        host_if_ + " up; ip -n " + ns_ + " addr add " + ns_ip_ + "/30 dev " +
        ns_if_ + "; ip -n " + ns_ + " link set " + ns_if_ + " up; ip -n " +
        ns_ + " link set lo up";
    auto r = run("/bin/sh", {"-c", script}, {}, std::chrono::seconds(20));
    ok_ = r.exited_ok();
    why_ = r.describe() + ": " + r.output;
  }
  ~Netns() {
    run("/bin/sh",
        {"-c", "ip link del " + host_if_ +
                   " 2>/dev/null; ip netns "
                   "del " +
                   ns_ + " 2>/dev/null; true"},
        {}, std::chrono::seconds(20));
  }
  bool ok() const { return ok_; }
  const std::string& why() const { return why_; }
  const std::string& name() const { return ns_; }
  const std::string& host_ip() const { return host_ip_; }
  const std::string& ns_ip() const { return ns_ip_; }
  // The veth pair's two ends: this namespace's and the new one's.
  const std::string& host_if() const { return host_if_; }
  const std::string& ns_if() const { return ns_if_; }

 private:
  bool ok_ = false;
  std::string why_, ns_, host_if_, ns_if_, host_ip_, ns_ip_;
};

}  // namespace jaccl::test
