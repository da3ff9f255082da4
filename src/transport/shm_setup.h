// Copyright 2026 the jaccl authors.
// The shared-memory transport: which peers share this host, and the
// segment set-up for a group whose ranks all do.
#pragma once

#include <memory>
#include <vector>

#include "bootstrap/side_channel.h"
#include "jaccl/jaccl.h"
#include "transport/connections.h"
#include "transport/tcp_card.h"

namespace jaccl::detail {

// Peers are local when they share the kernel boot id AND the IPC namespace:
// two containers on one host with separate IPC namespaces cannot share POSIX
// shared memory, so they are not local. Returns the first rank that is not
// local to `me`, or -1.
int first_nonlocal(const std::vector<TcpCard>& cards, int me);

// Creates (the first member) or maps (the others) one segment per host,
// named with a random nonce published through the side channel, unlinks it
// once every member has mapped it, and builds the group of this host's
// ranks. members: the job ranks on this host, ascending, including this
// one. Collective over the whole job (every rank calls it, each with its own
// host's members). conns carries the control connections (liveness) and the
// failure state. A host with one rank gets no segment (nullptr).
std::shared_ptr<Group> make_shm_group(const Config& cfg, SideChannel& sc,
                                      const Connections& conns,
                                      const std::vector<int>& members);

}  // namespace jaccl::detail
