// Copyright 2026 the jaccl authors.
// The libfabric layer (src/transport/ofi) on its own: provider choice and its
// errors, cards, and real processes (tests/workers/ofi_node) exchanging
// tagged messages over tcp;ofi_rxm (loopback) and shm, with and without the
// force_register knob that runs the registration path verbs and efa need.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "jaccl/error.h"
#include "support/fixtures.h"
#include "support/proc.h"
#include "transport/ofi/ofi_fabric.h"
#include "transport/ofi/shm_lock_rescue.h"
#include "transport/ofi/shm_regions.h"

namespace {

using namespace std::chrono_literals;
using namespace jaccl::test;
namespace ofi = jaccl::detail::ofi;

#define REQUIRE_OFI()                                          \
  ASSERT_TRUE(ofi::built())                                    \
      << "this build has no libfabric: install libfabric-dev " \
         "(scripts/setup.sh) and reconfigure"

struct Provider {
  const char* name;
  const char* domain;  // tcp: the loopback interface, never another address
};
const Provider kTcp{"tcp;ofi_rxm", "lo"};
const Provider kShm{"shm", ""};

std::string what_of(const std::function<void()>& f, jaccl::ErrorKind* kind) {
  try {
    f();
  } catch (const jaccl::Error& e) {
    *kind = e.kind();
    return e.what();
  }
  return "";
}

ofi::Options opts(const Provider& p, int rank = 0, bool force = false) {
  ofi::Options o;
  o.rank = rank;
  o.provider = p.name;
  o.domain = p.domain;
  o.force_register = force;
  return o;
}

// ---- in one process ------------------------------------------------------

void note_signal(int) {}

// Debian's libfabric pulls in libinfinipath, whose constructor takes SIGINT
// and SIGILL (and exits on them): loading libfabric must leave the process's
// handlers as they were. Each test runs in its own process, so this one is
// the first to load it.
TEST(OfiLayer, LoadingLibfabricKeepsTheProcessSignalHandlers) {
  struct sigaction mine {
  }, old_int{}, old_ill{};
  mine.sa_handler = note_signal;
  ASSERT_EQ(::sigaction(SIGINT, &mine, &old_int), 0);
  ASSERT_EQ(::sigaction(SIGILL, &mine, &old_ill), 0);
  EXPECT_FALSE(ofi::available_providers().empty());
  struct sigaction now {};
  ::sigaction(SIGINT, nullptr, &now);
  EXPECT_EQ(now.sa_handler, &note_signal) << "SIGINT handler replaced";
  ::sigaction(SIGILL, nullptr, &now);
  EXPECT_EQ(now.sa_handler, &note_signal) << "SIGILL handler replaced";
  ::sigaction(SIGINT, &old_int, nullptr);
  ::sigaction(SIGILL, &old_ill, nullptr);
}

TEST(OfiLayer, ListsTheSoftwareProviders) {
  REQUIRE_OFI();
  auto names = ofi::available_providers();
  EXPECT_NE(std::find(names.begin(), names.end(), "tcp;ofi_rxm"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "shm"), names.end());
  // This machine has no RDMA device; whatever is reported must be one of
  // the hardware providers and among those listed.
  auto hw = ofi::hardware_provider();
  if (!hw.empty()) {
    EXPECT_NE(std::find(names.begin(), names.end(), hw), names.end()) << hw;
  }
  for (const auto& n : names) {
    EXPECT_NE(n.rfind("verbs", 0), 0u) << "verbs listed without a device";
  }
}

TEST(OfiLayer, UnknownProviderIsAConfigErrorListingWhatExists) {
  REQUIRE_OFI();
  jaccl::ErrorKind kind{};
  ofi::Options o;
  o.rank = 2;
  o.provider = "nosuchprov";
  auto w = what_of([&] { ofi::Domain::open(o); }, &kind);
  EXPECT_EQ(kind, jaccl::ErrorKind::Config);
  EXPECT_NE(w.find("rank 2"), std::string::npos) << w;
  EXPECT_NE(w.find("'nosuchprov'"), std::string::npos) << w;
  EXPECT_NE(w.find("fi_getinfo returned"), std::string::npos) << w;
  EXPECT_NE(w.find("tcp;ofi_rxm"), std::string::npos) << w;
  EXPECT_NE(w.find("shm"), std::string::npos) << w;

  // A hardware provider with no device is just as absent.
  o.provider = "verbs;ofi_rxm";
  w = what_of([&] { ofi::Domain::open(o); }, &kind);
  EXPECT_EQ(kind, jaccl::ErrorKind::Config);
  EXPECT_NE(w.find("'verbs;ofi_rxm'"), std::string::npos) << w;
}

TEST(OfiLayer, UnknownDomainNamesTheDomainsThereAre) {
  REQUIRE_OFI();
  jaccl::ErrorKind kind{};
  ofi::Options o;
  o.provider = "tcp;ofi_rxm";
  o.domain = "mlx5_9";
  auto w = what_of([&] { ofi::Domain::open(o); }, &kind);
  EXPECT_EQ(kind, jaccl::ErrorKind::Config);
  EXPECT_NE(w.find("'mlx5_9'"), std::string::npos) << w;
  EXPECT_NE(w.find("its domains: tcp;ofi_rxm (domains "), std::string::npos)
      << w;
  EXPECT_NE(w.find(" lo"), std::string::npos) << w;
}

TEST(OfiLayer, OpensTcpAndShmAndReportsNames) {
  REQUIRE_OFI();
  for (const auto& p : {kTcp, kShm}) {
    for (bool force : {false, true}) {
      auto d = ofi::Domain::open(opts(p, 0, force));
      EXPECT_EQ(d->provider(), p.name);
      if (*p.domain != '\0') {
        EXPECT_EQ(d->domain(), p.domain);
      }
      EXPECT_FALSE(d->fabric().empty());
      // tcp and shm need no registration; the knob turns it on.
      EXPECT_EQ(d->registers(), force);
      auto e1 = d->make_endpoint();
      auto e2 = d->make_endpoint();  // one per wire on one domain
      auto c1 = e1->card(), c2 = e2->card();
      EXPECT_EQ(c1.provider, p.name);
      EXPECT_EQ(c1.fabric, d->fabric());
      EXPECT_FALSE(c1.address.empty());
      EXPECT_NE(c1.address, c2.address);
    }
  }
}

// The shm lock rescue (shm_lock_rescue.h) reads libfabric's region header:
// it must recognise the regions of this machine's libfabric and refuse
// anything else.
// Two shm endpoints of this process (ranks 0 and 1) and their regions.
struct ShmPair {
  std::shared_ptr<ofi::Domain> d0 = ofi::Domain::open(opts(kShm, 0));
  std::shared_ptr<ofi::Domain> d1 = ofi::Domain::open(opts(kShm, 1));
  std::unique_ptr<ofi::Endpoint> a = d0->make_endpoint();
  std::unique_ptr<ofi::Endpoint> b = d1->make_endpoint();
  std::vector<std::string> regions() const {
    return {ofi::shm_region_of_address(a->card().address),
            ofi::shm_region_of_address(b->card().address)};
  }
};

TEST(OfiLayer, ShmLockRescueKnowsThisLibfabricsRegionsAndNothingElse) {
  REQUIRE_OFI();
  if (!ofi::shm_lock_rescue_built())
    GTEST_SKIP() << "built with -DJACCL_OFI_SHM_LOCK_RESCUE=OFF";
  ASSERT_TRUE(ofi::shm_lock_rescue_enabled())
      << "this machine's libfabric is not one whose shm region layout the "
         "rescue knows (1.17 to 1.19): update shm_lock_rescue.cpp or this "
         "test";
  ShmPair pair;
  const std::string ra = pair.regions()[0], rb = pair.regions()[1];
  EXPECT_EQ(ra.rfind(std::to_string(::getpid()) + ofi::kShmRegionTag, 0), 0u)
      << ra;
  EXPECT_NE(ra, rb);
  EXPECT_EQ(ofi::ShmLockRescue(0, {ra, rb}).watched(), 2u)
      << "this libfabric's shm regions have a header jaccl does not know";
  EXPECT_EQ(ofi::ShmLockRescue(0, {"1:jaccl-0000000000000000"}).watched(), 0u);
  // Not jaccl's, or not an shm address.
  EXPECT_EQ(ofi::shm_region_of_address({'f', 'i', '_', 's', 'h', 'm', ':', '/',
                                        '/', '7', ':', '1', 0}),
            "");
  auto tcp = ofi::Domain::open(opts(kTcp))->make_endpoint();
  EXPECT_EQ(ofi::shm_region_of_address(tcp->card().address), "");
  // Another version's layout, or another owner.
  alignas(8) unsigned char head[64] = {};
  head[0] = 6;
  EXPECT_EQ(ofi::shm_region_lock(head, 0), nullptr);
  head[0] = 4;
  EXPECT_NE(ofi::shm_region_lock(head, 0), nullptr);
  EXPECT_EQ(ofi::shm_region_lock(head, 12345), nullptr);
}

// Armed, the rescue leaves the locks of live traffic alone (they are held
// for microseconds), and every message arrives.
TEST(OfiLayer, ShmLockRescueLeavesLiveTrafficAlone) {
  REQUIRE_OFI();
  if (!ofi::shm_lock_rescue_enabled())
    GTEST_SKIP() << "no shm lock rescue in this build or for this libfabric";
  ShmPair pair;
  auto& a = pair.a;
  auto& b = pair.b;
  a->insert_peers({a->card(), b->card()}, {0, 1});
  b->insert_peers({a->card(), b->card()}, {0, 1});
  ofi::ShmLockRescue rescue(0, pair.regions());
  ASSERT_EQ(rescue.watched(), 2u);
  rescue.arm();
  std::vector<std::string> errs(2);
  std::vector<std::thread> ts;
  for (int side = 0; side < 2; ++side) {
    ts.emplace_back([&, side] {
      try {
        auto& ep = side == 0 ? *a : *b;
        const int peer = 1 - side;
        // Side 0 says when to stop (the top bit), so both sides end on
        // the same round.
        constexpr uint64_t kLast = uint64_t{1} << 63;
        const auto until = std::chrono::steady_clock::now() + 1500ms;
        auto dl = jaccl::detail::Deadline::after(60000ms);
        for (uint64_t i = 0;; ++i) {
          const bool last =
              side == 0 && std::chrono::steady_clock::now() >= until;
          uint64_t out = i | (last ? kLast : 0), in = ~i;
          ofi::Request s, r;
          while (!ep.post_recv(peer, 1, &in, sizeof in, r))
            ep.progress();
          while (!ep.post_send(peer, 1, &out, sizeof out, s))
            ep.progress();
          while (!(s.done && r.done) && !dl.expired())
            ep.progress();
          if (!(s.done && r.done) || (in & ~kLast) != i)
            throw std::runtime_error("message " + std::to_string(i));
          if (last || (in & kLast) != 0)
            break;
        }
      } catch (const std::exception& e) {
        errs[static_cast<size_t>(side)] = e.what();
      }
    });
  }
  for (auto& t : ts)
    t.join();
  EXPECT_EQ(errs[0], "");
  EXPECT_EQ(errs[1], "");
  EXPECT_EQ(rescue.released(), 0);
}

TEST(OfiLayer, ShmLockRescueKnowsOnlyTheVersionsItWasCheckedOn) {
  auto v = [](uint32_t major, uint32_t minor) { return major << 16 | minor; };
  EXPECT_FALSE(ofi::shm_lock_rescue_knows(v(1, 16)));
  EXPECT_TRUE(ofi::shm_lock_rescue_knows(v(1, 17)));
  EXPECT_TRUE(ofi::shm_lock_rescue_knows(v(1, 19)));
  EXPECT_FALSE(ofi::shm_lock_rescue_knows(v(1, 20)));
  EXPECT_FALSE(ofi::shm_lock_rescue_knows(v(2, 0)));
}

// A child that makes an shm region the way libfabric 1.17 names and heads
// it (only the header fields up to the lock: "<pid>:jaccl-<nonce>", version
// 4, its pid, a process-shared spin lock), optionally takes the lock, and
// then stops itself or waits to be killed.
struct RegionOwner {
  pid_t pid = -1;
  std::string name;
  RegionOwner() = default;
  RegionOwner(RegionOwner&& o) noexcept
      : pid(std::exchange(o.pid, -1)), name(std::move(o.name)) {
    o.name.clear();
  }
  RegionOwner& operator=(RegionOwner&&) = delete;
  static RegionOwner start(bool lock, bool stop) {
    int p[2];
    if (::pipe(p) != 0)
      return {};
    const pid_t child = ::fork();
    if (child == 0) {
      ::close(p[0]);
      const std::string n = ofi::shm_region_name(::getpid(), 0x7e57);
      const int fd = ::shm_open(("/" + n).c_str(), O_RDWR | O_CREAT, 0600);
      if (fd < 0 || ::ftruncate(fd, 4096) != 0)
        ::_exit(2);
      auto* head = static_cast<unsigned char*>(
          ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
      if (head == MAP_FAILED)
        ::_exit(2);
      head[0] = 4;
      const int me = ::getpid();
      std::memcpy(head + 4, &me, sizeof me);
      auto* l = ofi::shm_region_lock(head, me);
      if (l == nullptr)
        ::_exit(2);
      pthread_spin_init(l, PTHREAD_PROCESS_SHARED);
      if (lock)
        pthread_spin_lock(l);
      char c = 'R';
      (void)!::write(p[1], &c, 1);
      if (stop)
        ::raise(SIGSTOP);
      for (;;)
        ::pause();
    }
    ::close(p[1]);
    char c = 0;
    pollfd pfd{p[0], POLLIN, 0};
    const bool ready =
        ::poll(&pfd, 1, 10000) == 1 && ::read(p[0], &c, 1) == 1 && c == 'R';
    ::close(p[0]);
    RegionOwner o;
    o.pid = child;
    o.name = ofi::shm_region_name(child, 0x7e57);
    if (!ready) {
      o.kill();
      o.pid = -1;
    }
    return o;
  }
  void kill() {
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
      pid = -1;
    }
  }
  ~RegionOwner() {
    kill();
    if (!name.empty())
      ::shm_unlink(("/" + name).c_str());
  }
};

TEST(OfiLayer, HolderStatesComeFromProc) {
  EXPECT_EQ(ofi::holder_state(::getpid(), ofi::process_start(::getpid())),
            ofi::HolderState::Running);
  EXPECT_EQ(ofi::holder_state(::getpid(), 0), ofi::HolderState::Unknown);
  // Another start time: the pid was reused.
  EXPECT_EQ(ofi::holder_state(::getpid(), ofi::process_start(::getpid()) + 1),
            ofi::HolderState::Gone);
  RegionOwner stopped = RegionOwner::start(false, true);
  ASSERT_GT(stopped.pid, 0);
  const auto start = ofi::process_start(stopped.pid);
  ASSERT_NE(start, 0u);
  auto dl = jaccl::detail::Deadline::after(10000ms);
  while (ofi::holder_state(stopped.pid, start) != ofi::HolderState::Stopped &&
         !dl.expired())
    std::this_thread::sleep_for(1ms);
  EXPECT_EQ(ofi::holder_state(stopped.pid, start), ofi::HolderState::Stopped);
  const pid_t was = stopped.pid;
  ::kill(was, SIGKILL);
  // A zombie (not reaped yet) is gone, and so is a reaped pid.
  dl = jaccl::detail::Deadline::after(10000ms);
  while (ofi::holder_state(was, start) != ofi::HolderState::Gone &&
         !dl.expired())
    std::this_thread::sleep_for(1ms);
  EXPECT_EQ(ofi::holder_state(was, start), ofi::HolderState::Gone);
  stopped.kill();
  EXPECT_EQ(ofi::holder_state(was, start), ofi::HolderState::Gone);
}

// A stopped process is alive and may hold the lock: the rescue never takes
// it, even though another owner has died; once the stopped one is killed,
// the lock is released.
TEST(OfiLayer, ShmLockRescueNeverRobsAStoppedProcess) {
  if (!ofi::shm_lock_rescue_built())
    GTEST_SKIP() << "built with -DJACCL_OFI_SHM_LOCK_RESCUE=OFF";
  RegionOwner holder = RegionOwner::start(/*lock=*/true, /*stop=*/true);
  RegionOwner other = RegionOwner::start(false, false);
  ASSERT_GT(holder.pid, 0);
  ASSERT_GT(other.pid, 0);
  ofi::ShmLockRescue rescue(0, {holder.name, other.name});
  ASSERT_EQ(rescue.watched(), 2u);
  other.kill();  // a possible holder is dead; the stopped one holds it
  rescue.arm();
  std::this_thread::sleep_for(3 * ofi::kStuckAfter);
  EXPECT_EQ(rescue.released(), 0) << "the lock of a stopped process was taken";
  holder.kill();
  auto dl = jaccl::detail::Deadline::after(20000ms);
  while (rescue.released() == 0 && !dl.expired())
    std::this_thread::sleep_for(10ms);
  EXPECT_EQ(rescue.released(), 1)
      << "the lock its killed holder left was not released";
}

// Owners alive and running: a lock held for seconds is left alone (nobody
// who could hold it has died).
TEST(OfiLayer, ShmLockRescueLeavesALockOfLiveOwnersAlone) {
  if (!ofi::shm_lock_rescue_built())
    GTEST_SKIP() << "built with -DJACCL_OFI_SHM_LOCK_RESCUE=OFF";
  RegionOwner holder = RegionOwner::start(/*lock=*/true, /*stop=*/false);
  ASSERT_GT(holder.pid, 0);
  ofi::ShmLockRescue rescue(0, {holder.name});
  ASSERT_EQ(rescue.watched(), 1u);
  rescue.arm();
  std::this_thread::sleep_for(3 * ofi::kStuckAfter);
  EXPECT_EQ(rescue.released(), 0);
}

TEST(OfiLayer, CardRoundTripsAndRejectsMalformedBytes) {
  ofi::Card c{
      "verbs;ofi_rxm", "IB-0xfe80000000000000", "mlx5_0", {0, 1, 2, 255, 0, 7}};
  auto bytes = c.encode();
  auto d = ofi::Card::decode(bytes, 3, 0);
  EXPECT_EQ(d.provider, c.provider);
  EXPECT_EQ(d.fabric, c.fabric);
  EXPECT_EQ(d.domain, c.domain);
  EXPECT_EQ(d.address, c.address);

  auto bad = [&](const std::string& b, const std::string& needle) {
    jaccl::ErrorKind kind{};
    auto w = what_of([&] { ofi::Card::decode(b, 3, 1); }, &kind);
    EXPECT_EQ(kind, jaccl::ErrorKind::Protocol) << w;
    EXPECT_NE(w.find("rank 1: the ofi card from rank 3 is malformed"),
              std::string::npos)
        << w;
    EXPECT_NE(w.find(needle), std::string::npos) << w;
  };
  for (size_t n = 0; n < bytes.size(); ++n) {  // every truncation
    bad(bytes.substr(0, n), "");
  }
  bad(bytes + "x", "bytes follow");
  std::string m = bytes;
  m[0] = 'X';
  bad(m, "magic");
  m = bytes;
  m[4] = 9;
  bad(m, "version 9");
  m = bytes;
  m[7] = '\n';  // inside the provider name
  bad(m, "printable");
  bad(ofi::Card{"shm", "shm", "shm", {}}.encode(), "address is empty");
  bad(ofi::Card{"", "f", "d", {1}}.encode(), "provider is empty");
}

TEST(OfiLayer, MismatchedCardsNameBothRanksAndValues) {
  REQUIRE_OFI();
  auto tcp = ofi::Domain::open(opts(kTcp, 0));
  auto shm = ofi::Domain::open(opts(kShm, 1));
  auto a = tcp->make_endpoint();
  auto b = shm->make_endpoint();
  jaccl::ErrorKind kind{};
  auto w = what_of(
      [&] {
        a->insert_peers({a->card(), b->card()}, {0, 1});
      },
      &kind);
  EXPECT_EQ(kind, jaccl::ErrorKind::Config);
  for (const std::string& s :
       {std::string("rank 0 uses provider 'tcp;ofi_rxm'"),
        std::string("rank 1 uses provider 'shm'"), tcp->fabric(),
        shm->fabric()}) {
    EXPECT_NE(w.find(s), std::string::npos) << s << " not in " << w;
  }
}

TEST(OfiLayer, PostsBeforeInsertPeersAreUsageErrors) {
  REQUIRE_OFI();
  auto d = ofi::Domain::open(opts(kShm));
  auto e = d->make_endpoint();
  ofi::Request r;
  char b[4] = {};
  jaccl::ErrorKind kind{};
  what_of([&] { e->post_send(0, 1, b, 4, r); }, &kind);
  EXPECT_EQ(kind, jaccl::ErrorKind::Usage);
}

// Two endpoints of one process, each driven by its own thread, talking to
// two endpoints of another domain: the wire-per-thread shape under TSan.
TEST(OfiLayer, EndpointPerWireFromSeparateThreads) {
  REQUIRE_OFI();
  for (bool force : {false, true}) {
    auto d0 = ofi::Domain::open(opts(kShm, 0, force));
    auto d1 = ofi::Domain::open(opts(kShm, 1, force));
    constexpr int kWires = 3;
    std::vector<std::unique_ptr<ofi::Endpoint>> a, b;
    for (int w = 0; w < kWires; ++w) {
      a.push_back(d0->make_endpoint());
      b.push_back(d1->make_endpoint());
      a[w]->insert_peers({a[w]->card(), b[w]->card()}, {0, 1});
      b[w]->insert_peers({a[w]->card(), b[w]->card()}, {0, 1});
    }
    std::vector<std::string> errs(2 * kWires);
    std::vector<std::thread> ts;
    for (int w = 0; w < kWires; ++w) {
      for (int side = 0; side < 2; ++side) {
        ts.emplace_back([&, w, side] {
          try {
            auto& ep = side == 0 ? *a[w] : *b[w];
            int peer = 1 - side;
            auto dl = jaccl::detail::Deadline::after(30000ms);
            for (size_t n :
                 {size_t(0), size_t(3), size_t(70000), size_t(1u << 20)}) {
              std::vector<uint8_t> out(n, static_cast<uint8_t>(w * 2 + side));
              std::vector<uint8_t> in(n + 1, 0);
              ofi::Request s, r;
              while (!ep.post_recv(peer, n, in.data(), in.size(), r)) {
                ep.progress();
              }
              while (!ep.post_send(peer, n, out.data(), n, s)) {
                ep.progress();
              }
              while (!(s.done && r.done) && !dl.expired()) {
                ep.progress();
              }
              if (!(s.done && r.done) || r.bytes != n ||
                  !std::all_of(in.begin(), in.begin() + n,
                               [&](uint8_t v) { return v == w * 2 + peer; })) {
                throw std::runtime_error("wire " + std::to_string(w) +
                                         " size " + std::to_string(n));
              }
            }
          } catch (const std::exception& e) {
            errs[static_cast<size_t>(w * 2 + side)] = e.what();
          }
        });
      }
    }
    for (auto& t : ts)
      t.join();
    for (auto& e : errs)
      EXPECT_EQ(e, "");
  }
}

// ---- real processes ------------------------------------------------------

struct Run {
  std::vector<ProcResult> rs;
  // libfabric's shm provider names each endpoint's region /dev/shm/<pid>:d:e
  // and unlinks it when the endpoint closes; what is left of the job's
  // processes (removed here) is a leak.
  std::vector<std::string> leftovers;
  std::string all() const { return all_output(rs); }
};

std::set<std::string> shm_names() {
  std::set<std::string> names;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/dev/shm", ec)) {
    names.insert(e.path().filename().string());
  }
  return names;
}

