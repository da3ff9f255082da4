// Copyright 2026 the jaccl authors.
// libfabric under jaccl's `ofi` transport: choosing and opening a provider,
// the card a rank publishes through the side channel, reliable tagged
// messages to peers over FI_EP_RDM, memory registration as the provider's
// mr_mode demands, and completion progress. This is the only place that
// knows libfabric: its headers stay in the .cpp files, so the endpoint
// adapter above it and the collectives never see them.
//
// Contract (what the transport-neutral endpoint layer relies on):
// - Messages from one Endpoint to one peer Endpoint with the same tag are
//   matched in post order (FI_ORDER_SAS and tag matching); a recv names the
//   peer (directed receive) and the exact tag.
// - A post never blocks: -FI_EAGAIN is reported as `false` and the caller
//   progresses and posts again (measured: the first send over tcp;ofi_rxm
//   returns it while the connection forms).
// - Every failure is a jaccl::Error through detail::raise(): ConfigError for
//   a provider/domain that does not exist or cards that do not match (names
//   both ranks and what differs), PeerLostError / IoError for completion
//   errors (names the peer and fi_strerror).
// - An Endpoint is used by one thread at a time (the ring runs one thread
//   per wire, each with its own Endpoint); a Domain is shared.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/deadline.h"

namespace jaccl::detail::ofi {

// False when this build has no libfabric; then open() throws a ConfigError
// saying to install libfabric-dev and reconfigure.
bool built();

struct Options {
  int rank = -1;         // job rank, for messages
  std::string provider;  // JACCL_OFI_PROVIDER, e.g. "tcp;ofi_rxm"; "": best
  std::string domain;    // "" = the provider's first; else a domain name
                         // (verbs: the ibverbs device, e.g. mlx5_0)
  // Test knob: register every buffer even when the provider's mr_mode does
  // not require it, so the path verbs and efa need runs on tcp and shm.
  bool force_register = false;
  Millis timeout{60000};  // set-up deadline (address vector, first contact)
};

// Providers fi_getinfo returns for reliable tagged RDM on this machine, as
// "name" (layered ones as "tcp;ofi_rxm"), best first.
std::vector<std::string> available_providers();
// The first provider present and usable that drives RDMA hardware (verbs,
// efa, psm2, psm3, cxi, opx), or "" (auto falls back to TCP then).
std::string hardware_provider();
// The provider offering a domain of this name (a hardware provider's first),
// or ""; `listing` gets every provider with its domains, for messages.
std::string provider_with_domain(const std::string& domain,
                                 std::string* listing);

// What a peer needs to reach one endpoint: published in the rank's card.
struct Card {
  std::string provider;  // as fi_info reports it, e.g. "tcp;ofi_rxm"
  std::string fabric;
  std::string domain;
  std::vector<uint8_t> address;  // fi_getname
  std::string encode() const;
  // ProtocolError naming `from` when the bytes are not a card.
  static Card decode(std::string_view bytes, int from, int me);
};

// A completion the caller owns; it must stay in place until done.
struct Request {
  bool done = false;
  size_t bytes = 0;  // bytes received (recv) or sent (send)
  int peer = -1;     // member index given to the post
  // libfabric's per-operation context (fi_context2) lives here so a post
  // allocates nothing.
  alignas(8) unsigned char ctx[64] = {};
  // The endpoint's own bookkeeping for this operation (the bounce slot or
  // registration it used, the user buffer a bounced recv is copied to);
  // callers leave it alone.
  void* user_buf = nullptr;
  void* mr = nullptr;
  int32_t slot = -1;
};

class Domain;

// One RDM endpoint with its completion queue and address vector.
class Endpoint {
 public:
  virtual ~Endpoint() = default;
  virtual Card card() const = 0;
  // cards[i] is member i's card (own slot ignored); names[i] its job rank
  // for messages (empty: member i is rank i). A card whose provider or
  // fabric differs from ours is a ConfigError naming both ranks and both
  // values.
  virtual void insert_peers(const std::vector<Card>& cards,
                            const std::vector<int>& names) = 0;
  // Non-blocking; false: -FI_EAGAIN, progress() and post again.
  virtual bool post_send(int peer, uint64_t tag, const void* buf, size_t len,
                         Request& r) = 0;
  virtual bool post_recv(int peer, uint64_t tag, void* buf, size_t len,
                         Request& r) = 0;
  // Reads the completion queue, marking requests done; returns how many
  // completed. A completion error throws naming the peer and fi_strerror.
  virtual int progress() = 0;
  // A file descriptor that becomes readable when completions may be
  // pending (the CQ's FI_WAIT_FD), or -1: then the caller polls progress()
  // with short sleeps.
  virtual int wait_fd() const = 0;
  // Before blocking on wait_fd(): false when completions are already
  // pending (fi_trywait), so the caller must progress() instead of sleeping.
  virtual bool try_wait() = 0;
};

// Fabric + domain (+ the memory-registration cache), shared by the rank's
// endpoints.
class Domain {
 public:
  virtual ~Domain() = default;
  // ConfigError when the provider (or domain) does not exist or cannot be
  // used, naming it and listing what fi_getinfo did return.
  static std::shared_ptr<Domain> open(const Options& opts);
  virtual std::string provider() const = 0;  // e.g. "tcp;ofi_rxm"
  virtual std::string fabric() const = 0;
  virtual std::string domain() const = 0;
  // Whether buffers are registered (mr_mode requires it, or the test knob).
  virtual bool registers() const = 0;
  virtual std::unique_ptr<Endpoint> make_endpoint() = 0;
};

}  // namespace jaccl::detail::ofi
