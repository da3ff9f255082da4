// Copyright 2026 the jaccl authors.
// The TCP star: make_tcp_star and the side of ranks > 0, which dial rank 0
// (tcp_star_server.cpp), send their part and read everyone's.
#include "bootstrap/tcp_star.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>

#include "bootstrap/tcp_star_shared.h"
#include "common/error.h"
#include "common/log.h"
#include "common/net.h"

namespace jaccl::detail {

namespace {

using star::kReplyBytes;
using star::kRequestBytes;

// Clients wait this much past their own deadline for a reply, so rank 0's
// report (which names the missing ranks) wins over a vaguer local timeout
// when both deadlines expire together.
constexpr Millis kReplyGrace{2000};
// The coordinator connection's receive buffer (see dial()).
constexpr int kReceiveBuffer = 4 << 20;
// Handshakes rank 0 may break off before a rank gives up (see dial()).
constexpr int kHandshakeRetries = 3;
// The shortest cap on the wait between refused dials (see max_backoff()).
constexpr int kMinBackoffMs = 10;

// The ranks of one process that dial one coordinator (thread-ranks, or
// several groups bootstrapping at once) share a lobby. While the coordinator
// does not answer, one of them probes it on the backoff schedule and the
// others wait for its news instead of each retrying on its own, and they all
// dial the moment a probe gets through. With 4096 thread-ranks the private
// retries (a socket, a refused SYN, two context switches each; about six per
// rank before rank 0 came up) kept both cores busy and starved the thread
// that was to listen for up to 600 ms, and a rank asleep in its backoff
// missed the listener coming up by up to the cap (512 ms). With one rank
// per process the lobby only counts it.
struct DialLobby {
  std::mutex mu;
  std::condition_variable cv;
  bool up = false;       // the last dial from here got through
  bool probing = false;  // a rank of this process is probing
  int dialers = 0;       // ranks of this process dialing now
  int last_err = 0;      // errno of the last failed dial from here

  // One per coordinator address in this process, alive while a rank holds
  // it.
  static std::shared_ptr<DialLobby> of(const std::string& address) {
    // Never destroyed: a rank may still dial while the process exits.
    static auto* registry_mu = new std::mutex;
    static auto* by_address =
        new std::map<std::string, std::weak_ptr<DialLobby>>;
    std::lock_guard<std::mutex> lock(*registry_mu);
    auto& registry = *by_address;
    for (auto it = registry.begin(); it != registry.end();) {
      it = it->second.expired() ? registry.erase(it) : std::next(it);
    }
    std::weak_ptr<DialLobby>& slot = registry[address];
    std::shared_ptr<DialLobby> lobby = slot.lock();
    if (!lobby) {
      lobby = std::make_shared<DialLobby>();
      slot = lobby;
    }
    return lobby;
  }
};

// Buffers rank 0's replies are received into, piece by piece, and copied
// or decoded (PartsDecoder) from, shared by the ranks of a process. The
// kernel writes into few pages this way, the same ones each call: on some
// VMs its first write into a page costs ~20x its later ones (7.4 us
// against 0.31 measured here), and with 4096 thread ranks receiving into
// their own outputs that was ~1 GiB of first writes in the first call. A
// rank holds a buffer only while it reads and decodes what has arrived, so
// a handful serve them all.
class ReceivePool {
 public:
  static constexpr size_t kBytes = 64 << 10;

  struct Lease {
    ReceivePool* pool;
    std::unique_ptr<char[]> buf;
    ~Lease() { pool->give(std::move(buf)); }
    char* data() const { return buf.get(); }
  };

  static ReceivePool& instance() {
    // Never destroyed: a rank may still receive while the process exits.
    static auto* pool = new ReceivePool;
    return *pool;
  }

  Lease take() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!free_.empty()) {
        auto b = std::move(free_.back());
        free_.pop_back();
        return {this, std::move(b)};
      }
    }
    return {this, std::make_unique_for_overwrite<char[]>(kBytes)};
  }

 private:
  void give(std::unique_ptr<char[]> b) {
    std::lock_guard<std::mutex> lock(mu_);
    if (b && free_.size() < kKeep) {
      free_.push_back(std::move(b));
    }
  }

  static constexpr size_t kKeep = 64;
  std::mutex mu_;
  std::vector<std::unique_ptr<char[]>> free_;
};

