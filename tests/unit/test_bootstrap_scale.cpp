// Copyright 2026 the jaccl authors.
// The TCP star at scale, over real loopback sockets: thousands of thread
// ranks get correct results, the result coding round-trips and refuses
// garbage, a rank redials a handshake the coordinator broke off, and the
// limits that bite at scale (the open-file limit, the listen backlog) are
// named with what to raise. Deadlines only keep a broken build from hanging;
// nothing asserts timings.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <exception>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/tcp_star.h"
#include "bootstrap/tcp_star_limits.h"
#include "common/handshake.h"
#include "common/net.h"
#include "support/proc.h"

namespace jaccl::test {
namespace {

using namespace std::chrono_literals;
using detail::Millis;

std::string loopback() {
  return "127.0.0.1:" + std::to_string(free_loopback_port());
}

// Raises this process's soft open-file limit to the hard one; false when
// even that leaves fewer than `need`.
bool fd_room(rlim_t need) {
  rlimit rl{};
  ::getrlimit(RLIMIT_NOFILE, &rl);
  if (rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &rl);
  }
  return rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= need;
}

// What rank r contributes: a frame-like part (a common header, the rank, a
// per-rank nonce, zero padding), so the coded path is the one taken.
std::vector<char> part_of(int r, size_t n) {
  std::vector<char> p(n, 0);
  std::memcpy(p.data(), "jaccl-part", std::min<size_t>(n, 10));
  if (n >= 16) {
    std::memcpy(p.data() + 10, &r, sizeof(r));
    p[14] = static_cast<char>(r * 7 + 1);
  }
  return p;
}

// Runs `size` thread ranks through `calls` all-gathers of n bytes; returns
// the first error ("" when every rank got every part right).
std::string run_star(int size, size_t n, int calls) {
  const std::string address = loopback();
  std::vector<std::string> errors(static_cast<size_t>(size));
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(size));
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      try {
        auto fn = detail::make_tcp_star({r, size, address, "tok", 240s});
        std::vector<char> out(n * static_cast<size_t>(size));
        for (int c = 0; c < calls; ++c) {
          auto in = part_of(r + c, n);
          fn(in.data(), out.data(), n);
          for (int q = 0; q < size; ++q) {
            if (std::memcmp(out.data() + static_cast<size_t>(q) * n,
                            part_of(q + c, n).data(), n) != 0) {
              errors[static_cast<size_t>(r)] =
                  "rank " + std::to_string(r) + " call " + std::to_string(c) +
                  ": wrong part from rank " + std::to_string(q);
              return;
            }
          }
        }
        // A last call, so no rank closes while another still reads.
        char token = 0;
        std::vector<char> all(static_cast<size_t>(size));
        fn(&token, all.data(), 1);
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(r)] = e.what();
      }
    });
  }
  for (auto& t : threads) {
    t.join();
  }
  for (const auto& e : errors) {
    if (!e.empty()) {
      return e;
    }
  }
  return "";
}

TEST(BootstrapScale, StarServes4096ThreadRanks) {
  // Two sockets per rank in this one process, plus slack.
  if (!fd_room(2 * 4096 + 512)) {
    GTEST_SKIP() << "the open-file limit is below 8704 and cannot be raised";
  }
  EXPECT_EQ(run_star(4096, 16, 2), "");
}

TEST(BootstrapScale, StarServesLargerPartsAt512Ranks) {
  // 512 parts of 4 KiB: a 2 MiB result per rank, coded and in flight in
  // bounded batches.
  ASSERT_TRUE(fd_room(2 * 512 + 512));
  EXPECT_EQ(run_star(512, 4096, 2), "");
}

// ---- the result coding
// -------------------------------------------------------

std::vector<char> round_trip(const std::vector<char>& data, size_t part) {
  auto coded = detail::star::encode_parts(data.data(), part, data.size());
  std::vector<char> out(data.size(), 'x');
  std::string why;
  EXPECT_TRUE(
      detail::star::decode_parts(coded, part, out.data(), out.size(), &why))
      << why;
  return out;
}

