// Copyright 2026 the jaccl authors.
// One FI_EP_RDM endpoint: its completion queue (FI_WAIT_FD when the provider
// has it), its address vector of peers, tagged posts with directed receive,
// and completion progress that turns CQ errors into jaccl errors naming the
// peer.
#include "transport/ofi/ofi_endpoint.h"

#if JACCL_HAVE_OFI

#include <strings.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/random.h"
#include "transport/ofi/ofi_mr.h"
#include "transport/ofi/shm_regions.h"

namespace jaccl::detail::ofi {
namespace {

Request* request_of(void* ctx) {
  return reinterpret_cast<Request*>(static_cast<unsigned char*>(ctx) -
                                    offsetof(Request, ctx));
}

bool peer_gone(int err) {
  switch (err) {
    case FI_ECONNREFUSED:
    case FI_ECONNRESET:
    case FI_ECONNABORTED:
    case FI_ENOTCONN:
    case FI_EHOSTUNREACH:
    case EPIPE:
    case FI_ESHUTDOWN:
      return true;
    default:
      return false;
  }
}

class EndpointImpl final : public Endpoint {
 public:
  explicit EndpointImpl(std::shared_ptr<DomainState> d) : d_(std::move(d)) {
    const fi_info* info = d_->info.get();
    check(fi_endpoint(d_->domain, d_->info.get(), &ep_, nullptr),
          "fi_endpoint");
    fi_cq_attr cq{};
    cq.format = FI_CQ_FORMAT_TAGGED;
    cq.wait_obj = FI_WAIT_FD;
    if (fi_cq_open(d_->domain, &cq, &cq_, nullptr) != 0) {
      cq_ = nullptr;
      cq.wait_obj = FI_WAIT_NONE;
      check(fi_cq_open(d_->domain, &cq, &cq_, nullptr), "fi_cq_open");
    } else if (fi_control(&cq_->fid, FI_GETWAIT, &wait_fd_) != 0) {
      wait_fd_ = -1;
    }
    fi_av_attr av{};
    av.type = info->domain_attr->av_type;
    check(fi_av_open(d_->domain, &av, &av_, nullptr), "fi_av_open");
    check(fi_ep_bind(ep_, &av_->fid, 0), "fi_ep_bind(av)");
    check(fi_ep_bind(ep_, &cq_->fid, FI_TRANSMIT | FI_RECV), "fi_ep_bind(cq)");
    name_shm_region(info);
    check(fi_enable(ep_), "fi_enable");
    std::vector<uint8_t> name(256);
    size_t len = name.size();
    int rc = fi_getname(&ep_->fid, name.data(), &len);
    if (rc == -FI_ETOOSMALL) {
      name.resize(len);
      rc = fi_getname(&ep_->fid, name.data(), &len);
    }
    check(rc, "fi_getname");
    name.resize(len);
    card_.provider = info->fabric_attr->prov_name;
    card_.fabric = info->fabric_attr->name;
    card_.domain = info->domain_attr->name;
    card_.address = std::move(name);
    // Injected sends need no registration, even under FI_MR_LOCAL.
    inject_ = info->tx_attr->inject_size;
    // Posting past the queue sizes is -FI_EAGAIN on some providers and
    // -FI_ENOMEM on others (shm's receive queue): count what is posted and
    // say `false` before the provider has to.
    tx_limit_ = info->tx_attr->size > 0 ? info->tx_attr->size : SIZE_MAX;
    rx_limit_ = info->rx_attr->size > 0 ? info->rx_attr->size : SIZE_MAX;
    try {
      reg_ = std::make_unique<Registrar>(*d_, ep_);
    } catch (...) {
      close();
      throw;
    }
  }

  ~EndpointImpl() override { close(); }

  // shm names an endpoint's region "<pid>:<uid>:<n>". A region left by a
  // killed process whose pid is later reused (or by any job's pid 1 in a pid
  // namespace) makes fi_enable fail with EBUSY, because libfabric sees its
  // "owner" alive. A random part makes the name unique to this endpoint; the
  // "<pid>:" prefix keeps it recognisable.
  void name_shm_region(const fi_info* info) {
    if (std::strcmp(info->fabric_attr->prov_name, "shm") != 0) {
      return;
    }
    uint64_t nonce = 0;
    random_bytes(&nonce, sizeof nonce);
    const std::string name =
        kShmAddressPrefix +
        shm_region_name(static_cast<long>(::getpid()), nonce);
    check(
        fi_setname(&ep_->fid, const_cast<char*>(name.c_str()), name.size() + 1),
        "fi_setname");
  }