class Client {
 public:
  explicit Client(const TcpStarOptions& o)
      : o_(o),
        hp_(parse_host_port(o.address, "JACCL_COORDINATOR")),
        address_(hp_.str()),
        job_(token_fingerprint(o.token)),
        lobby_(DialLobby::of(address_)) {}

  void call(const char* src, char* dst, size_t n) {
    call_to(src, dst, n, nullptr);
  }

  // The result where it arrived, valid until the next call: in rank 0's
  // shared memory when it could share it (no copy, and no fresh memory of
  // size * n at this rank), else in a buffer of this client.
  const char* view(const char* src, size_t n) {
    const char* at = nullptr;
    call_to(src, nullptr, n, &at);
    return at;
  }

 private:
  void call_to(const char* src, char* dst, size_t n, const char** in_place) {
    seq_ = calls_++;
    try {
      exchange(src, dst, n, in_place);
    } catch (...) {
      if (coord_.valid()) {
        // Let rank 0 see us go now rather than at its next write.
        ::shutdown(coord_.get(), SHUT_RDWR);
      }
      throw;
    }
  }

  std::string call_name() const {
    return "all-gather #" + std::to_string(seq_);
  }
  std::string timeout_text() const {
    return "timed out after " + format_duration(o_.timeout);
  }

  ErrorContext client_ctx() const {
    return {.rank = o_.rank, .peer = 0, .address = address_};
  }

  // Waits between refused dials grow to this. The processes that dial on
  // their own (size - 1 ranks over the ranks of this process dialing: one
  // prober per process) must not flood rank 0's kernel with SYNs: about 8
  // per millisecond at most, so the cap is a millisecond per 8 of them
  // (1023 processes: 128 ms, as before). A small job, or one process of
  // thread-ranks, looks every 5-10 ms: one attempt costs tens of
  // microseconds. No cap passes a second.
  Millis max_backoff(int dialers_here) const {
    const int independent = (o_.size - 1) / std::max(dialers_here, 1);
    return Millis(std::clamp(independent / 8, kMinBackoffMs, 1000));
  }

  // connect_with_retry through the lobby (see DialLobby): the same errors,
  // the same info line once per rank.
  Fd connect_shared(const SockAddr& addr, const Deadline& dl,
                    const ErrorContext& ctx, const std::string& on_timeout) {
    DialLobby& lobby = *lobby_;
    std::unique_lock<std::mutex> lk(lobby.mu);
    ++lobby.dialers;
    bool probing = false;  // this rank is the lobby's prober
    int probes = 0;
    int last_err = 0;
    bool logged = false;
    // However this ends, the others must not wait on a prober that left.
    struct Leave {
      DialLobby& lobby;
      std::unique_lock<std::mutex>& lk;
      bool& probing;
      ~Leave() {
        if (!lk.owns_lock()) {
          lk.lock();
        }
        --lobby.dialers;
        if (probing) {
          lobby.probing = false;
          lobby.cv.notify_all();
        }
      }
    } leave{lobby, lk, probing};
    for (;;) {
      // Another rank here probes a coordinator that did not answer: wait
      // for its news (looking again every second, never past dl).
      while (!probing && lobby.probing && !lobby.up) {
        if (dl.expired()) {
          lk.unlock();
          raise_connect_failure(addr, dl, ctx,
                                last_err != 0 ? last_err : lobby.last_err,
                                on_timeout);
        }
        lobby.cv.wait_for(lk, Millis(dl.poll_ms(1000)));
      }
      if (!lobby.up && !lobby.probing) {
        lobby.probing = probing = true;
      }
      lk.unlock();
      int err = 0;
      Fd fd = try_connect(addr, dl, &err);
      lk.lock();
      if (fd.valid()) {
        if (!lobby.up || probing) {
          lobby.up = true;
          lobby.cv.notify_all();
        }
        if (probing) {
          lobby.probing = probing = false;
        }
        return fd;
      }
      last_err = lobby.last_err = err;
      if (out_of_resources(err) || dl.expired()) {
        break;  // out of descriptors here says nothing about rank 0
      }
      lobby.up = false;
      if (!logged) {
        // Workers often start before rank 0: expected, not an error.
        logged = true;
        JACCL_LOG(Info, "rank " << o_.rank << ": coordinator " << address_
                                << " not reachable yet (" << std::strerror(err)
                                << "); retrying for up to "
                                << format_duration(o_.timeout));
      }
      if (!lobby.probing) {
        lobby.probing = probing = true;
      }
      if (probing) {
        const Millis cap = max_backoff(lobby.dialers);
        lk.unlock();
        sleep_for_retry(probes++, dl, cap);
        lk.lock();
      }
    }
    lk.unlock();
    raise_connect_failure(addr, dl, ctx, last_err, on_timeout);
  }