TEST(StarCodec, RoundTrips) {
  std::mt19937 gen(7);
  for (size_t part : {1u, 3u, 8u, 56u, 256u, 4096u}) {
    for (size_t count : {1u, 2u, 17u, 300u}) {
      std::vector<char> random(part * count), frames(part * count);
      for (auto& c : random) {
        c = static_cast<char>(gen());
      }
      for (size_t r = 0; r < count; ++r) {
        auto p = part_of(static_cast<int>(r), part);
        std::memcpy(frames.data() + r * part, p.data(), part);
      }
      std::vector<char> zeros(part * count, 0), same(part * count, 'a');
      for (const auto* d : {&random, &frames, &zeros, &same}) {
        EXPECT_EQ(round_trip(*d, part), *d)
            << "part " << part << ", count " << count;
      }
    }
  }
}

// Fed piece by piece as a rank receives it (down to a byte at a time, so
// that run headers and literals are cut everywhere), the coding decodes
// exactly as it does whole.
TEST(StarCodec, DecodesInPieces) {
  std::mt19937 gen(11);
  for (size_t part : {1u, 8u, 64u, 256u}) {
    for (size_t count : {1u, 2u, 17u, 300u}) {
      std::vector<char> frames(part * count), random(part * count);
      for (size_t r = 0; r < count; ++r) {
        auto p = part_of(static_cast<int>(r), part);
        std::memcpy(frames.data() + r * part, p.data(), part);
      }
      for (auto& c : random) {
        c = static_cast<char>(gen());
      }
      for (const auto* d : {&frames, &random}) {
        auto coded = detail::star::encode_parts(d->data(), part, d->size());
        for (size_t piece : {size_t{1}, size_t{3}, size_t{7}, size_t{4096}}) {
          std::vector<char> out(d->size(), 'x');
          detail::star::PartsDecoder dec(out.data(), out.size(), part,
                                         coded.size());
          std::string why;
          for (size_t at = 0; at < coded.size(); at += piece) {
            ASSERT_TRUE(dec.feed(coded.data() + at,
                                 std::min(piece, coded.size() - at), &why))
                << why;
          }
          EXPECT_TRUE(dec.finish(&why)) << why;
          EXPECT_EQ(out, *d) << "part " << part << ", count " << count
                             << ", pieces of " << piece;
        }
      }
    }
  }
}

// Malformed input is refused fed a byte at a time as it is whole, and so is
// more input than the reply announced.
TEST(StarCodec, PiecesRefuseMalformedInput) {
  for (std::vector<uint8_t> bad : {std::vector<uint8_t>{65, 0},
                                   {0, 5, 1, 2},
                                   {60, 0},
                                   {0x80},
                                   {},
                                   {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                                    0xff, 0xff, 0xff, 0x7f, 0}}) {
    std::vector<char> out(64, 0);
    detail::star::PartsDecoder dec(out.data(), 64, 16, bad.size());
    std::string why;
    bool ok = true;
    for (size_t at = 0; at < bad.size() && ok; ++at) {
      ok = dec.feed(bad.data() + at, 1, &why);
    }
    EXPECT_FALSE(ok && dec.finish(&why)) << bad.size() << " bytes";
    EXPECT_FALSE(why.empty());
  }
  const std::vector<uint8_t> ok = {64, 0};
  std::vector<char> out(64, 'x');
  detail::star::PartsDecoder dec(out.data(), 64, 16, 1);
  std::string why;
  EXPECT_TRUE(dec.feed(ok.data(), 1, &why)) << why;
  EXPECT_FALSE(dec.feed(ok.data() + 1, 1, &why));
  EXPECT_NE(why.find("announced"), std::string::npos) << why;
}

