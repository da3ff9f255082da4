// Copyright 2026 the jaccl authors.
// The kv:// store's client (kv_store.h): one connection per store, one
// request in flight.
#include "bootstrap/kv_store.h"

#include <mutex>

#include "bootstrap/kv_wire.h"
#include "common/handshake.h"

namespace jaccl::detail {

namespace {

class KvStore final : public RendezvousStore {
 public:
  KvStore(const std::string& host_port, const std::string& ns,
          const std::string& token, Millis timeout, int rank)
      : address_(parse_host_port(host_port, "kv:// store").str()),
        ns_(ns + "/"),
        where_("kv:// store " + address_ + " keys " + ns_),
        timeout_(timeout),
        rank_(rank) {
    const ErrorContext ctx = context();
    const Deadline dl = Deadline::after(timeout_);
    fd_ = connect_with_retry(
        resolve(parse_host_port(host_port, "kv:// store"), rank), dl, ctx,
        [](int, int) {},
        "could not reach the kv:// store (is jaccl-run --elastic still "
        "running?) within " +
            format_duration(timeout_));
    set_nodelay(fd_.get());
    call({kv::Op::Hello, {std::to_string(token_fingerprint(token))}});
  }

  const std::string& where() const override { return where_; }
  const std::string& address() const override { return address_; }

  void put(const std::string& key, std::string_view value) override {
    call({kv::Op::Put, {ns_ + key, std::string(value)}});
  }

  std::vector<std::optional<std::string>> get(
      const std::vector<std::string>& keys) override {
    kv::Message m{kv::Op::Get, {}};
    for (const auto& k : keys) {
      m.parts.emplace_back(ns_ + k);
    }
    kv::Message r = call(m);
    if (r.parts.size() != keys.size()) {
      raise(ErrorKind::Protocol,
            "the kv:// store answered " + std::to_string(r.parts.size()) +
                " values for " + std::to_string(keys.size()) + " keys",
            context());
    }
    return std::move(r.parts);
  }

  void remove(const std::vector<std::string>& keys) noexcept override {
    kv::Message m{kv::Op::Del, {}};
    for (const auto& k : keys) {
      m.parts.emplace_back(ns_ + k);
    }
    try {
      call(m);
    } catch (...) {  // best effort
    }
  }

  std::vector<std::string> list() override {
    std::vector<std::string> out;
    for (auto& p : call({kv::Op::List, {ns_}}).parts) {
      if (p && p->size() >= ns_.size()) {
        out.push_back(p->substr(ns_.size()));
      }
    }
    return out;
  }

 private:
  ErrorContext context() const { return {.rank = rank_, .address = address_}; }

  kv::Message call(const kv::Message& m) {
    std::lock_guard<std::mutex> lock(mu_);
    const ErrorContext ctx = context();
    if (!fd_.valid()) {
      raise(ErrorKind::PeerLost, "the kv:// store connection broke earlier",
            ctx);
    }
    try {
      const Deadline dl = Deadline::after(timeout_);
      kv::send_message(fd_.get(), m, dl, ctx);
      kv::Message r = kv::recv_message(fd_.get(), dl, ctx);
      if (r.op == kv::Op::Err) {
        raise(ErrorKind::Protocol,
              "the kv:// store refused: " + (r.parts.empty() || !r.parts[0]
                                                 ? std::string("?")
                                                 : *r.parts[0]),
              ctx);
      }
      return r;
    } catch (...) {
      fd_.reset();  // the stream is out of step now
      throw;
    }
  }

  std::mutex mu_;
  Fd fd_;
  std::string address_;
  std::string ns_;
  std::string where_;
  Millis timeout_;
  int rank_;
};

}  // namespace

std::shared_ptr<RendezvousStore> make_kv_store(const std::string& host_port,
                                               const std::string& ns,
                                               const std::string& token,
                                               Millis timeout, int rank) {
  return std::make_shared<KvStore>(host_port, ns, token, timeout, rank);
}

}  // namespace jaccl::detail