// before: what /dev/shm held before the job started. A region named after
// one of the job's pids that was already there belongs to an earlier,
// killed process whose pid was recycled (SIGKILLed ranks of the fault tests
// leave theirs), not to this job.
std::vector<std::string> shm_leftovers(const std::vector<pid_t>& pids,
                                       const std::set<std::string>& before) {
  std::vector<std::string> found;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/dev/shm", ec)) {
    auto name = e.path().filename().string();
    if (before.count(name) != 0) {
      continue;
    }
    for (pid_t p : pids) {
      if (name.rfind(std::to_string(p) + ":", 0) == 0) {
        found.push_back(name);
        std::filesystem::remove(e.path(), ec);
      }
    }
  }
  return found;
}

Run run_nodes(const std::string& mode, int n, const Provider& p, bool force,
              const std::map<int, std::string>& provider_of = {},
              const std::string& wires = "3") {
  TempDir dir;
  const std::set<std::string> before = shm_names();
  auto job = Job::start(worker_path("ofi_node"), {mode}, n, [&](int r) {
    auto env = clean_rank_env(r, n);
    env["TEST_SC_DIR"] = dir / "sc";
    env["TEST_OFI_PROVIDER"] = p.name;
    env["TEST_OFI_DOMAIN"] = p.domain;
    env["TEST_OFI_FORCE_REGISTER"] = force ? "1" : "0";
    env["TEST_OFI_WIRES"] = wires;
    auto it = provider_of.find(r);
    if (it != provider_of.end()) {
      env["TEST_OFI_PROVIDER_" + std::to_string(r)] = it->second;
      env["TEST_OFI_DOMAIN"] = "";
    }
    return env;
  });
  Run run{job.wait(120s * slowdown()), {}};
  std::vector<pid_t> pids;
  for (int r = 0; r < n; ++r) {
    pids.push_back(job.pid(r));
  }
  run.leftovers = shm_leftovers(pids, before);
  return run;
}

