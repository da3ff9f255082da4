// Copyright 2026 the jaccl authors.
// Groups assembled by hand inside one process, threads as ranks, for the
// kinds jaccl::init cannot make there: a socket group over socket pairs,
// and a hierarchical group (init finds one host in one process). Each is
// the data plane's own classes -- NetGroup, ShmGroup over a real segment,
// HierGroup -- wired as group/make_group.cpp wires them.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <vector>

#include "jaccl/jaccl.h"
#include "transport/control_block.h"
#include "transport/failure.h"

namespace jaccl::test {

using Groups = std::vector<std::shared_ptr<Group>>;

struct SocketOptions {
  int wires = 1;
  bool tcp = false;  // loopback TCP pairs, else socketpair(AF_UNIX)
  std::chrono::milliseconds op_timeout{30000};
};

// Control blocks of n ranks with o.wires connected socket pairs between
// every pair a < b for which linked(a, b) holds.
std::vector<detail::ControlBlock> socket_blocks(
    int n, const SocketOptions& o,
    const std::function<bool(int, int)>& linked = [](int, int) {
      return true;
    });

// Shared-memory groups over one real segment. names: the job rank of each
// member (as for a hierarchical group's local group); states: each
// member's failure state (default: one each).
Groups shm_groups(
    int n, std::vector<int> names = {},
    std::vector<std::shared_ptr<detail::FailureState>> states = {});

// Hierarchical groups as make_group assembles them, host_of[r] being rank
// r's host: a shared-memory group per host of two or more ranks, the
// leaders' socket group and a send/recv-only socket group for the other
// cross-host pairs (loopback TCP), all of one rank sharing its failure
// state.
Groups hier_groups(const std::vector<int>& host_of);

// A device matrix for libfabric's tcp provider, whose domains are
// interfaces: every rank's row names lo, so nothing leaves the loopback
// interface.
Config::DeviceMatrix loopback_devices(int n);

}  // namespace jaccl::test
