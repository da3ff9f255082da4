// Copyright 2026 the jaccl authors.
#include "transport/ofi_link.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <new>
#include <string>
#include <utility>

#include "common/bytes.h"
#include "common/copy.h"
#include "common/error.h"
#include "common/log.h"
#include "transport/failure.h"
#include "transport/interfaces.h"
#include "transport/ofi/ofi_fabric.h"
#include "transport/ofi/shm_lock_rescue.h"
#include "transport/ofi/shm_regions.h"

namespace jaccl::detail {

namespace {

// Payload bytes that travel in one message with their header.
constexpr size_t kInline = 8192;
constexpr size_t kStage = kMsgHeaderBytes + kInline;
// Longest sleep while a post waits for room (-FI_EAGAIN), and the safety
// net under a completion queue's wait fd.
constexpr int kEagainSleepMs = 1;
constexpr int kFdSleepMs = 1;

// One wire of this rank: an RDM endpoint on which every peer's link of
// that wire posts.
struct OfiWire {
  std::shared_ptr<ofi::Domain> domain;  // outlives the endpoint
  // shm only: frees the region locks a killed peer left held once the
  // group has failed (see shm_lock_rescue.h). Set by insert_peers, before
  // any link exists; apart from ep, which a failure resets, and outliving
  // it, since closing an endpoint may wait for such a lock too.
  std::shared_ptr<ofi::ShmLockRescue> rescue;
  std::unique_ptr<ofi::Endpoint> ep;
  // When a link of this wire last posted or made progress (OfiLink::may_post).
  Clock::time_point last_turn = Clock::now();
};

// A posted message's state, in Msg::priv.
struct Priv {
  ofi::Request req;           // the payload's own message
  bool staged = false;        // header (and small payload) in the staging
  bool stage_done = false;    // that staging message completed
  bool need_req = false;      // req carries (or will carry) the payload
  bool req_posted = false;    // req was posted
  bool inline_full = false;   // receive: the payload came with the header
  bool want_payload = false;  // receive: post the payload after accept()
};
static_assert(sizeof(Priv) <= sizeof(Msg{}.priv));
static_assert(alignof(Priv) <= 8);

Priv& priv(Msg& m) {
  return *std::launder(reinterpret_cast<Priv*>(m.priv));
}

class OfiLink final : public Link {
 public:
  // Tags name the group and the ordered pair, so messages of one pair never
  // match another's receive even where a provider ignores the source.
  OfiLink(std::shared_ptr<OfiWire> wire, std::shared_ptr<FailureState> state,
          int member, uint64_t tag, int rank, int peer)
      : wire_(std::move(wire)),
        state_(std::move(state)),
        member_(member),
        stag_(tag << 48 | uint64_t(rank) << 24 | uint64_t(peer)),
        rtag_(tag << 48 | uint64_t(peer) << 24 | uint64_t(rank)),
        rank_(rank),
        peer_(peer),
        s_stage_(kStage),
        r_stage_(kStage) {}

  void post_send(Msg& m) override {
    if (start(m)) {
      sends_.push(m);
      if (may_post()) {
        issue_sends();
      }
    }
  }

  void post_recv(Msg& m) override {
    if (start(m)) {
      recvs_.push(m);
      // Posted now, not at the next progress: a message that arrives before
      // its receive takes the provider's slower unexpected path.
      if (may_post()) {
        issue_recvs();
      }
    }
  }

  void accept(Msg& m) override {
    m.accepted = true;
    if (gate_ == &m) {
      gate_ = nullptr;
      if (priv(m).want_payload) {
        payload_ = &m;  // goes before every later receive
      }
    }
  }

  bool progress(const char* op) override {
    ofi::Endpoint& ep = endpoint(op);
    bool moved = false;
    try {
      moved = ep.progress() > 0;
    } catch (const Error& e) {
      // Some providers report a dead peer's messages as a plain I/O error
      // (shm: EIO), often before the control connection's EOF reaches the
      // liveness monitor: give its verdict (PeerLost naming the rank that
      // died, or the root cause it relayed) the same grace a PeerLost from
      // a data link gets, and report that instead when it comes.
      if (e.kind() == ErrorKind::Io && state_ && state_->await_verdict()) {
        state_->throw_if_failed();
      }
      throw;
    }
    if (!may_post()) {
      state_->throw_if_failed();
    }
    moved |= issue_sends();
    moved |= issue_recvs();
    moved |= reap_sends();
    moved |= reap_recvs();
    return moved;
  }

