// Copyright 2026 the jaccl authors.
// The libfabric implementation of the endpoint interface
// (transport/endpoint.h) over ofi::Endpoint (transport/ofi/ofi_fabric.h),
// and the ofi network: one RDM endpoint per wire, every job rank in each
// endpoint's address vector, a Link per (peer, wire) that posts tagged
// messages to that peer on that endpoint.
//
// Messages: a payload is one tagged message. A header travels with a small
// payload in one message (copied through the link's staging buffer, which
// providers inject), or alone ahead of a large one. A receive with a header
// lands in the staging buffer (room for the header and a small payload);
// the link's later receives wait until the header is accepted, so a peer
// that sent something else is reported by the header check (ProtocolError)
// rather than by a truncation.
//
// Progress: the endpoint's completion queue, read by the thread that runs
// the link (the ring's threads each have their own wire's endpoint). The
// wait set sleeps on the CQ's wait fd after fi_trywait (or polls with short
// sleeps when there is none), bounded by the op deadline and woken by the
// group's failure. After a failure the wire's endpoint is closed, which
// cancels whatever was still posted into user memory.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "jaccl/jaccl.h"
#include "transport/control_block.h"
#include "transport/endpoint.h"

namespace jaccl::detail {

// This rank's libfabric domain and endpoints, opened before the cards are
// exchanged (their names go into the card).
class OfiNet {
 public:
  // Options from the config: provider (JACCL_OFI_PROVIDER), domain (this
  // rank's JACCL_IBV_DEVICES row), force_register (JACCL_OFI_FORCE_REGISTER).
  // One endpoint per wire. ConfigError naming the provider or domain when
  // it cannot be used, or saying to install libfabric-dev when not built.
  static std::shared_ptr<OfiNet> open(const Config& cfg);
  ~OfiNet();

  // The endpoints' cards, hex, for TcpCard::ofi.
  std::vector<std::string> card() const;
  // "tcp;ofi_rxm" (as the provider reports it).
  std::string provider() const;
  std::string domain() const;
  // Inserts every rank's endpoints (cards[r] = rank r's TcpCard::ofi; a
  // rank that published none is left out). ConfigError when a rank's
  // provider or fabric differs (naming both) or its card is malformed.
  void insert_peers(const std::vector<std::vector<std::string>>& cards);

  // The network of a group whose member i is job rank members[i] (empty:
  // member i is rank i), with `wires` wires toward each of `peers`
  // (members; others get no link). tag separates groups sharing the
  // endpoints. control carries the failure state and liveness.
  Network make_network(const ControlBlock& control, std::vector<int> members,
                       const std::vector<char>& peers, int wires, int tag);

  struct Impl;

 private:
  explicit OfiNet(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Wires (endpoints) per rank over ofi: JACCL_WIRES / set_wires when given,
// else 1. Every wire of a rank opens its endpoint on the same domain (one
// NIC, or the host's memory for shm), so more wires add no hardware, only
// threads driving a software provider's progress, which one wire did
// faster (BENCHMARKS.md, History).
int ofi_wires(const Config& cfg);

// The domain name JACCL_IBV_DEVICES gives rank `rank` ("" when the matrix
// is absent or its row names no device): the first device of the row; a
// row naming several different devices uses the first (logged at info).
std::string ofi_domain_for(const Config& cfg, int rank);

}  // namespace jaccl::detail