  Card card() const override { return card_; }

  void insert_peers(const std::vector<Card>& cards,
                    const std::vector<int>& names) override {
    int me_rank = d_->opts.rank;
    if (!names.empty() && names.size() != cards.size()) {
      raise(ErrorKind::Usage,
            "ofi insert_peers: " + std::to_string(cards.size()) +
                " cards but " + std::to_string(names.size()) + " names",
            {.rank = me_rank});
    }
    if (!addrs_.empty()) {
      raise(ErrorKind::Usage, "ofi insert_peers called twice",
            {.rank = me_rank});
    }
    names_.resize(cards.size());
    for (size_t i = 0; i < cards.size(); ++i) {
      names_[i] = names.empty() ? static_cast<int>(i) : names[i];
    }
    addrs_.assign(cards.size(), FI_ADDR_NOTAVAIL);
    for (size_t i = 0; i < cards.size(); ++i) {
      bool self = names_[i] == me_rank;
      const Card& c = self ? card_ : cards[i];
      if (!self &&
          (strcasecmp(c.provider.c_str(), card_.provider.c_str()) != 0 ||
           c.fabric != card_.fabric)) {
        raise(ErrorKind::Config,
              "ranks use different ofi providers or fabrics: " +
                  rank_ref(me_rank) + " uses provider '" + card_.provider +
                  "' on fabric '" + card_.fabric + "', " + rank_ref(names_[i]) +
                  " uses provider '" + c.provider + "' on fabric '" + c.fabric +
                  "' (set the same JACCL_OFI_PROVIDER everywhere)",
              {.rank = me_rank, .peer = names_[i]});
      }
      fi_addr_t a = FI_ADDR_NOTAVAIL;
      int n = fi_av_insert(av_, c.address.data(), 1, &a, 0, nullptr);
      if (n != 1 && !self) {
        raise(ErrorKind::Config,
              "provider " + card_.provider + " rejected the " +
                  std::to_string(c.address.size()) + "-byte ofi address of " +
                  rank_ref(names_[i]) +
                  (n < 0 ? ": " + fi_text(n) : std::string()),
              {.rank = me_rank, .peer = names_[i]});
      }
      addrs_[i] = n == 1 ? a : FI_ADDR_NOTAVAIL;
    }
  }

  bool post_send(int peer, uint64_t tag, const void* buf, size_t len,
                 Request& r) override {
    fi_addr_t to = addr_of(peer);
    start(r, peer);
    r.bytes = len;
    if (len <= inject_) {
      // The buffer is reusable as soon as fi_tinject returns and no
      // completion is generated: the request is done now.
      ssize_t rc = fi_tinject(ep_, buf, len, to, tag);
      if (rc == -FI_EAGAIN) {
        drain();
        return false;
      }
      check_post(rc, "send", peer, len, tag);
      r.done = true;
      ++inline_done_;
      return true;
    }
    if (tx_posted_ >= tx_limit_) {
      drain();
      return false;
    }
    const void* src = buf;
    void* desc = nullptr;
    if (reg_->active()) {
      r.slot = reg_->take(len);
      if (r.slot >= 0) {
        if (len > 0) {
          std::memcpy(reg_->slot_buf(r.slot), buf, len);
        }
        src = reg_->slot_buf(r.slot);
        desc = reg_->slot_desc();
      } else {
        auto* mr = reg_->reg(buf, len, FI_SEND);
        r.mr = mr;
        desc = fi_mr_desc(mr);
      }
    }
    ssize_t rc = fi_tsend(ep_, src, len, desc, to, tag, r.ctx);
    if (rc == -FI_EAGAIN) {
      undo(r);
      drain();
      return false;
    }
    if (rc != 0) {
      undo(r);
    }
    check_post(rc, "send", peer, len, tag);
    ++tx_posted_;
    return true;
  }