  void want(WaitSet& ws) override {
    if (idle() || !wire_->ep) {
      return;
    }
    if (eagain_) {
      ws.driven(kEagainSleepMs);
    }
    ofi::Endpoint& ep = *wire_->ep;
    if (ep.wait_fd() < 0) {
      ws.driven(kEagainSleepMs);
      return;
    }
    if (ws.spinning() && inline_only()) {
      // Arming the wait fd (fi_trywait) costs system calls (an epoll_wait
      // and a read of the CQ's signal per call: ~4 reads and 4 epoll_waits
      // per 8-byte all_sum over tcp;ofi_rxm): while a small op spins, just
      // read the completion queue again, as fi_pingpong does (faster for
      // small ops: BENCHMARKS.md, History). Large transfers keep arming it:
      // skipping it there measured level or slower.
      ws.driven(kFdSleepMs);
      return;
    }
    if (!ep.try_wait()) {
      ws.ready_now();
      return;
    }
    ws.add_fd(ep.wait_fd(), true, false);
    ws.driven(kFdSleepMs);
  }

  void flush_headers() override {
    try {
      if (wire_->ep) {
        issue_sends();
        wire_->ep->progress();
      }
    } catch (...) {
      // Best effort: the failure being reported matters more.
    }
  }

  void clear() override {
    const bool outstanding = s_owner_ != nullptr || r_owner_ != nullptr ||
                             any_open(fly_s_) || any_open(fly_r_) ||
                             payload_ != nullptr;
    sends_ = MsgQueue{};
    recvs_ = MsgQueue{};
    fly_s_.clear();
    fly_r_.clear();
    s_owner_ = r_owner_ = gate_ = payload_ = nullptr;
    eagain_ = false;
    if (outstanding && wire_->ep) {
      // Closing the endpoint cancels what is still posted (into user
      // memory, and our requests): the group has failed, nothing follows.
      JACCL_LOG(Debug, "rank " << rank_
                               << ": closing an ofi endpoint with operations "
                                  "outstanding after a failure");
      wire_->ep.reset();
    }
  }

 private:
  // Nothing new is posted on a failed group. Besides being pointless, a
  // receive posted after a peer's connection closed may match that peer's
  // unexpected rendezvous message, and libfabric 1.17's rxm then reads
  // through the closed connection's null endpoint (SIGSEGV). A rank that
  // was stopped, woken after the others left it out, would post before its
  // monitor read the DEAD that says so: after a pause of a heartbeat period
  // it first has the monitor read what came meanwhile.
  bool may_post() {
    if (!state_) {
      return true;
    }
    const auto now = Clock::now();
    const auto pause = std::chrono::duration_cast<Millis>(
        now - std::exchange(wire_->last_turn, now));
    if (pause >= state_->stall_limit()) {
      state_->catch_up();
    }
    return !state_->failed();
  }

  // Resets m's state; false when there is nothing to move.
  static bool start(Msg& m) {
    new (m.priv) Priv();
    if (m.hdr == nullptr && m.len == 0) {
      m.done = true;
      return false;
    }
    return true;
  }

  static bool any_open(const std::vector<Msg*>& v) {
    return std::any_of(v.begin(), v.end(), [](Msg* m) { return !m->done; });
  }

  // Whether every message this link is moving fits its header's message.
  bool inline_only() const {
    auto small = [](const Msg* m) { return m->len <= kInline; };
    for (const Msg* m = sends_.head; m != nullptr; m = m->next) {
      if (!small(m))
        return false;
    }
    for (const Msg* m = recvs_.head; m != nullptr; m = m->next) {
      if (!small(m))
        return false;
    }
    return payload_ == nullptr &&
           std::all_of(fly_s_.begin(), fly_s_.end(), small) &&
           std::all_of(fly_r_.begin(), fly_r_.end(), small);
  }

  bool idle() const {
    return sends_.empty() && recvs_.empty() && fly_s_.empty() &&
           fly_r_.empty() && payload_ == nullptr;
  }

