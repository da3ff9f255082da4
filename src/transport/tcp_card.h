// Copyright 2026 the jaccl authors.
// The TCP card: what a peer needs to reach this rank, published once through
// the side channel (binary, variable length) and validated on arrival.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "bootstrap/side_channel.h"
#include "common/affinity.h"

namespace jaccl::detail {

// Text that many cards hold alike (the host identity: every rank of a host
// has the same hostname, boot id and namespaces): one reference-counted
// copy. A rank keeps every rank's card, and at a thousand ranks a string
// per field and card was most of the fresh memory that decoding them
// faulted in (BENCHMARKS.md, History).
class SharedText {
 public:
  SharedText() = default;
  SharedText(std::string s)  // NOLINT: implicit, as a std::string field was
      : p_(s.empty() ? nullptr
                     : std::make_shared<const std::string>(std::move(s))) {}
  SharedText(const char* s) : SharedText(std::string(s)) {}  // NOLINT
  const std::string& str() const { return p_ != nullptr ? *p_ : empty_; }
  operator const std::string&() const { return str(); }  // NOLINT
  bool empty() const { return p_ == nullptr; }
  // This text if it reads `v` (sharing the copy), else a new copy of v.
  SharedText shared_or_new(std::string_view v) const {
    return str() == v ? *this : SharedText(std::string(v));
  }
  friend bool operator==(const SharedText& a, const SharedText& b) {
    return a.p_ == b.p_ || a.str() == b.str();
  }
  friend bool operator==(const SharedText& a, const std::string& b) {
    return a.str() == b;
  }

 private:
  std::shared_ptr<const std::string> p_;
  static inline const std::string empty_;
};

// A list of texts that many cards hold alike (a host's ranks listen on the
// same addresses; most have no ofi endpoint): one reference-counted copy,
// as SharedText. A vector of strings a card was a heap block per card.
class SharedList {
 public:
  using List = std::vector<std::string>;
  SharedList() = default;
  SharedList(List v)  // NOLINT: implicit, as a std::vector field was
      : p_(v.empty() ? nullptr : std::make_shared<const List>(std::move(v))) {}
  SharedList(std::initializer_list<std::string> v) : SharedList(List(v)) {}
  explicit SharedList(std::shared_ptr<const List> p) : p_(std::move(p)) {}
  const List& list() const { return p_ != nullptr ? *p_ : empty_; }
  operator const List&() const { return list(); }  // NOLINT
  bool empty() const { return p_ == nullptr; }
  size_t size() const { return list().size(); }
  const std::string& front() const { return list().front(); }
  List::const_iterator begin() const { return list().begin(); }
  List::const_iterator end() const { return list().end(); }
  friend bool operator==(const SharedList& a, const SharedList& b) {
    return a.p_ == b.p_ || a.list() == b.list();
  }

 private:
  std::shared_ptr<const List> p_;
  static inline const List empty_;
};

struct TcpCard {
  int rank = -1;
  // Numeric addresses this rank listens on, best first; empty (and port 0)
  // when it does not listen (JACCL_LISTEN=0).
  SharedList addresses;
  uint16_t port = 0;
  int wires = 1;
  SharedText hostname;
  // For the shared-memory transport: same boot id and IPC namespace means
  // POSIX shared memory is shared. The network namespace tells whether a
  // loopback address is reachable.
  SharedText boot_id;
  SharedText ipc_ns;
  SharedText net_ns;
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
  SharedList ofi;

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
// `like`, when given, is a card decoded before (the previous rank's): its
// host identity is shared where this card's reads the same.
TcpCard decode_card(std::string_view bytes, int from, int me,
                    const TcpCard* like = nullptr);

// All-gathers the cards (rank order) and validates them: malformed cards and
// a wires count other than ours are errors naming the rank.
std::vector<TcpCard> exchange_cards(SideChannel& sc, const TcpCard& mine);

}  // namespace jaccl::detail
