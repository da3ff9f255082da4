// Copyright 2026 the jaccl authors.
// make_group: open the network transport, connect, choose the plan and hand
// the links to the collectives.
#include "group/make_group.h"

#include <algorithm>
#include <numeric>
#include <optional>
#include <utility>

#include "collectives/hier_group.h"
#include "collectives/net_group.h"
#include "collectives/shm_group.h"
#include "collectives/shm_strategy.h"
#include "common/error.h"
#include "common/log.h"
#include "group/plan.h"
#include "transport/control_block.h"
#include "transport/ofi/ofi_fabric.h"
#include "transport/ofi_link.h"
#include "transport/rdma_devices.h"
#include "transport/shm_setup.h"
#include "transport/tcp_connect.h"
#include "transport/tcp_endpoint.h"
#include "transport/tcp_reuse.h"

namespace jaccl::detail {

namespace {

// Tags that keep the groups sharing the ofi endpoints apart.
constexpr int kTagFlat = 1;
constexpr int kTagLeaders = 2;
constexpr int kTagP2p = 3;

// The ofi transport this rank may use: forced (JACCL_TRANSPORT=ofi: any
// failure to open it is the caller's ConfigError), under auto the provider
// of a domain the device matrix names, else only when
// a provider drives RDMA hardware here (else nullptr: TCP between hosts;
// without any RDMA device node libfabric is not even loaded).
std::shared_ptr<OfiNet> open_ofi(const Config& cfg) {
  const int rank = cfg.get_rank();
  if (cfg.get_size() == 1) {
    return nullptr;
  }
  if (cfg.get_transport() == "ofi") {
    return OfiNet::open(cfg);
  }
  if (cfg.get_transport() != "auto") {
    return nullptr;
  }
  // A device the matrix (JACCL_IBV_DEVICES, MLX_IBV_DEVICES) names for this
  // rank is a libfabric domain: take the provider offering it, and refuse a
  // name none offers instead of silently running without it.
  const std::string named = ofi_domain_for(cfg, rank);
  if (!named.empty()) {
    std::string listing;
    Config c = cfg;
    if (c.get_ofi_provider().empty()) {
      c.set_ofi_provider(ofi::provider_with_domain(named, &listing));
    }
    if (c.get_ofi_provider().empty()) {
      raise(ErrorKind::Config,
            "the device matrix (JACCL_IBV_DEVICES) names device '" + named +
                "' for this rank, and no libfabric provider here offers a "
                "domain of that name (providers and domains here: " +
                listing +
                "); name one of those, or write null for every entry on "
                "machines without RDMA (then shared memory and TCP carry "
                "the data)",
            {.rank = rank});
    }
    return OfiNet::open(c);
  }
  if (!ofi::built()) {
    JACCL_LOG(Info, "rank " << rank << ": ofi not built: TCP between hosts");
    return nullptr;
  }
  // Loading libfabric to ask costs ~0.4 s of CPU: not where no RDMA device
  // exists for a hardware provider to drive.
  const std::string device = find_rdma_device();
  if (device.empty()) {
    JACCL_LOG(Info, "rank " << rank
                            << ": no RDMA device here (none in "
                               "/sys/class/infiniband, /dev/hfi1_*, /dev/cxi*):"
                               " TCP between hosts, libfabric not loaded");
    return nullptr;
  }
  const std::string hw = ofi::hardware_provider();
  if (hw.empty()) {
    JACCL_LOG(Info, "rank " << rank << ": RDMA device " << device
                            << " but no libfabric provider drives it: TCP "
                               "between hosts");
    return nullptr;
  }
  Config c = cfg;
  if (c.get_ofi_provider().empty()) {
    c.set_ofi_provider(hw);
  }
  try {
    return OfiNet::open(c);
  } catch (const Error& e) {
    JACCL_LOG(Warn, "rank " << rank << ": libfabric provider " << hw
                            << " found but not usable (" << e.what()
                            << "): TCP between hosts");
    return nullptr;
  }
}

// The shared-memory group of the ranks `members` (job ranks on one host,
// ascending, this rank among them): the transport's channel with the
// shared-memory algorithms on it. Collective over the whole job (every rank
// calls it with its own host's members). A host with one rank gets no
// group (nullptr).
std::shared_ptr<Group> make_shm_group(const Config& cfg, SideChannel& sc,
                                      const ControlBlock& conns,
                                      const std::vector<int>& members) {
  // A strategy Config refused is reported by setup_shm on every rank.
  ShmStrategy strategy = ShmStrategy::Auto;
  parse_shm_strategy(cfg.get_shm_strategy().c_str(), &strategy);
  const ShmHeaderInit init{static_cast<uint32_t>(strategy),
                           ShmGroup::default_chunk_bytes()};
  std::optional<ShmChannel> ch = setup_shm(cfg, sc, conns, members, init);
  if (!ch) {
    return nullptr;
  }
  return std::make_shared<ShmGroup>(std::move(*ch), cfg.get_op_timeout());
}

// The hierarchical group: this host's shared-memory group, the leaders'
// network group (on leaders) and a send/recv group for the other
// cross-host pairs. Leader-to-leader wires go to the leaders' group.
std::shared_ptr<Group> make_hier_group(const Config& cfg, SideChannel& sc,
                                       ControlBlock conns, HostMap map,
                                       OfiNet* ofi) {
  const int rank = conns.rank;
  auto local = make_shm_group(cfg, sc, conns, map.members_of(rank));
  std::shared_ptr<Group> leaders;
  const std::vector<int> heads = map.leaders();
  const bool head = map.index_of[static_cast<size_t>(rank)] == 0;
  if (head && ofi != nullptr) {
    const std::vector<char> all(heads.size(), 1);
    leaders = make_net_group(
        cfg, ofi->make_network(conns, heads, all, ofi_wires(cfg), kTagLeaders));
  } else if (head) {
    ControlBlock lc;
    lc.rank = map.host_of[static_cast<size_t>(rank)];
    lc.size = static_cast<int>(heads.size());
    lc.names = heads;
    lc.op_timeout = conns.op_timeout;
    lc.state = conns.state;
    lc.keepalive = conns.keepalive;
    lc.wires.resize(heads.size());
    lc.send_buffer.assign(heads.size(), 0);
    for (size_t h = 0; h < heads.size(); ++h) {
      const auto p = static_cast<size_t>(heads[h]);
      lc.wires[h] = std::move(conns.wires[p]);
      if (p < conns.send_buffer.size()) {
        lc.send_buffer[h] = conns.send_buffer[p];
      }
    }
    leaders = make_net_group(cfg, make_tcp_network(std::move(lc)));
  }
  auto state = conns.state;
  std::shared_ptr<Group> p2p;
  std::string name = "shm+tcp";
  if (ofi != nullptr) {
    // Send/recv between ranks on different hosts, except leader pairs.
    std::vector<char> peers(static_cast<size_t>(map.size()), 0);
    for (int p = 0; p < map.size(); ++p) {
      const auto up = static_cast<size_t>(p);
      peers[up] = map.host_of[up] != map.host_of[static_cast<size_t>(rank)] &&
                  !(head && map.index_of[up] == 0);
    }
    p2p = make_net_group(cfg, ofi->make_network(conns, {}, peers, 1, kTagP2p),
                         /*p2p_only=*/true);
    name = "shm+ofi(" + ofi->provider() + ")";
  } else {
    p2p = make_net_group(cfg, make_tcp_network(std::move(conns)),
                         /*p2p_only=*/true);
  }
  JACCL_LOG(Info, "rank " << rank << ": shared memory inside "
                          << map.hosts.size() << " hosts, "
                          << (ofi != nullptr ? "ofi" : "TCP") << " between them"
                          << (leaders ? " (host leader)" : ""));
  return std::make_shared<HierGroup>(rank, std::move(map), std::move(local),
                                     std::move(leaders), std::move(p2p),
                                     std::move(state), std::move(name));
}

}  // namespace

namespace {

// A shrunk group's control block when the parent's cards give a plan of
// shared memory alone: nothing to exchange or connect (nullopt: set up as
// usual). Every member decides alike: the same cards, the same plan.
std::optional<ControlBlock> takeover_shm_only(const Config& cfg,
                                              const Takeover& t) {
  const int rank = cfg.get_rank();
  if (t.cards.size() != static_cast<size_t>(cfg.get_size()) ||
      cfg.get_size() < 2 ||
      std::any_of(t.cards.begin(), t.cards.end(),
                  [](const TcpCard& c) { return !c.ofi.empty(); })) {
    return std::nullopt;
  }
  if (choose_plan(cfg, t.cards, rank).layout != Layout::Shm) {
    return std::nullopt;
  }
  ControlBlock conns;
  conns.rank = rank;
  conns.size = cfg.get_size();
  conns.op_timeout = cfg.get_op_timeout();
  conns.wires.resize(static_cast<size_t>(conns.size));
  count_host_cpus(t.cards, rank, conns);
  conns.cards = std::make_shared<const std::vector<TcpCard>>(t.cards);
  conns.keepalive = t.slot;
  conns.shrink = true;
  conns.broadcast = t.broadcast;
  return conns;
}

// A shrunk group's control block when the parent's cards give a plan of
// TCP alone and the parent's data connections can be taken over (one
// gather; nullopt: dial as usual). Every member decides alike whether to
// try: the same cards, the same plan, the same kind of parent.
std::optional<ControlBlock> takeover_tcp(const Config& cfg, SideChannel& sc,
                                         const Takeover& t) {
  const int rank = cfg.get_rank();
  const std::string& transport = cfg.get_transport();
  if (!t.wires || t.cards.size() != static_cast<size_t>(cfg.get_size()) ||
      t.parent_of.size() != t.cards.size() || cfg.get_size() < 2 ||
      (transport != "tcp" && transport != "auto") ||
      std::any_of(t.cards.begin(), t.cards.end(),
                  [](const TcpCard& c) { return !c.ofi.empty(); })) {
    return std::nullopt;
  }
  const Plan plan = choose_plan(cfg, t.cards, rank);
  if (plan.layout != Layout::Flat) {
    return std::nullopt;
  }
  const std::vector<int> want =
      tcp_data_wires(plan, rank, /*network_data=*/true);
  // The most wires any pair wants (ring neighbours'): the same on every
  // member, so every member's gather is as long.
  std::optional<ReusedWires> reused = reuse_tcp_wires(
      cfg, sc, *t.wires, t.parent_of, want, std::max(1, plan.wires), t.gather);
  if (!reused) {
    return std::nullopt;
  }
  std::optional<ControlBlock> conns = std::move(reused->conns);
  if (reused->any_missing) {
    // Only the wires the parent did not have (a new ring neighbour's):
    // every member dials or accepts its own, no control connections.
    const std::vector<int> missing = reused->missing;
    ControlBlock extra = setup_tcp(
        cfg, sc, [missing](const std::vector<TcpCard>&) { return missing; }, {},
        t.slot);
    for (size_t i = 0; i < extra.wires.size() && i < conns->wires.size(); ++i) {
      for (Fd& fd : extra.wires[i]) {
        conns->wires[i].push_back(std::move(fd));
      }
      if (!extra.wires[i].empty() && i < extra.send_buffer.size()) {
        conns->send_buffer[i] = extra.send_buffer[i];
      }
    }
  }
  count_host_cpus(t.cards, rank, *conns);
  conns->cards = std::make_shared<const std::vector<TcpCard>>(t.cards);
  conns->keepalive = t.slot;
  conns->shrink = true;
  return conns;
}

}  // namespace

std::shared_ptr<Group> make_group(const Config& cfg, SideChannel& sc,
                                  GroupControl* control,
                                  const Takeover* takeover) {
  if (takeover != nullptr) {
    if (auto conns = takeover_shm_only(cfg, *takeover)) {
      if (control != nullptr) {
        *control = GroupControl{conns->state, nullptr, conns->cards};
      }
      std::vector<int> all(static_cast<size_t>(cfg.get_size()));
      std::iota(all.begin(), all.end(), 0);
      return make_shm_group(cfg, sc, *conns, all);
    }
    if (auto conns = takeover_tcp(cfg, sc, *takeover)) {
      conns->bank = std::make_shared<WireBank>();
      if (control != nullptr) {
        *control =
            GroupControl{conns->state, nullptr, conns->cards, conns->bank};
      }
      JACCL_LOG(Info, "rank " << conns->rank
                              << ": TCP data plane taken over from the "
                                 "parent group ("
                              << cfg.get_size() << " ranks)");
      return make_net_group(cfg, make_tcp_network(std::move(*conns)));
    }
  }
  const int rank = cfg.get_rank();
  const std::string& transport = cfg.get_transport();
  if (transport != "tcp" && transport != "auto" && transport != "shm" &&
      transport != "ofi") {
    raise(ErrorKind::Config,
          "unknown transport '" + transport +
              "' (expected auto, tcp, shm or ofi)",
          {.rank = rank});
  }
  std::shared_ptr<OfiNet> ofi = open_ofi(cfg);
  // Control connections (liveness) are always made between every pair; data
  // wires only where TCP carries the data. auto: shared memory between ranks
  // that share a kernel and IPC namespace, the network between the others
  // (ofi where every rank has RDMA hardware, else TCP).
  Plan plan;
  bool use_ofi = false;
  auto want_data = [&](const std::vector<TcpCard>& cards) {
    plan = choose_plan(cfg, cards, rank);
    if (ofi != nullptr && plan.layout != Layout::Shm) {
      use_ofi = std::all_of(cards.begin(), cards.end(),
                            [](const TcpCard& c) { return !c.ofi.empty(); });
      if (transport == "ofi" || use_ofi) {
        std::vector<std::vector<std::string>> ofi_cards;
        for (const TcpCard& c : cards) {
          ofi_cards.push_back(c.ofi);
        }
        // Before the set-up's barrier: every rank knows every address
        // before anyone sends.
        ofi->insert_peers(ofi_cards);
        use_ofi = true;
      } else {
        JACCL_LOG(Info, "rank " << rank
                                << ": some rank has no RDMA provider: TCP "
                                   "between hosts");
      }
    }
    return tcp_data_wires(plan, rank, /*network_data=*/!use_ofi);
  };
  // One host, shared memory only: the monitor starts after the shared-memory
  // set-up's first gather instead of behind a barrier of its own.
  ControlBlock conns =
      setup_tcp(cfg, sc, want_data,
                ofi != nullptr ? ofi->card() : std::vector<std::string>(),
                takeover != nullptr ? takeover->slot : nullptr,
                [&] { return plan.layout == Layout::Shm; });
  if (plan.layout == Layout::Flat && !use_ofi && cfg.get_size() > 1) {
    conns.bank = std::make_shared<WireBank>();
  }
  if (control != nullptr) {
    *control =
        GroupControl{conns.state, conns.monitor, conns.cards, conns.bank};
  }
  if (plan.layout == Layout::Shm) {
    std::vector<int> all(static_cast<size_t>(cfg.get_size()));
    std::iota(all.begin(), all.end(), 0);
    auto group = make_shm_group(cfg, sc, conns, all);
    if (control != nullptr && conns.monitor_slot) {
      control->monitor = conns.monitor_slot->monitor;
    }
    return group;
  }
  if (plan.layout == Layout::Hier) {
    return make_hier_group(cfg, sc, std::move(conns), std::move(plan.map),
                           use_ofi ? ofi.get() : nullptr);
  }
  // The side channel goes away when init returns: one barrier more proves
  // every rank has left setup_tcp's, so nobody is still reading it. (The
  // shared-memory layouts' own calls follow instead.) A shrink's commit
  // agreement does that job (group/shrink.cpp): every survivor votes only
  // once it is done with the side channel.
  if (cfg.get_size() > 1 && takeover == nullptr) {
    sc.barrier();
  }
  if (use_ofi) {
    JACCL_LOG(Info, "rank " << rank << ": ofi data plane ready ("
                            << cfg.get_size() << " ranks, provider "
                            << ofi->provider() << ", domain " << ofi->domain()
                            << ", " << ofi_wires(cfg) << " wires)");
    const std::vector<char> all(static_cast<size_t>(cfg.get_size()), 1);
    return make_net_group(
        cfg, ofi->make_network(conns, {}, all, ofi_wires(cfg), kTagFlat));
  }
  JACCL_LOG(Info, "rank " << rank << ": TCP data plane ready ("
                          << cfg.get_size() << " ranks, " << plan.wires
                          << " wires)");
  return make_net_group(cfg, make_tcp_network(std::move(conns)));
}

}  // namespace jaccl::detail