  ofi::Endpoint& endpoint(const char* op) const {
    if (!wire_->ep) {
      raise(ErrorKind::Io,
            std::string("ofi endpoint closed after an earlier failure (") + op +
                ")",
            {.rank = rank_, .peer = peer_});
    }
    return *wire_->ep;
  }

  bool issue_sends() {
    bool any = false;
    ofi::Endpoint& ep = *wire_->ep;
    while (Msg* m = sends_.head) {
      Priv& p = priv(*m);
      if (m->hdr != nullptr && !p.staged) {
        if (s_owner_ != nullptr) {
          break;  // staging busy
        }
        const bool small = m->len <= kInline;
        std::memcpy(s_stage_.data(), m->hdr, kMsgHeaderBytes);
        if (small)
          copy_bytes(s_stage_.data() + kMsgHeaderBytes, m->buf, m->len);
        s_req_ = ofi::Request{};
        if (!ep.post_send(member_, stag_, s_stage_.data(),
                          kMsgHeaderBytes + (small ? m->len : 0), s_req_)) {
          eagain_ = true;
          break;
        }
        p.staged = true;
        s_owner_ = m;
        p.need_req = !small;
        any = true;
      } else if (m->hdr == nullptr) {
        p.need_req = true;
      }
      if (p.need_req && !p.req_posted) {
        if (!ep.post_send(member_, stag_, m->buf, m->len, p.req)) {
          eagain_ = true;
          break;
        }
        p.req_posted = true;
        any = true;
      }
      sends_.pop();
      fly_s_.push_back(m);
      eagain_ = false;
    }
    return any;
  }

  bool issue_recvs() {
    bool any = false;
    ofi::Endpoint& ep = *wire_->ep;
    if (payload_ != nullptr) {
      Priv& p = priv(*payload_);
      if (!ep.post_recv(member_, rtag_, payload_->buf, payload_->len, p.req)) {
        eagain_ = true;
        return any;
      }
      p.req_posted = true;
      payload_ = nullptr;
      any = true;
    }
    while (Msg* m = recvs_.head) {
      if (gate_ != nullptr) {
        break;  // later receives wait until the header is accepted
      }
      Priv& p = priv(*m);
      if (m->hdr != nullptr) {
        if (r_owner_ != nullptr) {
          break;
        }
        r_req_ = ofi::Request{};
        if (!ep.post_recv(member_, rtag_, r_stage_.data(), kStage, r_req_)) {
          eagain_ = true;
          break;
        }
        p.staged = true;
        r_owner_ = gate_ = m;
      } else {
        if (!ep.post_recv(member_, rtag_, m->buf, m->len, p.req)) {
          eagain_ = true;
          break;
        }
        p.need_req = p.req_posted = true;
      }
      recvs_.pop();
      fly_r_.push_back(m);
      eagain_ = false;
      any = true;
    }
    return any;
  }

  bool reap_sends() {
    bool any = false;
    if (s_owner_ != nullptr && s_req_.done) {
      priv(*s_owner_).stage_done = true;
      s_owner_ = nullptr;
      any = true;
    }
    std::erase_if(fly_s_, [&](Msg* m) {
      const Priv& p = priv(*m);
      if ((p.staged && !p.stage_done) || (p.need_req && !p.req.done)) {
        return false;
      }
      m->moved = m->len;
      m->done = true;
      any = true;
      return true;
    });
    return any;
  }

  bool reap_recvs() {
    bool any = false;
    if (r_owner_ != nullptr && r_req_.done) {
      Msg& m = *r_owner_;
      Priv& p = priv(m);
      const size_t got = r_req_.bytes;
      if (got >= kMsgHeaderBytes) {
        std::memcpy(m.hdr, r_stage_.data(), kMsgHeaderBytes);
      } else {
        std::memset(m.hdr, 0, kMsgHeaderBytes);  // reported as garbage
      }
      const size_t extra = got > kMsgHeaderBytes ? got - kMsgHeaderBytes : 0;
      const size_t k = std::min(extra, m.len);
      copy_bytes(m.buf, r_stage_.data() + kMsgHeaderBytes, k);
      m.moved = k;
      p.inline_full = extra == m.len;
      p.want_payload = extra == 0 && m.len > 0;
      p.need_req = p.want_payload;
      p.stage_done = true;
      m.hdr_in = true;
      r_owner_ = nullptr;
      if (m.accepted && gate_ == nullptr && p.want_payload) {
        payload_ = &m;
      }
      any = true;
    }
    std::erase_if(fly_r_, [&](Msg* m) {
      const Priv& p = priv(*m);
      if ((p.staged && !p.stage_done) ||
          (p.staged && !p.inline_full && !(p.req_posted && p.req.done)) ||
          (!p.staged && !p.req.done)) {
        return false;
      }
      if (p.req_posted) {
        m->moved = m->len;
      }
      m->done = true;
      any = true;
      return true;
    });
    return any;
  }