  // Rank 0 closed a connection before its verdict (see dropped()).
  struct HandshakeDropped {
    std::string what;
  };

  // Connects and runs the handshake up to our proof; the verdict is read
  // after the request has gone out behind it (read_verdict). `attempt`
  // connections were dropped during the handshake before this one.
  void dial(const Deadline& dl, int attempt) {
    const ErrorContext ctx = client_ctx();
    const SockAddr addr = resolve(hp_, o_.rank);
    Hello me;
    me.channel = Channel::Coordinator;
    me.rank = o_.rank;
    me.size = o_.size;
    me.job = job_;
    Fd fd = connect_shared(
        addr, dl, ctx,
        timeout_text() +
            " waiting for the coordinator to accept a connection (is rank "
            "0 running at JACCL_COORDINATOR?)" +
            (attempt > 0 ? "; it closed " + std::to_string(attempt) +
                               " earlier connection(s) during the "
                               "handshake (last: " +
                               dropped_ + ")"
                         : std::string()));
    set_nodelay(fd.get());
    // Room for a whole result, so rank 0 writes it in one go and we wake
    // once (recv_body); the kernel caps it at rmem_max.
    const int rcvbuf = kReceiveBuffer;
    ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
    me.nonce = random_nonce();
    try {
      if (o_.token.empty()) {
        // The proof needs no challenge: hello, proof and (next) request in
        // one go; the challenge is checked with the verdict.
        client_send_hello_and_proof(fd.get(), me, dl, ctx);
        challenge_due_ = true;
      } else {
        client_send_proof(fd.get(), me, o_.token, dl, ctx);
      }
    } catch (const TimeoutError&) {
      raise_handshake_timeout();
    } catch (const PeerLostError& e) {
      throw HandshakeDropped{e.what()};
    }
    coord_ = std::move(fd);
    verdict_due_ = true;
  }

  [[noreturn]] void raise_handshake_timeout() const {
    raise(ErrorKind::Timeout,
          timeout_text() + " waiting for the coordinator to finish the " +
              "connection handshake",
          client_ctx());
  }

  // Throws Config when rank 0 refused us (with its reason).
  void read_verdict(const Deadline& dl) {
    try {
      if (challenge_due_) {
        client_check_challenge(coord_.get(), dl, client_ctx());
        challenge_due_ = false;
      }
      client_read_verdict(coord_.get(), dl, client_ctx());
    } catch (const TimeoutError&) {
      raise_handshake_timeout();
    } catch (const PeerLostError& e) {
      throw HandshakeDropped{e.what()};
    }
    verdict_due_ = false;
  }

  // Closed before its verdict: rank 0 dropped a handshake it could not
  // serve in time (a mass start on a loaded host). Dial again, a few times:
  // a peer that always hangs up is not a coordinator.
  void dropped(int attempt, const std::string& what, const Deadline& dl) {
    coord_.reset();
    verdict_due_ = challenge_due_ = false;
    if (attempt >= kHandshakeRetries) {
      raise(ErrorKind::PeerLost,
            "the coordinator closed " + std::to_string(attempt + 1) +
                " connections in a row during the handshake (is "
                "JACCL_COORDINATOR a jaccl coordinator of this "
                "version?); last: " +
                what,
            client_ctx());
    }
    dropped_ = what;
    JACCL_LOG(Info, "rank " << o_.rank << ": coordinator " << address_
                            << " closed the connection during the "
                            << "handshake; dialing again");
    sleep_for_retry(attempt, dl, max_backoff(1));
  }