// Past the first part, whole runs of the short shape take a faster path;
// it must refuse exactly what the byte-at-a-time decoding refuses, and
// decode what it accepts to the same bytes.
TEST(StarCodec, ShortRunsDecodeAsTheGeneralPath) {
  auto decode = [](const std::vector<uint8_t>& c, size_t piece,
                   std::vector<char>* out, std::string* why) {
    out->assign(64, 'x');
    detail::star::PartsDecoder dec(out->data(), 64, 16, c.size());
    for (size_t at = 0; at < c.size(); at += piece) {
      if (!dec.feed(c.data() + at, std::min(piece, c.size() - at), why)) {
        return false;
      }
    }
    return dec.finish(why);
  };
  const std::vector<std::vector<uint8_t>> cases = {
      {16, 0, 16, 2, 1, 2, 30, 0},      // well formed
      {16, 0, 48, 0},                   // well formed: one run of 3 parts
      {16, 0, 16, 0, 16, 0, 16, 1, 5},  // one literal byte past the end
      {16, 0, 17, 0, 31, 0},            // a run longer than a part, fine
      {16, 0, 49, 0},                   // unchanged bytes past the end
      {16, 0, 8, 9, 1, 2},              // a literal the input lacks
      {16, 0, 16, 0x80},                // a count cut short
  };
  for (const auto& c : cases) {
    std::vector<char> whole, bytes;
    std::string why_whole, why_bytes;
    const bool ok_whole = decode(c, c.size() + 1, &whole, &why_whole);
    const bool ok_bytes = decode(c, 1, &bytes, &why_bytes);
    EXPECT_EQ(ok_whole, ok_bytes)
        << c.size() << " bytes: " << why_whole << " / " << why_bytes;
    if (ok_whole && ok_bytes) {
      EXPECT_EQ(whole, bytes);
    } else {
      EXPECT_FALSE(why_whole.empty());
    }
  }
}

TEST(StarCodec, FramesShrink) {
  std::vector<char> frames(256 * 1024);
  for (size_t r = 0; r < 1024; ++r) {
    auto p = part_of(static_cast<int>(r), 256);
    std::memcpy(frames.data() + r * 256, p.data(), 256);
  }
  auto coded = detail::star::encode_parts(frames.data(), 256, frames.size());
  EXPECT_LT(coded.size(), frames.size() / 4);
}

TEST(StarCodec, RefusesMalformedInput) {
  std::vector<char> out(64);
  std::string why;
  auto bad = [&](std::vector<uint8_t> coded) {
    why.clear();
    EXPECT_FALSE(
        detail::star::decode_parts(coded, 16, out.data(), out.size(), &why));
    EXPECT_FALSE(why.empty());
  };
  bad({});                                  // decodes to 0 of 64 bytes
  bad({0x80});                              // truncated varint
  bad({65, 0});                             // a zero run past the end
  bad({0, 5, 1, 2});                        // literal longer than the input
  bad({60, 0});                             // short of the result
  bad({0xff, 0xff, 0xff, 0xff, 0xff, 0xff,  // varint of more than 64 bits
       0xff, 0xff, 0xff, 0xff, 0x7f, 0});
  std::vector<uint8_t> ok = {64, 0};
  EXPECT_TRUE(detail::star::decode_parts(ok, 16, out.data(), 64, &why)) << why;
}

TEST(StarWire, FlagsRoundTripAndUnknownOnesAreRefused) {
  auto req = detail::star::encode_request(4, detail::star::kAcceptsCoded);
  EXPECT_EQ(detail::star::decode_request(req), 4u);
  EXPECT_EQ(detail::star::request_flags(req), detail::star::kAcceptsCoded);
  std::string why;
  auto rep = detail::star::encode_reply(
      {detail::star::Status::Ok, ErrorKind::Internal, 9, detail::star::kCoded});
  auto h = detail::star::decode_reply(rep, &why);
  ASSERT_TRUE(h) << why;
  EXPECT_EQ(h->flags, detail::star::kCoded);
  rep[12] = 6;  // unknown flag bits
  EXPECT_FALSE(detail::star::decode_reply(rep, &why));
  EXPECT_NE(why.find("flags"), std::string::npos);
}

