// Copyright 2026 the jaccl authors.
// Where the ranks of a multi-host job run: the host list from --hosts or a
// hostfile (mlx.launch's JSON, or "host slots=N" lines as Open MPI and
// DeepSpeed write them), ranks placed on hosts in order, and the address
// of the first host for the coordinator.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

namespace jaccl::run {

// A bad host list or hostfile; what() names the file, line or entry.
struct HostsError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Host {
  std::string ssh;               // destination given to ssh: [user@]name
  int slots = 1;                 // ranks it takes
  std::vector<std::string> ips;  // addresses the other hosts reach it on
};

struct HostPlan {
  std::vector<Host> hosts;
  std::vector<std::string> envs;  // K=V for every rank (JSON "envs")
  bool ring = false;              // JSON "backend": "jaccl-ring"
  std::string devices;            // the device matrix as JSON ("" if none)
};

// "h1,h2:4,user@h3" (slots default to 1).
HostPlan parse_host_list(const std::string& list);
// A JSON hostfile (an object with "hosts", or a bare array of hosts; each
// host one rank unless it has "slots") or a text one ("host [slots=N]" per
// line, '#' comments).
HostPlan parse_hostfile(const std::string& path);

// The host of every rank: ranks fill the hosts in order, each up to its
// slots. n == 0 takes every slot. Throws if n exceeds the slots, or if a
// device matrix does not have n rows.
std::vector<int> place_ranks(const HostPlan& plan, int n);

// "ADDRESS:PORT" for the coordinator on the first host: its first "ips"
// entry, else its name if it is an address, else the name resolved here.
// A loopback address is refused when other hosts would have to reach it.
std::string coordinator_address(const HostPlan& plan,
                                const std::vector<int>& host_of, int port);

// The name part of an ssh destination ("user@name" -> "name").
std::string host_name(const std::string& ssh);

}  // namespace jaccl::run