  // Sends the request, watching for an early reply: rank 0 answers a size
  // mismatch or a lost rank with an error frame without reading the rest,
  // and we must not sit blocked in send() meanwhile. True when it answered
  // (or the connection broke) before all was sent. A verdict still due is
  // read when it comes (hs bounds that wait).
  bool send_request(const std::array<uint8_t, kRequestBytes>& req,
                    const char* src, size_t n, const Deadline& dl,
                    const Deadline& hs) {
    const int fd = coord_.get();
    const size_t total = kRequestBytes + n;
    size_t done = 0;
    for (;;) {
      if (send_frame_some(fd, req, src, n, &done) != 0) {
        return true;  // broken: rank 0 may still have left us a frame
      }
      if (done == total) {
        return false;
      }
      pollfd pf{fd, POLLOUT | POLLIN, 0};
      if (poll_until(&pf, 1, dl) <= 0 && dl.expired()) {
        raise(ErrorKind::Timeout,
              timeout_text() + " sending " + call_name() +
                  " to the coordinator (rank 0 is not reading)",
              client_ctx());
      }
      if ((pf.revents & POLLIN) != 0 && verdict_due_) {
        read_verdict(hs);
        continue;
      }
      if ((pf.revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
        return true;
      }
    }
  }

  // recv_all with the coordinator named in the errors.
  void recv_reply(void* buf, size_t len, const Deadline& dl) {
    try {
      recv_all(coord_.get(), buf, len, dl, client_ctx());
    } catch (const PeerLostError&) {
      raise(ErrorKind::PeerLost,
            "lost the connection to the coordinator (rank 0) during " +
                call_name() + " (rank 0 exited or crashed?)",
            client_ctx());
    } catch (const TimeoutError&) {
      late();
    }
  }

  // With in_place, dst is null and *in_place says where the result is.
  void exchange(const char* src, char* dst, size_t n, const char** in_place) {
    // Both deadlines start now: the first call, connection included, is
    // bounded by the timeout (plus the grace for rank 0's report).
    const Deadline dl = o_.timeout.count() > 0
                            ? Deadline::after(o_.timeout + kReplyGrace)
                            : Deadline::never();
    // Computed once: the same for every rank of the process.
    static const uint64_t host = star::shared_host_key();
    const auto req = star::encode_request(n, star::kAcceptsCoded, host);
    bool early = false;
    if (coord_.valid()) {
      early = send_request(req, src, n, dl, dl);
    } else {
      // The first call: the request goes right behind the handshake's
      // proof, and rank 0 reads it as soon as it has admitted us (one
      // round trip less per rank; with thousands of ranks each one is a
      // wake-up of rank 0 and of the rank).
      const Deadline hs = Deadline::after(o_.timeout);
      for (int attempt = 0;; ++attempt) {
        try {
          dial(hs, attempt);
          early = send_request(req, src, n, dl, hs);
          if (verdict_due_) {
            read_verdict(hs);
          }
          break;
        } catch (const HandshakeDropped& d) {
          dropped(attempt, d.what, hs);
        }
      }
    }
    std::array<uint8_t, kReplyBytes> head{};
    recv_reply(head.data(), head.size(), dl);
    std::string why;
    auto h = star::decode_reply(head, &why);
    if (!h) {
      raise(
          ErrorKind::Protocol,
          "malformed reply from the coordinator to " + call_name() + ": " + why,
          client_ctx());
    }
    if (h->status == star::Status::Error) {
      std::string msg(h->length, '\0');
      recv_reply(msg.data(), msg.size(), dl);
      raise(h->kind, "coordinator reports: " + Detail::from_wire(msg),
            {.rank = o_.rank});
    }
    const size_t want = n * static_cast<size_t>(o_.size);
    const bool coded = (h->flags & star::kCoded) != 0;
    const bool shared = (h->flags & star::kShared) != 0;
    const size_t most = shared ? star::kSharedRefBytes : want;
    if (early || (coded || shared ? h->length > most : h->length != want)) {
      raise(ErrorKind::Protocol,
            "the coordinator's reply to " + call_name() + " holds " +
                std::to_string(h->length) +
                (coded    ? " coded"
                 : shared ? " reference"
                          : "") +
                " bytes, expected " + (coded || shared ? "at most " : "") +
                std::to_string(most),
            client_ctx());
    }
    if (shared) {
      read_shared(static_cast<size_t>(h->length), dst, want, dl, in_place);
      return;
    }
    if (in_place != nullptr) {
      if (own_size_ < want) {
        own_.reset(new char[want]);  // not zeroed: the reply fills it
        own_size_ = want;
      }
      dst = own_.get();
      *in_place = dst;
    }
    // Both ways through a buffer of the pool (ReceivePool): the result
    // itself is fresh to the kernel.
    std::optional<star::PartsDecoder> dec;
    if (coded) {
      dec.emplace(dst, want, n, static_cast<size_t>(h->length));
    }
    auto malformed = [&] {
      raise(ErrorKind::Protocol,
            "the coordinator's coded reply to " + call_name() +
                " is malformed: " + why,
            client_ctx());
    };
    recv_body(
        static_cast<size_t>(h->length), dl, [&](size_t done, size_t room) {
          ssize_t got = 0, k = 0;
          int err = 0;
          {
            auto buf = ReceivePool::instance().take();
            while (room > 0) {
              k = ::recv(coord_.get(), buf.data(),
                         std::min(room, ReceivePool::kBytes), MSG_DONTWAIT);
              if (k <= 0) {
                err = errno;
                break;
              }
              const size_t u = static_cast<size_t>(k);
              if (!dec) {
                std::memcpy(dst + done + static_cast<size_t>(got), buf.data(),
                            u);
              } else if (!dec->feed(
                             reinterpret_cast<const uint8_t*>(buf.data()), u,
                             &why)) {
                malformed();
              }
              got += k;
              room -= u;
            }
          }
          errno = err;  // recv's, not the pool lock's
          return got > 0 ? got : k;
        });
    if (dec && !dec->finish(&why)) {
      malformed();
    }
  }

  // A reply with flag kShared: where in rank 0's shared memory the result is.
  void read_shared(size_t len, char* dst, size_t want, const Deadline& dl,
                   const char** in_place) {
    std::vector<uint8_t> body(len);
    recv_reply(body.data(), body.size(), dl);
    std::string why;
    auto ref = star::decode_shared_ref(body, &why);
    if (ref && ref->length != want) {
      why = "it names " + std::to_string(ref->length) + " bytes, expected " +
            std::to_string(want);
      ref.reset();
    }
    if (!ref) {
      raise(ErrorKind::Protocol,
            "the coordinator's reference to its result of " + call_name() +
                " is malformed: " + why,
            client_ctx());
    }
    if (in_place != nullptr) {
      *in_place = shared_.locate(*ref, client_ctx());
    } else {
      shared_.read(*ref, dst, client_ctx());
    }
  }

  // The body of a reply, `want` bytes, through read(done, room), which
  // takes at most `room` of the bytes after the first `done` without
  // blocking and returns as recv() does. Woken once it has (nearly) all
  // arrived rather than once per segment: SO_RCVLOWAT holds poll() until
  // that much is readable. With thousands of ranks on few cores, a wake-up
  // per segment per rank kept every rank runnable and starved rank 0, which
  // feeds them all.
  template <class Read>
  void recv_body(size_t want, const Deadline& dl, Read&& read) {
    const int fd = coord_.get();
    size_t done = 0;
    int lowat = 1;
    while (done < want) {
      ssize_t k = read(done, std::min(want - done, kMaxIoSlice));
      if (k > 0) {
        done += static_cast<size_t>(k);
        continue;
      }
      if (k < 0 && errno == EINTR) {
        continue;
      }
      if (k == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) {
        lost(dl);
      }
      // At most a quarter of the receive buffer: the window (about half of
      // it) must let that much in, or the sender stalls on a zero window
      // while we wait for bytes it cannot send.
      int rcvbuf = 0;
      socklen_t len = sizeof(rcvbuf);
      ::getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, &len);
      const int need = static_cast<int>(
          std::clamp<size_t>(want - done, 1, std::max(rcvbuf / 4, 1)));
      if (need != lowat &&
          ::setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &need, sizeof(need)) == 0) {
        lowat = need;
      }
      // The tick: a mark the window cannot reach must never stall us.
      pollfd pf{fd, POLLIN, 0};
      if (poll_until(&pf, 1, dl, 50) < 0) {
        lost(dl);
      }
      if (dl.expired() && pf.revents == 0) {
        late();
      }
    }
    if (lowat != 1) {
      const int one = 1;
      ::setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &one, sizeof(one));
    }
  }

  // The reply broke off: one more blocking read names how (closed, reset),
  // as a read of the whole reply would.
  [[noreturn]] void lost(const Deadline& dl) {
    char byte = 0;
    recv_reply(&byte, 1, dl);
    raise(ErrorKind::Protocol,
          "the coordinator's reply to " + call_name() +
              " broke off and then went on",
          client_ctx());
  }

  [[noreturn]] void late() {
    raise(ErrorKind::Timeout,
          timeout_text() + " waiting for the coordinator to answer " +
              call_name() + " (rank 0 or another rank is stuck)",
          client_ctx());
  }

  TcpStarOptions o_;
  HostPort hp_;
  std::string address_;
  uint64_t job_;
  uint64_t calls_ = 0;
  uint64_t seq_ = 0;  // number of the call in progress
  std::shared_ptr<DialLobby> lobby_;
  star::SharedReader shared_;
  std::unique_ptr<char[]> own_;  // view()'s results that came over TCP
  size_t own_size_ = 0;
  Fd coord_;
  std::string dropped_;         // why the last handshake broke off
  bool verdict_due_ = false;    // the handshake's verdict is not read yet
  bool challenge_due_ = false;  // nor its challenge (sent without a token)
};