void expect_all_ok(const Run& run) {
  EXPECT_EQ(run.leftovers, std::vector<std::string>{}) << run.all();
  for (const auto& r : run.rs) {
    ASSERT_TRUE(r.exited_ok()) << run.all();
    ASSERT_NE(r.output.find("\nOK"), std::string::npos) << run.all();
  }
}

class OfiNodes : public ::testing::TestWithParam<std::tuple<Provider, bool>> {
 protected:
  const Provider& prov() const { return std::get<0>(GetParam()); }
  bool force() const { return std::get<1>(GetParam()); }
};

TEST_P(OfiNodes, AwkwardSizesBothWaysAndOrderPerTag) {
  REQUIRE_OFI();
  for (int n : {2, 3}) {
    auto run = run_nodes("exchange", n, prov(), force());
    expect_all_ok(run);
    std::string want = std::string("REGISTERS ") + (force() ? "1" : "0");
    EXPECT_NE(run.rs[0].output.find(want), std::string::npos) << run.all();
  }
}

TEST_P(OfiNodes, ManyInFlightPushBackAsFalseAndAllArrive) {
  REQUIRE_OFI();
  auto run = run_nodes("flood", 2, prov(), force());
  expect_all_ok(run);
  for (const auto& r : run.rs) {
    auto line = line_of(r.output, "EAGAIN ");
    // The provider's queue is bounded: posting without progress (no rank
    // progresses until every rank is refused) must end in `false` at some
    // point, and every message still arrives, in order.
    EXPECT_EQ(line.find("EAGAIN 0 "), std::string::npos) << run.all();
    EXPECT_NE(line.find("sent 20000, received 20000"), std::string::npos)
        << run.all();
  }
}

