// Copyright 2026 the jaccl authors.
// The Group over a network transport's links (transport/endpoint.h: TCP or
// libfabric), written once for every such transport.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "collectives/all_to_all.h"
#include "collectives/exchange.h"
#include "collectives/ring.h"

#include "jaccl/jaccl.h"
#include "transport/endpoint.h"

namespace jaccl::detail {

// Reductions and all_gather whose data per rank (n_bytes for all_sum/max/
// min, size * n_bytes for all_gather and sum_scatter) is at most
// mesh_max_bytes(size) go over the mesh (one direct exchange with every peer,
// local reduction in rank order); larger ones go around the ring
// (reduce-scatter + all-gather, both directions, pipelined, one thread per
// wire). cfg.prefer_ring() (JACCL_RING) sends every reduction and all_gather
// around the ring.
//
// With two ranks both paths move the same bytes and the mesh saves a step;
// with more ranks the mesh moves (size-1)/2 times more bytes per rank.
//
// Two ranks take the mesh up to 2 ring pieces (1 MiB): until a rank's half
// holds more than one piece the ring does not pipeline at all, and runs its
// two steps one after the other.
//
// all_gather is the exception: there the mesh moves exactly the ring's
// bytes (each rank's block to every peer), in one step, from one thread,
// with large blocks split over the wires. So all_gather takes the mesh at
// every size up to kMeshGatherMaxRanks ranks; above that the ring keeps
// each rank's concurrent flows to its two neighbours (not measured:
// loopback on two cores says nothing about incast on a real fabric).
// The measurements behind these switches: BENCHMARKS.md, History.
inline constexpr int kMeshGatherMaxRanks = 8;
#ifdef JACCL_MESH_MAX_BYTES  // build-time tuning knob, for measuring
constexpr size_t mesh_max_bytes(int) {
  return JACCL_MESH_MAX_BYTES;
}
#else
constexpr size_t mesh_max_bytes(int size) {
  return size <= 2 ? 2 * kRingPieceBytes : size_t(64) << 10;
}
#endif

// One collective at a time per group: calls from several threads are
// serialized by a mutex inside the group, in whatever order the threads
// arrive (so threads that need a particular order across ranks must order
// themselves). After the first failure (timeout, lost peer, protocol
// mismatch) every op rethrows that failure at once; usage errors (bad
// dtype, size or peer) are thrown before any byte moves and leave the
// group working.
//
// net.names maps members to job ranks when the group is a subset of the
// job (messages name job ranks). p2p_only: a group for send/recv only, in
// which some pairs have no wires (they talk through shared memory).
// backend_name() is "<net.transport>-mesh" / "-ring" ("tcp-mesh").
std::shared_ptr<Group> make_net_group(const Config& cfg, Network net,
                                      bool p2p_only = false);

// An exchange with some of a network group's peers at once (a2a::exchange;
// blocks name member indices), under one op deadline, with op headers of
// `kind` carrying n_bytes: the hierarchical group's cross-host all_to_all
// pairs over its send/recv-only group. Every pair must list each other.
// g must come from make_net_group.
void net_exchange(Group& g, OpKind kind, uint64_t n_bytes,
                  std::span<const a2a::Block> blocks);

}  // namespace jaccl::detail
