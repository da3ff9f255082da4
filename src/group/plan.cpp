// Copyright 2026 the jaccl authors.
#include "group/plan.h"

#include <map>
#include <utility>

#include "common/error.h"
#include "transport/shm_setup.h"
#include "transport/tcp_connect.h"

namespace jaccl::detail {

std::vector<int> host_ids(const std::vector<TcpCard>& cards) {
  std::map<std::pair<std::string, std::string>, int> ids;
  std::vector<int> out(cards.size());
  for (size_t r = 0; r < cards.size(); ++r) {
    const TcpCard& c = cards[r];
    if (c.boot_id.empty() || c.ipc_ns.empty()) {
      out[r] = -1 - static_cast<int>(r);  // unknown: a host of its own
      continue;
    }
    out[r] = ids.emplace(std::pair(c.boot_id, c.ipc_ns),
                         static_cast<int>(ids.size()))
                 .first->second;
  }
  return out;
}

Plan choose_plan(const Config& cfg, const std::vector<TcpCard>& cards,
                 int rank) {
  const std::string& transport = cfg.get_transport();
  const int remote = first_nonlocal(cards, rank);
  if (transport == "shm" && remote >= 0) {
    const TcpCard& c = cards[static_cast<size_t>(remote)];
    raise(ErrorKind::Config,
          "JACCL_TRANSPORT=shm but " + rank_ref(remote) +
              " is not on this host (" + c.hostname.str() +
              ", another kernel or IPC namespace): use auto or tcp",
          {.rank = rank, .peer = remote});
  }
  Plan plan;
  plan.map = HostMap::from_host_ids(host_ids(cards));
  const bool shared = plan.map.hosts.size() < cards.size();  // a host has 2+
  if (transport == "auto" || transport == "shm") {
    plan.layout = plan.map.hosts.size() == 1 ? Layout::Shm
                  : shared                   ? Layout::Hier
                                             : Layout::Flat;
  }
  plan.wires = default_tcp_wires(cards, plan.layout == Layout::Hier);
  return plan;
}

std::vector<int> tcp_data_wires(const Plan& plan, int rank, bool network_data) {
  const HostMap& map = plan.map;
  const size_t n = static_cast<size_t>(map.size());
  std::vector<int> wires(n, 0);
  for (size_t p = 0; p < n; ++p) {
    const int ip = static_cast<int>(p);
    if (ip == rank) {
      continue;
    }
    if (plan.layout == Layout::Shm && n > kFullControlMeshMax) {
      // Liveness only, as a star at rank 0 (its ABORT relays any rank's
      // death): a full mesh of 1024 ranks is 523,776 connections. Such a
      // group cannot agree or shrink (see docs/failures.md).
      wires[p] = (rank == 0 || p == 0) ? 0 : -1;
    } else if (plan.layout == Layout::Shm || !network_data) {
      // Shared memory or libfabric carries the data; TCP keeps liveness.
      // Every pair, also on one host (where a star at rank 0 would connect
      // 63 pairs at 64 ranks instead of 2016): the survivors of any death,
      // rank 0's too, must still reach each other to agree and shrink.
      wires[p] = 0;
    } else if (plan.layout == Layout::Flat) {
      wires[p] = data_wires_between(rank, ip, static_cast<int>(n), plan.wires);
    } else if (map.host_of[p] != map.host_of[static_cast<size_t>(rank)]) {
      // Leaders carry the collectives; other pairs only send/recv.
      const bool heads =
          map.index_of[p] == 0 && map.index_of[static_cast<size_t>(rank)] == 0;
      wires[p] = heads ? plan.wires : 1;
    }
  }
  return wires;
}

}  // namespace jaccl::detail