  std::shared_ptr<OfiWire> wire_;
  std::shared_ptr<FailureState> state_;  // the group's, for the verdict
  int member_;
  uint64_t stag_;
  uint64_t rtag_;
  int rank_;
  int peer_;
  MsgQueue sends_, recvs_;           // posted, not yet issued
  std::vector<Msg*> fly_s_, fly_r_;  // issued, not yet done
  std::vector<char> s_stage_, r_stage_;
  ofi::Request s_req_, r_req_;  // the staging messages
  Msg* s_owner_ = nullptr;      // the message in the send staging
  Msg* r_owner_ = nullptr;      // the message in the receive staging
  Msg* gate_ = nullptr;         // a header not yet accepted
  Msg* payload_ = nullptr;      // accepted, its payload still to post
  bool eagain_ = false;
};

std::string from_hex(const std::string& s, int from, int me) {
  auto nib = [&](char c) -> int {
    if (c >= '0' && c <= '9') {
      return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
      return c - 'a' + 10;
    }
    raise(ErrorKind::Protocol,
          rank_ref(from) + " published a malformed ofi card",
          {.rank = me, .peer = from});
  };
  if (s.size() % 2 != 0) {
    nib('?');
  }
  std::string out(s.size() / 2, '\0');
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = static_cast<char>(nib(s[2 * i]) * 16 + nib(s[2 * i + 1]));
  }
  return out;
}

}  // namespace

struct OfiNet::Impl {
  int rank = -1;
  std::shared_ptr<ofi::Domain> domain;
  std::vector<std::shared_ptr<OfiWire>> wires;
};

