// Copyright 2026 the jaccl authors.
// make_group: pick the transport, connect it, hand the links to the
// collectives.
#include "group/make_group.h"

#include <map>
#include <numeric>
#include <utility>

#include "collectives/hier_group.h"
#include "collectives/net_group.h"
#include "common/error.h"
#include "common/log.h"
#include "transport/connections.h"
#include "transport/shm_setup.h"
#include "transport/tcp_connect.h"
#include "transport/tcp_endpoint.h"

namespace jaccl::detail {

namespace {

enum class Plan {
  Tcp,   // every pair over TCP
  Shm,   // one host: everything through shared memory
  Hier,  // shared memory inside hosts, TCP between them
};

// Ranks share a host id when they can share memory (first_nonlocal's rule:
// same boot id and IPC namespace, both known).
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
  Plan plan = Plan::Tcp;
  HostMap map;
  auto want_data = [&](const std::vector<TcpCard>& cards) {
    int remote = first_nonlocal(cards, rank);
    if (transport == "shm" && remote >= 0) {
      const TcpCard& c = cards[static_cast<size_t>(remote)];
      raise(ErrorKind::Config,
            "JACCL_TRANSPORT=shm but rank " + std::to_string(remote) +
                " is not on this host (" + c.hostname +
                ", another kernel or IPC namespace): use auto or tcp",
            {.rank = rank, .peer = remote});
    }
    map = HostMap::from_host_ids(host_ids(cards));
    const size_t n = cards.size();
    const bool shared = map.hosts.size() < n;  // some host has 2+ ranks
    if (transport != "tcp") {
      plan = map.hosts.size() == 1 ? Plan::Shm
             : shared              ? Plan::Hier
                                   : Plan::Tcp;
    }
    std::vector<int> wires(n);
    for (size_t p = 0; p < n; ++p) {
      const int ip = static_cast<int>(p);
      if (plan == Plan::Shm) {
        // Liveness only, as a star at rank 0: its ABORT relays any rank's
        // death, and 64 ranks make 63 connections instead of 2016.
        wires[p] = (rank == 0 || p == 0) ? 0 : -1;
      } else if (plan == Plan::Tcp) {
        wires[p] =
            data_wires_between(rank, ip, static_cast<int>(n), cfg.get_wires());
      } else if (plan == Plan::Hier && map.host_of[p] != map.host_of[rank]) {
        // Leaders carry the collectives; other pairs only send/recv.
        const bool heads = map.index_of[p] == 0 && map.index_of[rank] == 0;
        wires[p] = heads ? cfg.get_wires() : 1;
      }
    }
    return wires;
  };
  Connections conns = setup_tcp(cfg, sc, want_data);
  if (plan == Plan::Shm) {
    std::vector<int> all(static_cast<size_t>(cfg.get_size()));
    std::iota(all.begin(), all.end(), 0);
    return make_shm_group(cfg, sc, conns, all);
  }
  if (plan == Plan::Hier) {
    return make_hier_group(cfg, sc, std::move(conns), std::move(map));
  }
  JACCL_LOG(Info, "rank " << rank << ": TCP data plane ready ("
                          << cfg.get_size() << " ranks, " << cfg.get_wires()
                          << " wires)");
  return make_net_group(cfg, make_tcp_network(std::move(conns)));
}

}  // namespace jaccl::detail
