// Copyright 2026 the jaccl authors.
// The TCP card: what a peer needs to reach this rank, published once through
// the side channel (binary, variable length) and validated on arrival.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "bootstrap/side_channel.h"
#include "common/affinity.h"

namespace jaccl::detail {

struct TcpCard {
  int rank = -1;
  // Numeric addresses this rank listens on, best first; empty (and port 0)
  // when it does not listen (JACCL_LISTEN=0).
  std::vector<std::string> addresses;
  uint16_t port = 0;
  int wires = 1;
  std::string hostname;
  // For the shared-memory transport: same boot id and IPC namespace means
  // POSIX shared memory is shared. The network namespace tells whether a
  // loopback address is reachable.
  std::string boot_id;
  std::string ipc_ns;
  std::string net_ns;
  int pid = 0;
  // CPUs this rank may run on (its affinity mask's count); 0 when not
  // said. cpu_mask: the mask itself, so that ranks of one host can count
  // the CPUs they have between them.
  int cpus = 0;
  CpuMask cpu_mask{};
  // Whether JACCL_WIRES / set_wires chose `wires` (a card without the field,
  // an older jaccl's, counts as chosen: it always used `wires`).
  bool wires_set = true;
  // The ofi transport's endpoints (one per wire), each ofi::Card::encode()
  // in hex; empty when this rank opened none.
  std::vector<std::string> ofi;

  bool listens() const { return port != 0 && !addresses.empty(); }
  // "rank 3 (host-a, 10.0.0.3:41234)" or "rank 3 (host-a, not listening)".
  std::string describe() const;
};

// This process's identity fields (hostname, boot id, namespaces, pid,
// CPUs) and its wire setting.
TcpCard local_card(int rank, int wires, bool wires_set = true);

std::string encode_card(const TcpCard& card);
// Throws ProtocolError naming `from` (the rank that published it) when the
// bytes are not a valid card or claim another rank. me is the reporting rank.
TcpCard decode_card(std::string_view bytes, int from, int me);

// All-gathers the cards (rank order) and validates them: malformed cards and
// a wires count other than ours are errors naming the rank.
std::vector<TcpCard> exchange_cards(SideChannel& sc, const TcpCard& mine);

}  // namespace jaccl::detail
