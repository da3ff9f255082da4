// Copyright 2026 the jaccl authors.
// The kv:// store's server (kv_store.h): one thread, one poll loop over the
// listener, the clients and a wake-up pipe. Requests are small and rare
// (a grow's rendezvous), so each is read and answered in one go once its
// first byte is in, bounded by kRequestLimit.
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <map>
#include <mutex>

#include "bootstrap/kv_store.h"
#include "bootstrap/kv_wire.h"
#include "common/handshake.h"
#include "common/log.h"

namespace jaccl::detail {

namespace {

constexpr Millis kRequestLimit{1000};

struct Client {
  Fd fd;
  bool hello = false;
};

}  // namespace

struct KvServer::State {
  std::mutex mu;
  std::map<std::string, std::string> data;
  std::string token;  // fingerprint, decimal
  std::string address;

  // The reply to m; nullopt when the client must be dropped.
  std::optional<kv::Message> serve(Client& c, kv::Message m) {
    std::lock_guard<std::mutex> lock(mu);
    if (!c.hello) {
      if (m.op != kv::Op::Hello || m.parts.size() != 1 || !m.parts[0] ||
          *m.parts[0] != token) {
        return kv::Message{kv::Op::Err,
                           {"another job's kv:// store (or another "
                            "JACCL_TOKEN) at " +
                            address}};
      }
      c.hello = true;
      return kv::Message{kv::Op::Ok, {}};
    }
    kv::Message r{kv::Op::Ok, {}};
    switch (m.op) {
      case kv::Op::Put:
        if (m.parts.size() != 2 || !m.parts[0] || !m.parts[1]) {
          return std::nullopt;
        }
        data[*m.parts[0]] = std::move(*m.parts[1]);
        break;
      case kv::Op::Get:
        for (auto& k : m.parts) {
          auto it = k ? data.find(*k) : data.end();
          r.parts.push_back(it == data.end()
                                ? std::nullopt
                                : std::optional<std::string>(it->second));
        }
        break;
      case kv::Op::Del:
        for (auto& k : m.parts) {
          if (k) {
            data.erase(*k);
          }
        }
        break;
      case kv::Op::List: {
        if (m.parts.size() != 1 || !m.parts[0]) {
          return std::nullopt;
        }
        const std::string& p = *m.parts[0];
        for (auto it = data.lower_bound(p);
             it != data.end() && it->first.compare(0, p.size(), p) == 0; ++it) {
          r.parts.emplace_back(it->first);
        }
        break;
      }
      default:
        return std::nullopt;
    }
    return r;
  }
};

KvServer::KvServer(const std::string& bind, const std::string& token)
    : state_(std::make_shared<State>()) {
  Fd listener = listen_tcp(resolve(parse_host_port(bind, "kv:// store")), 64);
  const SockAddr local = local_address(listener.get());
  address_ = HostPort{host_of(local), port_of(local)}.str();
  state_->token = std::to_string(token_fingerprint(token));
  state_->address = address_;
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) {
    raise(ErrorKind::Io, "pipe2 failed", {.sys_errno = errno});
  }
  Fd wake_read(p[0]);
  wake_ = Fd(p[1]);
  thread_ = std::thread([state = state_, listener = std::move(listener),
                         wake = std::move(wake_read)]() mutable {
    std::vector<Client> clients;
    for (;;) {
      std::vector<pollfd> fds{{wake.get(), POLLIN, 0},
                              {listener.get(), POLLIN, 0}};
      for (auto& c : clients) {
        fds.push_back({c.fd.get(), POLLIN, 0});
      }
      if (::poll(fds.data(), fds.size(), -1) < 0) {
        continue;  // EINTR
      }
      if (fds[0].revents != 0) {
        return;
      }
      std::vector<bool> drop(clients.size(), false);
      for (size_t i = 0; i < clients.size(); ++i) {
        if (fds[i + 2].revents == 0) {
          continue;
        }
        Client& c = clients[i];
        const ErrorContext ctx{.address = state->address};
        try {
          const Deadline dl = Deadline::after(kRequestLimit);
          auto reply = state->serve(c, kv::recv_message(c.fd.get(), dl, ctx));
          if (reply) {
            kv::send_message(c.fd.get(), *reply, dl, ctx);
          }
          drop[i] = !reply || reply->op == kv::Op::Err;
        } catch (const Error& e) {
          drop[i] = true;  // gone (the usual end) or out of step
          JACCL_LOG(Debug, "kv:// store "
                               << state->address
                               << ": dropped a client: " << e.what());
        }
      }
      for (size_t i = clients.size(); i-- > 0;) {
        if (drop[i]) {
          clients.erase(clients.begin() + static_cast<long>(i));
        }
      }
      if (fds[1].revents != 0) {
        int fd = ::accept4(listener.get(), nullptr, nullptr,
                           SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd >= 0) {
          set_nodelay(fd);
          clients.push_back({Fd(fd), false});
        }
      }
    }
  });
}

KvServer::~KvServer() {
  const char x = 0;
  (void)!::write(wake_.get(), &x, 1);
  thread_.join();
}

size_t KvServer::keys() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->data.size();
}

}  // namespace jaccl::detail
