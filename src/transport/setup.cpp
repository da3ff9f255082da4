// Copyright 2026 the jaccl authors.
// make_group: pick the transport, connect it, hand the links to the
// collectives.
#include "transport/setup.h"

#include <numeric>

#include "collectives/socket_group.h"
#include "common/error.h"
#include "common/log.h"
#include "transport/connections.h"
#include "transport/shm_setup.h"
#include "transport/tcp_connect.h"

namespace jaccl::detail {

std::shared_ptr<Group> make_group(const Config& cfg, SideChannel& sc) {
  const int rank = cfg.get_rank();
  const std::string& transport = cfg.get_transport();
  if (transport != "tcp" && transport != "auto" && transport != "shm") {
    raise(ErrorKind::Config,
          "unknown transport '" + transport + "' (expected auto, tcp or shm)",
          {.rank = rank});
  }
  // Control connections (liveness) are always made; data wires only when
  // TCP carries the data. auto: shared memory when every rank shares this
  // host's kernel and IPC namespace, else TCP for everyone.
  bool use_shm = false;
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
    use_shm = transport == "shm" || (transport == "auto" && remote < 0);
    return !use_shm;
  };
  Connections conns = setup_tcp(cfg, sc, want_data);
  if (use_shm) {
    std::vector<int> all(static_cast<size_t>(cfg.get_size()));
    std::iota(all.begin(), all.end(), 0);
    auto g = make_shm_group(cfg, sc, conns, all);
    if (g)
      return g;
    return make_socket_group(cfg, std::move(conns));  // a single rank
  }
  JACCL_LOG(Info, "rank " << rank << ": TCP data plane ready ("
                          << cfg.get_size() << " ranks, " << cfg.get_wires()
                          << " wires)");
  return make_socket_group(cfg, std::move(conns));
}

}  // namespace jaccl::detail