OfiNet::OfiNet(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
OfiNet::~OfiNet() = default;

std::string ofi_domain_for(const Config& cfg, int rank) {
  const auto& m = cfg.get_devices();
  if (rank < 0 || static_cast<size_t>(rank) >= m.size()) {
    return "";
  }
  std::string first;
  bool several = false;
  for (const auto& cell : m[static_cast<size_t>(rank)]) {
    for (const auto& name : cell) {
      if (name.empty()) {
        continue;
      }
      if (first.empty()) {
        first = name;
      } else if (name != first) {
        several = true;
      }
    }
  }
  if (several) {
    JACCL_LOG(Info, "rank " << rank << ": JACCL_IBV_DEVICES names several "
                            << "devices for this rank; the ofi transport uses "
                            << first << " toward every peer");
  }
  return first;
}

int ofi_wires(const Config& cfg) {
  return cfg.get_wires_set() ? cfg.get_wires() : 1;
}

std::shared_ptr<OfiNet> OfiNet::open(const Config& cfg) {
  ofi::Options o;
  o.rank = cfg.get_rank();
  o.provider = cfg.get_ofi_provider();
  o.domain = ofi_domain_for(cfg, o.rank);
  // libfabric's tcp providers name their domains after interfaces and, left
  // alone, take the first one (often not the one the job uses): follow the
  // interface the control connections use (JACCL_IFNAME, else the route
  // toward the coordinator, else loopback).
  if (o.domain.empty() && o.provider.rfind("tcp", 0) == 0) {
    o.domain = interface_of_ipv4(choose_listen_address(cfg).host);
  }
  o.force_register = cfg.get_ofi_force_register();
  o.timeout = cfg.get_timeout();
  auto impl = std::make_unique<Impl>();
  impl->rank = o.rank;
  impl->domain = ofi::Domain::open(o);
  for (int w = 0; w < ofi_wires(cfg); ++w) {
    auto wire = std::make_shared<OfiWire>();
    wire->domain = impl->domain;
    wire->ep = impl->domain->make_endpoint();
    impl->wires.push_back(std::move(wire));
  }
  JACCL_LOG(
      Info,
      "rank " << o.rank << ": ofi provider " << impl->domain->provider()
              << ", fabric " << impl->domain->fabric() << ", domain "
              << impl->domain->domain() << ", " << impl->wires.size()
              << " endpoint(s)"
              << (impl->domain->registers() ? ", registering buffers" : ""));
  return std::shared_ptr<OfiNet>(new OfiNet(std::move(impl)));
}

std::vector<std::string> OfiNet::card() const {
  std::vector<std::string> out;
  for (const auto& w : impl_->wires) {
    const std::string bytes = w->ep->card().encode();
    out.push_back(
        to_hex(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
  }
  return out;
}

std::string OfiNet::provider() const {
  return impl_->domain->provider();
}

std::string OfiNet::domain() const {
  return impl_->domain->domain();
}

void OfiNet::insert_peers(const std::vector<std::vector<std::string>>& cards) {
  const int me = impl_->rank;
  for (size_t w = 0; w < impl_->wires.size(); ++w) {
    std::vector<ofi::Card> per_rank(cards.size());
    for (size_t r = 0; r < cards.size(); ++r) {
      const int from = static_cast<int>(r);
      if (from == me) {
        per_rank[r] = impl_->wires[w]->ep->card();
        continue;
      }
      if (cards[r].size() != impl_->wires.size()) {
        raise(ErrorKind::Config,
              rank_ref(from) + " published " + std::to_string(cards[r].size()) +
                  " ofi endpoints but this rank has " +
                  std::to_string(impl_->wires.size()) +
                  (cards[r].empty() ? " (it did not open the ofi transport)"
                                    : " (JACCL_WIRES differs?)"),
              {.rank = me, .peer = from});
      }
      per_rank[r] =
          ofi::Card::decode(from_hex(cards[r][w], from, me), from, me);
    }
    impl_->wires[w]->ep->insert_peers(per_rank, {});
    if (provider() == "shm" && ofi::shm_lock_rescue_enabled()) {
      std::vector<std::string> regions;
      for (const ofi::Card& c : per_rank) {
        std::string name = ofi::shm_region_of_address(c.address);
        if (!name.empty()) {
          regions.push_back(std::move(name));
        }
      }
      impl_->wires[w]->rescue =
          std::make_shared<ofi::ShmLockRescue>(me, regions);
    }
  }
}

Network OfiNet::make_network(const ControlBlock& control,
                             std::vector<int> members,
                             const std::vector<char>& peers, int wires,
                             int tag) {
  Network net;
  const int me = impl_->rank;
  const size_t n = members.empty() ? peers.size() : members.size();
  net.size = static_cast<int>(n);
  net.rank = me;
  if (!members.empty()) {
    net.rank = static_cast<int>(std::find(members.begin(), members.end(), me) -
                                members.begin());
  }
  net.op_timeout = control.op_timeout;
  net.state = control.state;
  net.transport = "ofi(" + provider() + ")";
  net.local_send_completion = false;
  net.links.resize(n);
  for (size_t p = 0; p < n; ++p) {
    const int job = members.empty() ? static_cast<int>(p) : members[p];
    if (job == me || !peers[p]) {
      continue;
    }
    const int use = std::min<int>(wires, static_cast<int>(impl_->wires.size()));
    for (int w = 0; w < use; ++w) {
      net.links[p].push_back(std::make_unique<OfiLink>(
          impl_->wires[static_cast<size_t>(w)], control.state, job,
          static_cast<uint64_t>(tag), me, job));
    }
  }
  for (const auto& wire : impl_->wires) {
    if (wire->rescue) {
      // weak: the hook lives as long as the failure state, the wire no
      // longer than the group.
      control.state->on_abort(
          [rescue = std::weak_ptr<ofi::ShmLockRescue>(wire->rescue)] {
            if (auto r = rescue.lock()) {
              r->arm();
            }
          });
    }
  }
  net.names = std::move(members);
  net.keepalive = control.keepalive;  // the links keep their endpoints
  return net;
}

}  // namespace jaccl::detail
