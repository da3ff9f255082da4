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
// Measured with threads as ranks over loopback TCP, 2 wires, on a 2-core
// box (all_sum of float32, mean of >= 5 iterations; loopback numbers are
// noisy, +-30%):
//   2 ranks:  64 KiB mesh  95 us, ring  96 us;  256 KiB mesh 273 us, ring
//             346 us;  1 MiB mesh 1954 us, ring 1094 us.
//   3 ranks:  16 KiB mesh 154 us, ring 286 us;  64 KiB mesh 278 us, ring
//             263 us;  256 KiB mesh 1539 us, ring 280 us.
// With two ranks both paths move the same bytes and the mesh saves a step;
// with more ranks the mesh moves (size-1)/2 times more bytes per rank.
// Above ~4 MiB both paths hit the same loopback ceiling on that box
// (~400-500 MB/s bus bandwidth).
//
// Two ranks take the mesh up to 2 ring pieces (1 MiB): until a rank's half
// holds more than one piece the ring does not pipeline at all, and runs its
// two steps one after the other. Measured on the 2026-12-02 VM (AMD EPYC,
// 2 vCPUs, L2 1 MiB; same-host send buffers; 2 ranks, 4 alternating runs,
// busbw GB/s): 1 MiB mesh 4.0-4.5, ring 2.1-2.9 (Open MPI-TCP 2.1-3.2);
// 2 MiB level (mesh 2.1-3.0, ring 1.9-2.8); 4 MiB ring ahead (1.5-3.4
// against 1.7-2.0), so the ring keeps what is larger.
//
// all_gather is the exception: there the mesh moves exactly the ring's
// bytes (each rank's block to every peer), in one step, from one thread,
// with large blocks split over the wires. Measured on the 2026-12-01 VM
// (loopback, 2 wires, busbw GB/s, 2 alternating runs, load 3.5-4.6):
// 2 ranks 1 MiB ring 1.05 mesh 1.87 (Open MPI-TCP 1.87), 4 MiB 0.91 /
// 1.45 (1.85); 4 ranks 256 KiB 0.34 / 0.51 (0.20), 4 MiB 0.65 / 0.72
// (0.36). So all_gather takes the mesh at every size up to
// kMeshGatherMaxRanks ranks; above that the ring keeps each rank's
// concurrent flows to its two neighbours (not measured: loopback on two
// cores says nothing about incast on a real fabric).
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
