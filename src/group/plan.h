// Copyright 2026 the jaccl authors.
// The plan: from the gathered cards and the config, which ranks share
// memory, how the group is laid out (one host on shared memory, a flat
// network group, or shared memory inside hosts and the network between
// them) and how many TCP data wires each pair gets. Pure decisions, no I/O.
#pragma once

#include <string>
#include <vector>

#include "collectives/hier_group.h"
#include "jaccl/jaccl.h"
#include "transport/tcp_card.h"

namespace jaccl::detail {

enum class Layout {
  Flat,  // every pair over the network transport
  Shm,   // one host: everything through shared memory
  Hier,  // shared memory inside hosts, the network between them
};

// The largest one-host (shared-memory) group whose control connections
// form a full mesh, as agree_failed and shrink need; a larger one keeps a
// star at rank 0 (n - 1 connections instead of n (n - 1) / 2).
inline constexpr size_t kFullControlMeshMax = 128;

struct Plan {
  Layout layout = Layout::Flat;
  HostMap map;
  int wires = 2;  // TCP data wires of a pair that carries data
};

// Host ids for HostMap: ranks share one when they can share memory (same
// kernel boot id and IPC namespace, both known).
std::vector<int> host_ids(const std::vector<TcpCard>& cards);

// JACCL_TRANSPORT=shm with a rank on another host is a ConfigError naming
// it; tcp (and ofi) force a flat group over the network.
Plan choose_plan(const Config& cfg, const std::vector<TcpCard>& cards,
                 int rank);

// TCP data wires toward each peer (-1: no connection at all; 0: the control
// connection only; the same number at both ends of a pair). network_data:
// whether TCP carries the network's data (false when libfabric does).
std::vector<int> tcp_data_wires(const Plan& plan, int rank, bool network_data);

}  // namespace jaccl::detail