// Serializes calls, and makes one failure poison the channel: later calls
// repeat it instead of talking to a star that is already broken.
struct Guard {
  std::mutex mu;
  std::exception_ptr failed;
  int rank = 0;
  int size = 0;

  template <class Call>
  auto run(size_t n, Call&& call) {
    std::lock_guard<std::mutex> lock(mu);
    if (failed) {
      std::rethrow_exception(failed);
    }
    try {
      if (n != 0 &&
          static_cast<size_t>(size) > std::numeric_limits<size_t>::max() / n) {
        raise(ErrorKind::Usage,
              "all-gather of " + std::to_string(n) + " bytes overflows",
              {.rank = rank});
      }
      return call();
    } catch (...) {
      failed = std::current_exception();
      throw;
    }
  }
};

}  // namespace

GatherFns make_tcp_star_fns(const TcpStarOptions& o) {
  if (o.size < 1 || o.rank < 0 || o.rank >= o.size) {
    raise(ErrorKind::Config,
          "TCP coordinator: rank " + std::to_string(o.rank) +
              " is not in [0, " + std::to_string(o.size) + ")",
          {.rank = o.rank});
  }
  if (o.size == 1) {
    // Nobody to talk to: no sockets at all.
    return {[](const char* src, char* dst, size_t n) {
              if (n != 0) {
                std::memmove(dst, src, n);
              }
            },
            nullptr};
  }
  auto g = std::make_shared<Guard>();
  g->rank = o.rank;
  g->size = o.size;
  if (o.rank == 0) {
    auto server = star::make_server(o);
    return {[g, server](const char* src, char* dst, size_t n) {
              g->run(n, [&] { server(src, dst, n); });
            },
            nullptr};
  }
  auto client = std::make_shared<Client>(o);
  return {[g, client](const char* src, char* dst, size_t n) {
            g->run(n, [&] { client->call(src, dst, n); });
          },
          [g, client](const char* src, size_t n) {
            return g->run(n, [&] { return client->view(src, n); });
          }};
}

AllGatherFn make_tcp_star(const TcpStarOptions& o) {
  return make_tcp_star_fns(o).fn;
}

}  // namespace jaccl::detail
