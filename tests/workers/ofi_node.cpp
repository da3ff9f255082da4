// Copyright 2026 the jaccl authors.
// One rank of a libfabric-layer test (src/transport/ofi): opens a domain,
// makes endpoints, exchanges cards through a shared directory, then runs a
// mode against every other rank.
//
//   ofi_node exchange   tagged messages of awkward sizes (0, 1, odd, across
//                       the bounce-slot size, 4 MiB + 5) both ways with every
//                       peer, and 64 messages on one tag checked for order
//   ofi_node flood      posts sends to rank (r+1)%n without progressing until
//                       a post says -FI_EAGAIN, then (once every rank has
//                       got there) finishes them all; the receiver checks
//                       every message; prints "EAGAIN n"
//   ofi_node threads    TEST_OFI_WIRES endpoints per rank, each driven by its
//                       own thread running `exchange` at once
//   ofi_node fdwake     rank 1 posts a recv and sleeps in poll() on the CQ's
//                       wait fd (no progress) until rank 0's message makes
//                       it readable; prints "WOKE" (or "NO_WAIT_FD")
//   ofi_node cards      only the card exchange and insert_peers
//   ofi_node die        opens its endpoints, prints "pid=N" and kills itself
//                       (SIGKILL), leaving its shm regions behind
//   ofi_node trunc      rank 0 sends 4 KiB into rank 1's 16-byte recv: rank 1
//                       fails with a ProtocolError naming rank 0
//   ofi_node pingpong   ranks 0 and 1: ping-pong (half round trip, and the
//                       rate it gives), an 8-byte exchange (both send at
//                       once) and streaming bandwidth (4 messages in flight)
//                       per size; JSON lines (bench/sections/ofi.py)
//
// Prints "OK" at the end; any jaccl::Error prints "FAILED <kind>: <what>" and
// exits 3. Environment: JACCL_RANK, JACCL_SIZE, TEST_SC_DIR (the shared
// directory), TEST_OFI_PROVIDER (this rank's provider; TEST_OFI_PROVIDER_<r>
// overrides it for rank r), TEST_OFI_DOMAIN, TEST_OFI_FORCE_REGISTER=1,
// TEST_OFI_WIRES.
#include <poll.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "common/deadline.h"
#include "jaccl/error.h"
#include "support/dir_allgather.h"
#include "support/slowdown.h"
#include "transport/ofi/ofi_fabric.h"