  bool post_recv(int peer, uint64_t tag, void* buf, size_t len,
                 Request& r) override {
    fi_addr_t from = addr_of(peer);
    start(r, peer);
    r.bytes = len;  // the posted size until the completion says otherwise
    if (rx_posted_ >= rx_limit_) {
      drain();
      return false;
    }
    void* dst = buf;
    void* desc = nullptr;
    if (reg_->active()) {
      r.slot = reg_->take(len);
      if (r.slot >= 0) {
        r.user_buf = buf;
        dst = reg_->slot_buf(r.slot);
        desc = reg_->slot_desc();
      } else {
        auto* mr = reg_->reg(buf, len, FI_RECV);
        r.mr = mr;
        desc = fi_mr_desc(mr);
      }
    }
    ssize_t rc = fi_trecv(ep_, dst, len, desc, from, tag, 0, r.ctx);
    if (rc == -FI_EAGAIN) {
      undo(r);
      drain();
      return false;
    }
    if (rc != 0) {
      undo(r);
    }
    check_post(rc, "recv", peer, len, tag);
    ++rx_posted_;
    return true;
  }

  int progress() override {
    drain();
    int n = inline_done_;
    inline_done_ = 0;
    return n;
  }

  int wait_fd() const override { return wait_fd_; }

  bool try_wait() override {
    if (wait_fd_ < 0 || inline_done_ > 0) {
      return false;
    }
    fid* f = &cq_->fid;
    return fi_trywait(d_->fabric, &f, 1) == FI_SUCCESS;
  }

 private:
  void check(int rc, const char* step) {
    if (rc == 0) {
      return;
    }
    close();
    raise(ErrorKind::Config,
          std::string("cannot open an ofi endpoint on provider ") +
              d_->info->fabric_attr->prov_name + " (domain " +
              d_->info->domain_attr->name + "): " + step + ": " + fi_text(rc),
          {.rank = d_->opts.rank});
  }

  // Registrations first (FI_MR_ENDPOINT binds them to the endpoint), then
  // the endpoint (which cancels what is posted), and only then the bounce
  // memory goes.
  void close() {
    if (reg_) {
      reg_->close_mrs();
    }
    if (ep_ != nullptr) {
      fi_close(&ep_->fid);
      ep_ = nullptr;
    }
    reg_.reset();
    if (av_ != nullptr) {
      fi_close(&av_->fid);
      av_ = nullptr;
    }
    if (cq_ != nullptr) {
      fi_close(&cq_->fid);
      cq_ = nullptr;
    }
  }

  fi_addr_t addr_of(int peer) const {
    if (peer < 0 || static_cast<size_t>(peer) >= addrs_.size() ||
        addrs_[peer] == FI_ADDR_NOTAVAIL) {
      raise(ErrorKind::Usage,
            "ofi post to member " + std::to_string(peer) + " of " +
                std::to_string(addrs_.size()) +
                " (insert_peers not called, or no address for it)",
            {.rank = d_->opts.rank});
    }
    return addrs_[peer];
  }

  static void start(Request& r, int peer) {
    r.done = false;
    r.bytes = 0;
    r.peer = peer;
    r.user_buf = nullptr;
    r.mr = nullptr;
    r.slot = -1;
  }

  void undo(Request& r) {
    if (r.slot >= 0) {
      reg_->release(r.slot);
      r.slot = -1;
    }
    if (r.mr != nullptr) {
      reg_->dereg(static_cast<fid_mr*>(r.mr));
      r.mr = nullptr;
    }
    r.user_buf = nullptr;
  }

  void check_post(ssize_t rc, const char* op, int peer, size_t len,
                  uint64_t tag) {
    if (rc == 0) {
      return;
    }
    int rank = names_.empty() ? peer : names_[peer];
    raise(
        peer_gone(static_cast<int>(-rc)) ? ErrorKind::PeerLost : ErrorKind::Io,
        std::string("posting an ofi ") + op + " of " + std::to_string(len) +
            " bytes (tag " + std::to_string(tag) + ") on provider " +
            card_.provider + " failed: " + fi_text(static_cast<int>(rc)),
        {.rank = d_->opts.rank, .peer = rank});
  }

