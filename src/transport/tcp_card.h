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

// A value that many cards hold alike, one reference-counted copy (empty:
// no copy at all). A rank keeps every rank's card, and at a thousand ranks a
// string or vector per field and card was most of the fresh memory that
// decoding them faulted in (BENCHMARKS.md, History).
template <class T>
class SharedConst {
 public:
  SharedConst() = default;
  SharedConst(T v)  // NOLINT: implicit, as a field of type T was
      : p_(v.empty() ? nullptr : std::make_shared<const T>(std::move(v))) {}
  const T& get() const { return p_ != nullptr ? *p_ : empty_; }
  operator const T&() const { return get(); }  // NOLINT
  bool empty() const { return p_ == nullptr; }
  friend bool operator==(const SharedConst& a, const SharedConst& b) {
    return a.p_ == b.p_ || a.get() == b.get();
  }
  friend bool operator==(const SharedConst& a, const T& b) {
    return a.get() == b;
  }

 private:
  std::shared_ptr<const T> p_;
  static inline const T empty_{};
};

// The host identity's texts (every rank of a host has the same hostname,
// boot id and namespaces).
class SharedText : public SharedConst<std::string> {
 public:
  using SharedConst::SharedConst;
  SharedText(const char* s) : SharedConst(std::string(s)) {}  // NOLINT
  const std::string& str() const { return get(); }
  // This text if it reads `v` (sharing the copy), else a new copy of v.
  SharedText shared_or_new(std::string_view v) const {
    return str() == v ? *this : SharedText(std::string(v));
  }
};

// Lists of texts (a host's ranks listen on the same addresses; most have no
// ofi endpoint).
class SharedList : public SharedConst<std::vector<std::string>> {
 public:
  using List = std::vector<std::string>;
  using SharedConst::SharedConst;
  SharedList(std::initializer_list<std::string> v) : SharedConst(List(v)) {}
  const List& list() const { return get(); }
  size_t size() const { return list().size(); }
  const std::string& front() const { return list().front(); }
  List::const_iterator begin() const { return list().begin(); }
  List::const_iterator end() const { return list().end(); }
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