TEST_P(OfiNodes, EndpointPerWireThreadsAcrossProcesses) {
  REQUIRE_OFI();
  expect_all_ok(run_nodes("threads", 3, prov(), force()));
}

TEST_P(OfiNodes, TruncatedMessageIsAProtocolErrorNamingTheSender) {
  REQUIRE_OFI();
  auto run = run_nodes("trunc", 2, prov(), force());
  ASSERT_TRUE(run.rs[0].exited_ok()) << run.all();
  EXPECT_EQ(run.rs[1].exit_code, 3) << run.all();
  auto line = line_of(run.rs[1].output, "FAILED");
  EXPECT_NE(line.find("FAILED Protocol: [jaccl] rank 1: rank 0 sent a message "
                      "longer than the 16-byte receive"),
            std::string::npos)
      << run.all();
  EXPECT_NE(line.find("(peer rank 0)"), std::string::npos) << run.all();
  EXPECT_EQ(run.leftovers, std::vector<std::string>{}) << run.all();
}

INSTANTIATE_TEST_SUITE_P(
    Providers, OfiNodes,
    ::testing::Combine(::testing::Values(kTcp, kShm), ::testing::Bool()),
    [](const auto& info) {
      std::string n = std::get<0>(info.param).name == std::string("shm")
                          ? "shm"
                          : "tcp_rxm";
      return n + (std::get<1>(info.param) ? "_registered" : "");
    });