// An older rank (no kAcceptsCoded) gets the plain result even where the
// others get it coded.
TEST(StarWire, RankWithoutCodingGetsThePlainResult) {
  const int size = 128;
  const size_t n = 256;  // 32 KiB result: coded for the others
  const std::string a = loopback();
  auto r0 = detail::make_tcp_star({0, size, a, "", 60s});
  std::vector<std::string> errors(size);
  std::vector<std::thread> ts;
  std::vector<char> out0(n * size);
  ts.emplace_back([&] {
    try {
      auto in = part_of(0, n);
      r0(in.data(), out0.data(), n);
    } catch (const std::exception& e) {
      errors[0] = e.what();
    }
  });
  for (int r = 2; r < size; ++r) {
    ts.emplace_back([&, r] {
      try {
        auto fn = detail::make_tcp_star({r, size, a, "", 60s});
        std::vector<char> out(n * size);
        auto in = part_of(r, n);
        fn(in.data(), out.data(), n);
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  }
  // Rank 1 by hand, as a jaccl that predates the coding would speak.
  auto addr = detail::resolve(detail::parse_host_port(a, "test"));
  auto dl = detail::Deadline::after(60s);
  auto fd = detail::connect_with_retry(addr, dl, {}, [](int, int) {});
  detail::Hello h;
  h.rank = 1;
  h.size = size;
  h.nonce = detail::random_nonce();
  detail::client_handshake(fd.get(), h, "", dl, {});
  auto req = detail::star::encode_request(n);
  detail::send_all(fd.get(), req.data(), req.size(), dl, {});
  auto in = part_of(1, n);
  detail::send_all(fd.get(), in.data(), n, dl, {});
  std::array<uint8_t, detail::star::kReplyBytes> head{};
  detail::recv_all(fd.get(), head.data(), head.size(), dl, {});
  std::string why;
  auto rep = detail::star::decode_reply(head, &why);
  ASSERT_TRUE(rep) << why;
  EXPECT_EQ(rep->flags, 0u);
  ASSERT_EQ(rep->length, n * size);
  std::vector<char> got(n * size);
  detail::recv_all(fd.get(), got.data(), got.size(), dl, {});
  for (auto& t : ts) {
    t.join();
  }
  for (const auto& e : errors) {
    EXPECT_EQ(e, "");
  }
  EXPECT_EQ(got, out0);
  for (int q = 0; q < size; ++q) {
    EXPECT_EQ(std::memcmp(got.data() + q * n, part_of(q, n).data(), n), 0);
  }
}

// ---- a handshake broken off
// ---------------------------------------------------

TEST(StarRedial, RankDialsAgainWhenTheCoordinatorDropsItsHandshake) {
  const int port = free_loopback_port();
  const std::string a = "127.0.0.1:" + std::to_string(port);
  auto addr = detail::resolve(detail::parse_host_port(a, "test"));
  // A listener that takes the first connection, reads its hello and hangs
  // up before the verdict, as an overloaded coordinator that expired it.
  auto first = detail::listen_tcp(addr, 8);
  std::string err1;
  std::vector<char> out1(8);
  std::thread r1([&] {
    try {
      auto fn = detail::make_tcp_star({1, 2, a, "", 60s});
      fn("r1r1", out1.data(), 4);
    } catch (const std::exception& e) {
      err1 = e.what();
    }
  });
  {
    pollfd p{first.get(), POLLIN, 0};
    ASSERT_EQ(::poll(&p, 1, 60000), 1);
    detail::Fd c(::accept(first.get(), nullptr, nullptr));
    ASSERT_TRUE(c.valid());
    std::array<uint8_t, detail::kHelloBytes> hello{};
    detail::recv_all(c.get(), hello.data(), hello.size(),
                     detail::Deadline::after(60s), {});
  }  // closed: the rank sees EOF in the middle of its handshake
  first.reset();
  auto r0 = detail::make_tcp_star({0, 2, a, "", 60s});
  std::vector<char> out0(8);
  r0("r0r0", out0.data(), 4);
  r1.join();
  EXPECT_EQ(err1, "");
  EXPECT_EQ(std::string(out1.begin(), out1.end()), "r0r0r1r1");
  EXPECT_EQ(std::string(out0.begin(), out0.end()), "r0r0r1r1");
}

// ---- limits named
// --------------------------------------------------------------

// Runs body in a child process whose open-file limit is `limit`; returns
// what it wrote to its pipe (the error text, or "no error").
std::string in_child_with_fd_limit(rlim_t limit,
                                   const std::function<std::string()>& body) {
  int pfd[2];
  EXPECT_EQ(::pipe(pfd), 0);
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(pfd[0]);
    rlimit rl{limit, limit};
    std::string msg;
    if (::setrlimit(RLIMIT_NOFILE, &rl) != 0) {
      msg = "setrlimit failed";
    } else {
      try {
        msg = body();
      } catch (const Error& e) {
        msg = std::string(to_string(e.kind())) + ": " + e.what();
      } catch (const std::exception& e) {
        msg = std::string("other: ") + e.what();
      }
    }
    [[maybe_unused]] auto k = ::write(pfd[1], msg.data(), msg.size());
    ::_exit(0);
  }
  ::close(pfd[1]);
  std::string out;
  char buf[4096];
  for (ssize_t k; (k = ::read(pfd[0], buf, sizeof(buf))) > 0;) {
    out.append(buf, static_cast<size_t>(k));
  }
  ::close(pfd[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return out;
}

TEST(StarLimits, CoordinatorNamesAnOpenFileLimitTooLowForTheJob) {
  const std::string a = loopback();
  std::string msg = in_child_with_fd_limit(64, [&] {
    detail::make_tcp_star({0, 1000, a, "", 5s});
    return std::string("no error");
  });
  EXPECT_NE(msg.find("open files"), std::string::npos) << msg;
  EXPECT_NE(msg.find("ulimit -n"), std::string::npos) << msg;
  EXPECT_NE(msg.find("1000 ranks"), std::string::npos) << msg;
}

TEST(StarLimits, RankOutOfDescriptorsFailsAtOnceNamingTheLimit) {
  const std::string a = loopback();
  auto listener = detail::listen_tcp(
      detail::resolve(detail::parse_host_port(a, "test")), 8);
  std::string msg = in_child_with_fd_limit(32, [&] {
    std::vector<int> held;
    for (int fd; (fd = ::dup(0)) >= 0;) {
      held.push_back(fd);  // every descriptor the limit allows
    }
    auto fn = detail::make_tcp_star({1, 2, a, "", 60s});
    std::vector<char> out(8);
    fn("r1r1", out.data(), 4);
    return std::string("no error");
  });
  EXPECT_EQ(msg.rfind("Io: ", 0), 0u) << msg;  // not a 60 s timeout
  EXPECT_NE(msg.find("ran out of file descriptors"), std::string::npos) << msg;
  EXPECT_NE(msg.find("ulimit -n"), std::string::npos) << msg;
}

TEST(StarLimits, CoordinatorRaisesTheSoftLimitWithinTheHardOne) {
  const std::string a = loopback();
  std::string msg = in_child_with_fd_limit(4096, [&] {
    rlimit rl{64, 4096};
    ::setrlimit(RLIMIT_NOFILE, &rl);
    detail::make_tcp_star({0, 1000, a, "", 5s});
    ::getrlimit(RLIMIT_NOFILE, &rl);
    return "soft " + std::to_string(rl.rlim_cur);
  });
  ASSERT_EQ(msg.rfind("soft ", 0), 0u) << msg;
  EXPECT_GE(std::stoul(msg.substr(5)), 1000u) << msg;
}

TEST(StarLimits, BacklogBelowTheRanksIsNamed) {
  detail::star::ListenSysctls s;
  s.somaxconn = 128;
  s.max_syn_backlog = 4096;
  s.syncookies = 1;
  std::string note = detail::star::backlog_note(1024, s);
  EXPECT_NE(note.find("net.core.somaxconn is 128"), std::string::npos) << note;
  EXPECT_NE(note.find("1023"), std::string::npos) << note;
  s.somaxconn = 4096;
  EXPECT_EQ(detail::star::backlog_note(1024, s), "");
  s.syncookies = 0;
  s.max_syn_backlog = 512;
  note = detail::star::backlog_note(1024, s);
  EXPECT_NE(note.find("tcp_max_syn_backlog"), std::string::npos) << note;
  EXPECT_GE(detail::star::listen_backlog(5000), 5000);
}

TEST(StarLimits, ResourceErrnosSayWhatToRaise) {
  EXPECT_NE(detail::resource_hint(EMFILE).find("ulimit -n"), std::string::npos);
  EXPECT_NE(detail::resource_hint(ENFILE).find("fs.file-max"),
            std::string::npos);
  EXPECT_NE(detail::resource_hint(EADDRNOTAVAIL).find("ip_local_port_range"),
            std::string::npos);
  EXPECT_EQ(detail::resource_hint(ECONNREFUSED), "");
  EXPECT_TRUE(detail::out_of_resources(EMFILE));
  EXPECT_FALSE(detail::out_of_resources(ECONNREFUSED));
}

}  // namespace
}  // namespace jaccl::test