  void complete(void* ctx, uint64_t flags, size_t len) {
    Request* r = request_of(ctx);
    --((flags & FI_RECV) != 0 ? rx_posted_ : tx_posted_);
    if ((flags & FI_RECV) != 0) {
      r->bytes = len;
      if (r->slot >= 0 && len > 0) {
        std::memcpy(r->user_buf, reg_->slot_buf(r->slot), len);
      }
    }
    undo(*r);
    r->done = true;
  }

  // Reads every completion available; inline_done_ counts them.
  void drain() {
    fi_cq_tagged_entry e[16];
    for (;;) {
      ssize_t got = fi_cq_read(cq_, e, 16);
      if (got > 0) {
        for (ssize_t i = 0; i < got; ++i) {
          complete(e[i].op_context, e[i].flags, e[i].len);
        }
        inline_done_ += static_cast<int>(got);
        if (got < 16) {
          return;
        }
        continue;
      }
      if (got == -FI_EAGAIN) {
        return;
      }
      if (got == -FI_EAVAIL) {
        fail_completion();
      }
      raise(ErrorKind::Io,
            "reading the ofi completion queue failed: " +
                fi_text(static_cast<int>(got)),
            {.rank = d_->opts.rank});
    }
  }

  [[noreturn]] void fail_completion() {
    fi_cq_err_entry err{};
    ssize_t rc = fi_cq_readerr(cq_, &err, 0);
    if (rc < 0) {
      raise(ErrorKind::Io,
            "reading an ofi completion error failed: " +
                fi_text(static_cast<int>(rc)),
            {.rank = d_->opts.rank});
    }
    int rank = -1;
    size_t posted = 0;
    bool recv = (err.flags & FI_RECV) != 0;
    if (err.op_context != nullptr) {
      --(recv ? rx_posted_ : tx_posted_);
      Request* r = request_of(err.op_context);
      rank = r->peer >= 0 && static_cast<size_t>(r->peer) < names_.size()
                 ? names_[r->peer]
                 : r->peer;
      posted = r->bytes;
      undo(*r);
    }
    int code = err.err < 0 ? -err.err : err.err;  // providers differ in sign
    std::string detail = fi_text(code);
    if (err.prov_errno != 0) {
      char buf[256] = {};
      const char* prov =
          fi_cq_strerror(cq_, err.prov_errno, err.err_data, buf, sizeof(buf));
      if (prov != nullptr && *prov != '\0') {
        detail += " (provider: " + std::string(prov) + ")";
      }
    }
    if (code == FI_ETRUNC) {
      raise(ErrorKind::Protocol,
            rank_ref(rank) + " sent a message longer than the " +
                std::to_string(posted) + "-byte receive posted for tag " +
                std::to_string(err.tag) +
                (err.olen > 0
                     ? " (" + std::to_string(err.olen) + " bytes too many)"
                     : std::string()) +
                ": " + detail,
            {.rank = d_->opts.rank, .peer = rank});
    }
    raise(peer_gone(code) ? ErrorKind::PeerLost : ErrorKind::Io,
          std::string("an ofi ") + (recv ? "recv" : "send") +
              (posted > 0 ? " of " + std::to_string(posted) + " bytes"
                          : std::string()) +
              " (tag " + std::to_string(err.tag) + ") over provider " +
              card_.provider + " failed: " + detail,
          {.rank = d_->opts.rank, .peer = rank});
  }

  std::shared_ptr<DomainState> d_;
  fid_ep* ep_ = nullptr;
  fid_cq* cq_ = nullptr;
  fid_av* av_ = nullptr;
  int wait_fd_ = -1;
  size_t inject_ = 0;
  size_t tx_limit_ = SIZE_MAX;
  size_t rx_limit_ = SIZE_MAX;
  size_t tx_posted_ = 0;
  size_t rx_posted_ = 0;
  int inline_done_ = 0;
  Card card_;
  std::vector<fi_addr_t> addrs_;
  std::vector<int> names_;
  std::unique_ptr<Registrar> reg_;
};

}  // namespace

std::unique_ptr<Endpoint> make_ofi_endpoint(std::shared_ptr<DomainState> d) {
  return std::make_unique<EndpointImpl>(std::move(d));
}

}  // namespace jaccl::detail::ofi

#endif  // JACCL_HAVE_OFI