TEST(OfiNodesTcp, WaitFdWakesASleepingRank) {
  REQUIRE_OFI();
  auto run = run_nodes("fdwake", 2, kTcp, false);
  expect_all_ok(run);
  EXPECT_NE(run.rs[1].output.find("WAIT_FD 1"), std::string::npos) << run.all();
  EXPECT_NE(run.rs[1].output.find("\nWOKE"), std::string::npos) << run.all();
}

TEST(OfiNodesShm, NoWaitFdMeansPolling) {
  REQUIRE_OFI();
  // shm has no FI_WAIT_FD completion queue: wait_fd() is -1 and the caller
  // polls; the message still arrives.
  auto run = run_nodes("fdwake", 2, kShm, false);
  expect_all_ok(run);
  bool fd = run.rs[1].output.find("WAIT_FD 1") != std::string::npos;
  EXPECT_NE(run.rs[1].output.find(fd ? "\nWOKE" : "\nNO_WAIT_FD"),
            std::string::npos)
      << run.all();
}

// A process killed with its endpoint open leaves its shm region behind. The
// next process with that pid (pid reuse; here pid 2 of a fresh pid
// namespace, twice) must still open an endpoint: libfabric's own name for it
// would collide, and it refuses a region whose recorded pid is alive.
TEST(OfiNodesShm, ARegionLeftByAKilledProcessDoesNotBlockItsPidsNextOwner) {
  REQUIRE_OFI();
  auto probe = run("unshare", {"--pid", "--fork", "true"}, {}, 10s);
  if (!probe.exited_ok()) {
    GTEST_SKIP() << "unshare --pid is not permitted here: " << probe.describe()
                 << ": " << probe.output;
  }
  const std::set<std::string> before = shm_names();
  auto one = [&](const std::string& mode) {
    TempDir dir;
    auto env = clean_rank_env(0, 1);
    env["TEST_SC_DIR"] = dir / "sc";
    env["TEST_OFI_PROVIDER"] = kShm.name;
    env["TEST_OFI_DOMAIN"] = kShm.domain;
    // The shell is the namespace's init (which SIGKILL from inside cannot
    // touch), so the worker is always its pid 2.
    return run("unshare",
               {"--pid", "--fork", "/bin/sh", "-c",
                "'" + worker_path("ofi_node") + "' " + mode + "; exit $?"},
               env, 60s);
  };
  // Regions of pid 2 that were not there before this test.
  auto pid2_regions = [&] {
    std::vector<std::string> found;
    for (const auto& n : shm_names()) {
      if (before.count(n) == 0 && n.rfind("2:", 0) == 0) {
        found.push_back(n);
      }
    }
    return found;
  };
  auto died = one("die");
  EXPECT_FALSE(died.exited_ok()) << died.output;
  EXPECT_FALSE(pid2_regions().empty())
      << "the killed process left no region to trip on";
  auto next = one("cards");
  EXPECT_TRUE(next.exited_ok()) << next.describe() << ": " << next.output;
  EXPECT_NE(next.output.find("\nOK"), std::string::npos) << next.output;
  std::error_code ec;
  for (const auto& n : pid2_regions()) {
    std::filesystem::remove(std::filesystem::path("/dev/shm") / n, ec);
  }
}

TEST(OfiNodesMixed, DifferentProvidersFailOnBothRanksNamingBoth) {
  REQUIRE_OFI();
  auto run = run_nodes("cards", 2, kTcp, false, {{1, "shm"}});
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(run.rs[r].exit_code, 3) << run.all();
    auto line = line_of(run.rs[r].output, "FAILED");
    EXPECT_NE(line.find("FAILED Config:"), std::string::npos) << run.all();
    EXPECT_NE(line.find("uses provider 'tcp;ofi_rxm'"), std::string::npos)
        << run.all();
    EXPECT_NE(line.find("uses provider 'shm'"), std::string::npos) << run.all();
    EXPECT_NE(line.find("(peer rank " + std::to_string(1 - r) + ")"),
              std::string::npos)
        << run.all();
  }
  EXPECT_EQ(run.leftovers, std::vector<std::string>{}) << run.all();
}

}  // namespace
