// Copyright 2026 the jaccl authors.
// make_group: pick the transport, connect it, hand the links to the
// collectives.
#include "transport/setup.h"

#include "common/error.h"
#include "common/log.h"
#include "transport/connections.h"
#include "transport/tcp_connect.h"

#if __has_include("collectives/socket_group.h")
#include "collectives/socket_group.h"
#endif

namespace jaccl::detail {

// Defined in src/collectives/ (collectives/socket_group.h). Declared weak so
// this file links before that one exists; make_group then says so.
[[gnu::weak]] std::shared_ptr<Group> make_socket_group(const Config& cfg,
                                                       Connections conns);

std::shared_ptr<Group> make_group(const Config& cfg, SideChannel& sc) {
  const int rank = cfg.get_rank();
  const std::string& transport = cfg.get_transport();
  if (transport == "shm") {
    raise(ErrorKind::Config,
          "JACCL_TRANSPORT=shm: the shared-memory transport is not built yet "
          "(use tcp or auto)",
          {.rank = rank});
  }
  if (transport != "tcp" && transport != "auto") {
    raise(ErrorKind::Config,
          "unknown transport '" + transport + "' (expected auto, tcp or shm)",
          {.rank = rank});
  }
  Connections conns = setup_tcp(cfg, sc);
  if (&make_socket_group == nullptr) {
    raise(ErrorKind::Internal,
          "the TCP data plane is connected over the side channel (" +
              sc.description() +
              "), but this build has no collectives (make_socket_group)",
          {.rank = rank});
  }
  JACCL_LOG(Info, "rank " << rank << ": TCP data plane ready ("
                          << cfg.get_size() << " ranks, " << cfg.get_wires()
                          << " wires)");
  return make_socket_group(cfg, std::move(conns));
}

}  // namespace jaccl::detail
