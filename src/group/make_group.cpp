// Copyright 2026 the jaccl authors.
// make_group: pick the transport, connect it, hand the links to the
// collectives.
#include "group/make_group.h"

#include <numeric>
#include <utility>

#include "collectives/hier_group.h"
#include "collectives/net_group.h"
#include "common/error.h"
#include "common/log.h"
#include "group/plan.h"
#include "transport/connections.h"
#include "transport/shm_setup.h"
#include "transport/tcp_connect.h"
#include "transport/tcp_endpoint.h"

namespace jaccl::detail {

namespace {

// The hierarchical group: this host's shared-memory group, the leaders'
// TCP group (on leaders) and a send/recv group for the other cross-host
// pairs. Leader-to-leader wires go to the leaders' group.
std::shared_ptr<Group> make_hier_group(const Config& cfg, SideChannel& sc,
                                       Connections conns, HostMap map) {
  const int rank = conns.rank;
  auto local = make_shm_group(cfg, sc, conns, map.members_of(rank));
  std::shared_ptr<Group> leaders;
  const std::vector<int> heads = map.leaders();
  if (map.index_of[static_cast<size_t>(rank)] == 0) {
    Connections lc;
    lc.rank = map.host_of[static_cast<size_t>(rank)];
    lc.size = static_cast<int>(heads.size());
    lc.names = heads;
    lc.op_timeout = conns.op_timeout;
    lc.state = conns.state;
    lc.keepalive = conns.keepalive;
    lc.wires.resize(heads.size());
    for (size_t h = 0; h < heads.size(); ++h) {
      lc.wires[h] = std::move(conns.wires[static_cast<size_t>(heads[h])]);
    }
    leaders = make_net_group(cfg, make_tcp_network(std::move(lc)));
  }
  auto state = conns.state;
  auto p2p = make_net_group(cfg, make_tcp_network(std::move(conns)),
                            /*p2p_only=*/true);
  JACCL_LOG(Info, "rank " << rank << ": shared memory inside "
                          << map.hosts.size() << " hosts, TCP between them"
                          << (leaders ? " (host leader)" : ""));
  return std::make_shared<HierGroup>(rank, std::move(map), std::move(local),
                                     std::move(leaders), std::move(p2p),
                                     std::move(state));
}

}  // namespace

std::shared_ptr<Group> make_group(const Config& cfg, SideChannel& sc) {
  const int rank = cfg.get_rank();
  const std::string& transport = cfg.get_transport();
  if (transport != "tcp" && transport != "auto" && transport != "shm") {
    raise(ErrorKind::Config,
          "unknown transport '" + transport + "' (expected auto, tcp or shm)",
          {.rank = rank});
  }
  // Control connections (liveness) are always made between every pair; data
  // wires only where TCP carries the data. auto: shared memory between ranks
  // that share a kernel and IPC namespace, TCP between the others.
  Plan plan;
  auto want_data = [&](const std::vector<TcpCard>& cards) {
    plan = choose_plan(cfg, cards, rank);
    return tcp_data_wires(plan, cfg, rank, /*network_data=*/true);
  };
  Connections conns = setup_tcp(cfg, sc, want_data);
  if (plan.layout == Layout::Shm) {
    std::vector<int> all(static_cast<size_t>(cfg.get_size()));
    std::iota(all.begin(), all.end(), 0);
    return make_shm_group(cfg, sc, conns, all);
  }
  if (plan.layout == Layout::Hier) {
    return make_hier_group(cfg, sc, std::move(conns), std::move(plan.map));
  }
  JACCL_LOG(Info, "rank " << rank << ": TCP data plane ready ("
                          << cfg.get_size() << " ranks, " << cfg.get_wires()
                          << " wires)");
  return make_net_group(cfg, make_tcp_network(std::move(conns)));
}

}  // namespace jaccl::detail