namespace {

using namespace std::chrono_literals;
namespace ofi = jaccl::detail::ofi;
using jaccl::detail::Deadline;

std::string env_or(const char* k, const std::string& dflt) {
  const char* v = std::getenv(k);
  return v != nullptr ? std::string(v) : dflt;
}

struct Ctx {
  int rank = 0;
  int size = 0;
  jaccl::AllGatherFn gather;
};

// Waits for r: spins on progress(), then sleeps on the wait fd when there is
// one (fi_trywait first), bounded by the deadline.
void wait_for(ofi::Endpoint& ep, ofi::Request& r, const Deadline& dl,
              const char* what) {
  int spins = 0;
  while (!r.done) {
    ep.progress();
    if (r.done) {
      break;
    }
    if (dl.expired()) {
      throw std::runtime_error(std::string("timed out waiting for ") + what);
    }
    if (++spins > 2000) {
      if (ep.wait_fd() >= 0 && ep.try_wait()) {
        pollfd p{ep.wait_fd(), POLLIN, 0};
        poll(&p, 1, dl.poll_ms(20));
      } else {
        std::this_thread::yield();
      }
    }
  }
}

void post_send(ofi::Endpoint& ep, int peer, uint64_t tag, const void* b,
               size_t n, ofi::Request& r, const Deadline& dl) {
  while (!ep.post_send(peer, tag, b, n, r)) {
    ep.progress();
    if (dl.expired()) {
      throw std::runtime_error("timed out posting a send");
    }
  }
}

void post_recv(ofi::Endpoint& ep, int peer, uint64_t tag, void* b, size_t n,
               ofi::Request& r, const Deadline& dl) {
  while (!ep.post_recv(peer, tag, b, n, r)) {
    ep.progress();
    if (dl.expired()) {
      throw std::runtime_error("timed out posting a recv");
    }
  }
}

// Exchanges the endpoints' cards (padded frames through the directory) and
// inserts the peers. eps[w] pairs with wire w of every other rank.
void connect(const Ctx& c, std::vector<std::unique_ptr<ofi::Endpoint>>& eps) {
  constexpr size_t kFrame = 1024;
  std::string mine(kFrame * eps.size(), '\0');
  for (size_t w = 0; w < eps.size(); ++w) {
    auto enc = eps[w]->card().encode();
    if (enc.size() + 4 > kFrame) {
      throw std::runtime_error("card too long");
    }
    uint32_t n = static_cast<uint32_t>(enc.size());
    std::memcpy(&mine[w * kFrame], &n, 4);
    std::memcpy(&mine[w * kFrame + 4], enc.data(), enc.size());
  }
  std::string all(mine.size() * static_cast<size_t>(c.size), '\0');
  c.gather(mine.data(), all.data(), mine.size());
  for (size_t w = 0; w < eps.size(); ++w) {
    std::vector<ofi::Card> cards(static_cast<size_t>(c.size));
    for (int r = 0; r < c.size; ++r) {
      const char* f = &all[static_cast<size_t>(r) * mine.size() + w * kFrame];
      uint32_t n = 0;
      std::memcpy(&n, f, 4);
      if (r != c.rank) {
        cards[static_cast<size_t>(r)] =
            ofi::Card::decode(std::string_view(f + 4, n), r, c.rank);
      }
    }
    eps[w]->insert_peers(cards, {});
  }
}

uint8_t pattern(int src, int dst, size_t idx, size_t i) {
  return static_cast<uint8_t>(src * 31 + dst * 17 + idx * 7 + i * 131);
}

void fill(std::vector<uint8_t>& b, int src, int dst, size_t idx) {
  for (size_t i = 0; i < b.size(); ++i) {
    b[i] = pattern(src, dst, idx, i);
  }
}

void verify(const std::vector<uint8_t>& b, size_t got, size_t want, int src,
            int dst, size_t idx, const std::string& where) {
  if (got != want) {
    throw std::runtime_error(where + ": received " + std::to_string(got) +
                             " bytes, expected " + std::to_string(want));
  }
  for (size_t i = 0; i < want; ++i) {
    if (b[i] != pattern(src, dst, idx, i)) {
      throw std::runtime_error(where + ": wrong byte at " + std::to_string(i));
    }
  }
}

const std::vector<size_t> kSizes = {
    0, 1, 7, 4097, 65535, 65536, 65537, 1048579, (4u << 20) + 5, 8, (1u << 20)};

// Every size to and from every peer at once, then 64 in order on one tag.
// max_size drops the larger sizes (the threads mode runs this on every wire
// at once; the sizes above 1 MiB are covered by plain `exchange`).
void exchange(const Ctx& c, ofi::Endpoint& ep, int wire,
              size_t max_size = SIZE_MAX) {
  auto dl = Deadline::after(60000ms * jaccl::test::slowdown());
  std::vector<int> peers;
  for (int p = 0; p < c.size; ++p) {
    if (p != c.rank) {
      peers.push_back(p);
    }
  }
  std::vector<size_t> sizes;
  for (size_t z : kSizes) {
    if (z <= max_size) {
      sizes.push_back(z);
    }
  }
  size_t n = sizes.size() * peers.size();
  std::vector<std::vector<uint8_t>> out(n), in(n);
  std::vector<ofi::Request> sreq(n), rreq(n);
  for (size_t pi = 0; pi < peers.size(); ++pi) {
    for (size_t k = 0; k < sizes.size(); ++k) {
      size_t i = pi * sizes.size() + k;
      int p = peers[pi];
      in[i].assign(sizes[k] + 16, 0xee);  // room to spare: bytes must say
      post_recv(ep, p, 100 + k, in[i].data(), in[i].size(), rreq[i], dl);
      out[i].resize(sizes[k]);
      fill(out[i], c.rank, p, k + 1000 * wire);
    }
  }
  for (size_t i = 0; i < n; ++i) {
    int p = peers[i / sizes.size()];
    size_t k = i % sizes.size();
    post_send(ep, p, 100 + k, out[i].data(), out[i].size(), sreq[i], dl);
  }
  for (size_t i = 0; i < n; ++i) {
    int p = peers[i / sizes.size()];
    size_t k = i % sizes.size();
    wait_for(ep, rreq[i], dl, "a recv");
    wait_for(ep, sreq[i], dl, "a send");
    verify(
        in[i], rreq[i].bytes, sizes[k], p, c.rank, k + 1000 * wire,
        "size " + std::to_string(sizes[k]) + " from rank " + std::to_string(p));
    if (sreq[i].bytes != sizes[k]) {
      throw std::runtime_error("send reported " +
                               std::to_string(sreq[i].bytes) + " bytes");
    }
    if (rreq[i].peer != p) {
      throw std::runtime_error("request names the wrong peer");
    }
  }
  // Ordering on one tag: 64 messages whose first word is their sequence.
  constexpr int kSeq = 64;
  for (int p : peers) {
    std::vector<ofi::Request> rs(kSeq), ss(kSeq);
    std::vector<std::vector<uint32_t>> ib(kSeq, std::vector<uint32_t>(300)),
        ob(kSeq, std::vector<uint32_t>(300));
    for (int s = 0; s < kSeq; ++s) {
      post_recv(ep, p, 7, ib[s].data(), ib[s].size() * 4, rs[s], dl);
    }
    for (int s = 0; s < kSeq; ++s) {
      ob[s].assign(ob[s].size(), static_cast<uint32_t>(s));
      // Alternate small (injected) and larger sends: order must hold across.
      size_t bytes = (s % 2 == 0) ? 8 : ob[s].size() * 4;
      post_send(ep, p, 7, ob[s].data(), bytes, ss[s], dl);
    }
    for (int s = 0; s < kSeq; ++s) {
      wait_for(ep, rs[s], dl, "an ordered recv");
      wait_for(ep, ss[s], dl, "an ordered send");
      if (ib[s][0] != static_cast<uint32_t>(s) ||
          rs[s].bytes != ((s % 2 == 0) ? 8 : ib[s].size() * 4)) {
        throw std::runtime_error("tag 7 message " + std::to_string(s) +
                                 " from rank " + std::to_string(p) +
                                 " arrived out of order (got " +
                                 std::to_string(ib[s][0]) + ")");
      }
    }
  }
}

void flood(const Ctx& c, ofi::Endpoint& ep) {
  auto dl = Deadline::after(60000ms * jaccl::test::slowdown());
  int to = (c.rank + 1) % c.size;
  int from = (c.rank + c.size - 1) % c.size;
  constexpr size_t kMax = 20000;
  constexpr size_t kBytes = 1024;
  // How many the sender managed before EAGAIN is only known to it: first
  // post all receives (generously), then tell the count with a final message.
  std::vector<ofi::Request> rs(kMax), ss(kMax);
  std::vector<uint8_t> in(kMax * kBytes), out(kMax * kBytes);
  for (size_t i = 0; i < kMax; ++i) {
    for (size_t j = 0; j < kBytes; ++j) {
      out[i * kBytes + j] = pattern(c.rank, to, i, j);
    }
  }
  uint64_t count = 0;
  ofi::Request count_r;
  post_recv(ep, from, 2, &count, sizeof(count), count_r, dl);
  size_t posted_recv = 0;
  auto more_recvs = [&] {  // keep receives ahead of any sender
    while (posted_recv < kMax &&
           ep.post_recv(from, 1, &in[posted_recv * kBytes], kBytes,
                        rs[posted_recv])) {
      ++posted_recv;
    }
  };
  more_recvs();
  // The first message forms the connection (tcp;ofi_rxm says -FI_EAGAIN
  // meanwhile); then post without progressing until the provider pushes
  // back, and finish the rest progressing as a caller would.
  size_t sent = 0;
  int eagain = 0;
  post_send(ep, to, 1, &out[0], kBytes, ss[0], dl);
  wait_for(ep, ss[0], dl, "the first flood send");
  sent = 1;
  while (sent < kMax &&
         ep.post_send(to, 1, &out[sent * kBytes], kBytes, ss[sent])) {
    ++sent;
  }
  size_t before = sent;
  // The post that ended that loop said false: it counts. (The retry may
  // then go through at once if the peer drained meanwhile; counting only
  // the retries' refusals missed it: "EAGAIN 0 first after 10630 sends".)
  eagain = before < kMax ? 1 : 0;
  // No rank progresses before every rank has been refused: a peer that
  // drained its queue while this rank was still posting (a rank that
  // started late, or was descheduled) took all 20000 of shm's injected
  // sends without a refusal.
  char z = 0, all[64] = {};
  c.gather(&z, all, 1);
  while (sent < kMax) {
    if (ep.post_send(to, 1, &out[sent * kBytes], kBytes, ss[sent])) {
      ++sent;
    } else {
      ++eagain;
      more_recvs();
      ep.progress();
    }
    if (dl.expired()) {
      throw std::runtime_error("timed out flooding");
    }
  }
  uint64_t n = sent;
  ofi::Request nr;
  post_send(ep, to, 2, &n, sizeof(n), nr, dl);
  while (!count_r.done || !nr.done) {
    more_recvs();
    ep.progress();
    if (dl.expired()) {
      throw std::runtime_error("timed out in flood");
    }
  }
  for (size_t i = 0; i < count; ++i) {
    while (!rs[i].done) {
      more_recvs();
      ep.progress();
      if (dl.expired()) {
        throw std::runtime_error("timed out receiving flood message " +
                                 std::to_string(i));
      }
    }
    for (size_t j = 0; j < kBytes; ++j) {
      if (in[i * kBytes + j] != pattern(from, c.rank, i, j)) {
        throw std::runtime_error("flood message " + std::to_string(i) +
                                 " corrupt at byte " + std::to_string(j));
      }
    }
  }
  for (size_t i = 0; i < sent; ++i) {
    wait_for(ep, ss[i], dl, "a flood send");
  }
  std::cout << "EAGAIN " << eagain << " first after " << before
            << " sends; sent " << sent << ", received " << count << std::endl;
  // The receives beyond `count` stay posted; closing the endpoint cancels
  // them. Both ranks must be done receiving before either closes.
  c.gather(&z, all, 1);
}

void fdwake(const Ctx& c, ofi::Endpoint& ep) {
  auto dl = Deadline::after(30000ms * jaccl::test::slowdown());
  uint64_t v = 0;
  ofi::Request r;
  if (c.rank == 1) {
    post_recv(ep, 0, 9, &v, sizeof(v), r, dl);
    if (ep.wait_fd() < 0) {
      std::cout << "NO_WAIT_FD" << std::endl;
    }
  }
  char z = 0, all[64] = {};
  c.gather(&z, all, 1);  // rank 1's recv is posted
  if (c.rank == 0) {
    std::this_thread::sleep_for(200ms);
    v = 0x1234;
    post_send(ep, 1, 9, &v, sizeof(v), r, dl);
    wait_for(ep, r, dl, "the wake-up send");
  } else if (ep.wait_fd() >= 0) {
    bool woke = false;
    while (!woke && !dl.expired()) {
      if (!ep.try_wait()) {  // completions pending: progress instead
        ep.progress();
        woke = r.done;
        continue;
      }
      pollfd p{ep.wait_fd(), POLLIN, 0};
      if (poll(&p, 1, dl.poll_ms()) > 0) {
        ep.progress();
        woke = r.done;
      }
    }
    if (!woke || v != 0x1234) {
      throw std::runtime_error("the wait fd never reported the message");
    }
    std::cout << "WOKE" << std::endl;
  } else {
    wait_for(ep, r, dl, "the wake-up recv");
  }
  c.gather(&z, all, 1);
}

// Rank 0 sends 4 KiB where rank 1 posted 16 bytes: rank 1's completion is
// an FI_ETRUNC error, which must name rank 0.
void trunc(const Ctx& c, ofi::Endpoint& ep) {
  auto dl = Deadline::after(30000ms * jaccl::test::slowdown());
  std::vector<uint8_t> b(4096, 5);
  ofi::Request r;
  if (c.rank == 0) {
    post_send(ep, 1, 11, b.data(), b.size(), r, dl);
    wait_for(ep, r, dl, "the long send");
  } else if (c.rank == 1) {
    post_recv(ep, 0, 11, b.data(), 16, r, dl);
    wait_for(ep, r, dl, "the short recv");
    throw std::runtime_error("a truncated message completed without error");
  }
}

void pingpong(const Ctx& c, ofi::Endpoint& ep) {
  auto dl = Deadline::after(300000ms * jaccl::test::slowdown());
  int peer = 1 - c.rank;
  if (c.rank > 1) {
    return;
  }
  std::vector<uint8_t> buf(64u << 20, 1), rbuf(64u << 20);
  // Rank 0 times a few rounds and tells rank 1 how many to run so that each
  // size takes about TEST_OFI_BENCH_SECS (default 1).
  double budget = std::atof(env_or("TEST_OFI_BENCH_SECS", "1").c_str());
  auto agree = [&](double secs_per_round) {
    uint64_t n = 0;
    ofi::Request r;
    if (c.rank == 0) {
      n = static_cast<uint64_t>(std::max(3.0, budget / secs_per_round));
      post_send(ep, peer, 99, &n, sizeof(n), r, dl);
    } else {
      post_recv(ep, peer, 99, &n, sizeof(n), r, dl);
    }
    wait_for(ep, r, dl, "the iteration count");
    return n;
  };
  auto timed = [&](const std::function<void()>& round) {
    round();
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 5; ++i)
      round();
    double per =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
            .count() /
        5;
    uint64_t iters = agree(per);
    t0 = std::chrono::steady_clock::now();
    for (uint64_t i = 0; i < iters; ++i)
      round();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
               .count() /
           static_cast<double>(iters);
  };
  // Ping-pong, fi_pingpong's method: half a round trip per message, and the
  // rate n / half-round-trip.
  for (size_t n : {size_t(8), size_t(4096), size_t(65536), size_t(1u << 20),
                   size_t(4u << 20), size_t(16u << 20)}) {
    double per = timed([&] {
      ofi::Request s, r;
      if (c.rank == 0) {
        post_recv(ep, peer, 1, rbuf.data(), n, r, dl);
        post_send(ep, peer, 1, buf.data(), n, s, dl);
      } else {
        post_recv(ep, peer, 1, rbuf.data(), n, r, dl);
        wait_for(ep, r, dl, "ping");
        post_send(ep, peer, 1, buf.data(), n, s, dl);
      }
      wait_for(ep, r, dl, "pong");
      wait_for(ep, s, dl, "pong send");
    });
    if (c.rank == 0) {
      std::cout << "{\"kind\":\"pingpong\",\"bytes\":" << n
                << ",\"half_rtt_us\":" << per * 1e6 / 2
                << ",\"gbps\":" << double(n) / (per / 2) / 1e9 << "}"
                << std::endl;
    }
  }
  // Exchange: both ranks send 8 bytes at once and wait for the other's, as a
  // 2-rank all_sum does (a ping-pong never has both directions in flight).
  {
    double per = timed([&] {
      ofi::Request s, r;
      post_recv(ep, peer, 2, rbuf.data(), 8, r, dl);
      post_send(ep, peer, 2, buf.data(), 8, s, dl);
      wait_for(ep, r, dl, "exchange");
      wait_for(ep, s, dl, "exchange send");
    });
    if (c.rank == 0) {
      std::cout << "{\"kind\":\"exchange\",\"bytes\":8,\"us\":" << per * 1e6
                << "}" << std::endl;
    }
  }
  // Bandwidth: a window of messages in flight rank 0 -> rank 1, then a
  // 1-byte ack.
  for (size_t n :
       {size_t(65536), size_t(1u << 20), size_t(4u << 20), size_t(16u << 20)}) {
    constexpr int kWin = 4;
    double per = timed([&] {
      ofi::Request rq[kWin], ack;
      uint8_t a = 0;
      for (int w = 0; w < kWin; ++w) {
        size_t off = (static_cast<size_t>(w) * n) % (buf.size() - n + 1);
        if (c.rank == 0) {
          post_send(ep, peer, 3, buf.data() + off, n, rq[w], dl);
        } else {
          post_recv(ep, peer, 3, rbuf.data() + off, n, rq[w], dl);
        }
      }
      if (c.rank == 0) {
        post_recv(ep, peer, 4, &a, 1, ack, dl);
      }
      for (auto& q : rq)
        wait_for(ep, q, dl, "a window message");
      if (c.rank == 1) {
        post_send(ep, peer, 4, &a, 1, ack, dl);
      }
      wait_for(ep, ack, dl, "the ack");
    });
    if (c.rank == 0) {
      std::cout << "{\"kind\":\"stream\",\"bytes\":" << n
                << ",\"gbps\":" << (double(n) * kWin / per / 1e9) << "}"
                << std::endl;
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "exchange";
  Ctx c;
  c.rank = std::atoi(env_or("JACCL_RANK", "0").c_str());
  c.size = std::atoi(env_or("JACCL_SIZE", "1").c_str());
  try {
    c.gather = jaccl::test::dir_all_gather(env_or("TEST_SC_DIR", "/tmp"),
                                           c.rank, c.size, 60000ms);
    ofi::Options o;
    o.rank = c.rank;
    o.provider = env_or(("TEST_OFI_PROVIDER_" + std::to_string(c.rank)).c_str(),
                        env_or("TEST_OFI_PROVIDER", "tcp;ofi_rxm"));
    o.domain = env_or("TEST_OFI_DOMAIN", "");
    o.force_register = env_or("TEST_OFI_FORCE_REGISTER", "0") == "1";
    auto dom = ofi::Domain::open(o);
    int wires = mode == "threads"
                    ? std::atoi(env_or("TEST_OFI_WIRES", "3").c_str())
                    : 1;
    std::vector<std::unique_ptr<ofi::Endpoint>> eps;
    for (int w = 0; w < wires; ++w) {
      eps.push_back(dom->make_endpoint());
    }
    connect(c, eps);
    std::cout << "PROVIDER " << dom->provider() << " REGISTERS "
              << dom->registers() << " WAIT_FD " << (eps[0]->wait_fd() >= 0)
              << std::endl;
    if (mode == "exchange") {
      exchange(c, *eps[0], 0);
    } else if (mode == "flood") {
      flood(c, *eps[0]);
    } else if (mode == "threads") {
      std::vector<std::thread> ts;
      std::vector<std::string> errs(eps.size());
      for (size_t w = 0; w < eps.size(); ++w) {
        ts.emplace_back([&, w] {
          try {
            exchange(c, *eps[w], static_cast<int>(w), 1u << 20);
          } catch (const std::exception& e) {
            errs[w] = e.what();
          }
        });
      }
      for (auto& t : ts)
        t.join();
      for (auto& e : errs) {
        if (!e.empty())
          throw std::runtime_error(e);
      }
    } else if (mode == "die") {
      std::cout << "pid=" << ::getpid() << std::endl;
      std::raise(SIGKILL);
    } else if (mode == "fdwake") {
      fdwake(c, *eps[0]);
    } else if (mode == "trunc") {
      trunc(c, *eps[0]);
    } else if (mode == "pingpong") {
      pingpong(c, *eps[0]);
    } else if (mode != "cards") {
      std::cerr << "unknown mode " << mode << std::endl;
      return 2;
    }
    // Nobody closes an endpoint a peer still sends to (in `trunc` rank 1
    // has failed: no final all-gather).
    if (mode != "trunc") {
      char z = 0;
      std::vector<char> all(static_cast<size_t>(c.size));
      c.gather(&z, all.data(), 1);
    }
    std::cout << "OK" << std::endl;
    return 0;
  } catch (const jaccl::Error& e) {
    std::cout << "FAILED " << jaccl::to_string(e.kind()) << ": " << e.what()
              << std::endl;
    return 3;
  } catch (const std::exception& e) {
    std::cout << "FAILED other: " << e.what() << std::endl;
    return 4;
  }
}
