// Copyright 2026 the jaccl authors.
// The shared-memory transport: which peers share this host, and the
// set-up of a host's segment, from which each of its ranks gets its
// channel (transport/shm_channel.h).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "bootstrap/side_channel.h"
#include "jaccl/jaccl.h"
#include "transport/control_block.h"
#include "transport/shm_channel.h"
#include "transport/tcp_card.h"

namespace jaccl::detail {

// Peers are local when they share the kernel boot id AND the IPC namespace:
// two containers on one host with separate IPC namespaces cannot share POSIX
// shared memory, so they are not local. Returns the first rank that is not
// local to `me`, or -1.
int first_nonlocal(const std::vector<TcpCard>& cards, int me);

// What the creator writes into a fresh segment's header for every rank of
// its host: the group's policy, opaque here (ShmChannel::init_segment).
struct ShmHeaderInit {
  uint32_t strategy = 0;
  uint64_t chunk_bytes = 0;
};

// Creates (the first member) or maps (the others) one segment per host,
// sized by cfg's shared-memory budget, named with a random nonce published
// through the side channel, unlinks it once every member has mapped it,
// and returns this rank's channel over it. members: the job ranks on this
// host, ascending, including this one. Collective over the whole job
// (every rank calls it, each with its own host's members); a failure on any
// rank (cfg.shm_invalid_reason() among them) fails every rank. conns
// carries the control connections (liveness) and the failure state. A
// host with one rank gets no segment (nullopt).
std::optional<ShmChannel> setup_shm(const Config& cfg, SideChannel& sc,
                                    const ControlBlock& conns,
                                    const std::vector<int>& members,
                                    const ShmHeaderInit& init);

}  // namespace jaccl::detail
