// Copyright 2026 the jaccl authors.
#include "transport/shm_setup.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <string_view>
#include <thread>
#include <utility>

#include "common/affinity.h"
#include "common/bytes.h"
#include "common/error.h"
#include "common/handshake.h"
#include "common/log.h"
#include "common/random.h"
#include "common/shm_segment.h"
#include "transport/shm_handoff.h"
#include "transport/shm_layout.h"

namespace jaccl::detail {

namespace {

// Where rank stands among its host's members; a rank that is not one is
// an internal error (the caller's plan put it on the wrong host).
int member_index(const std::vector<int>& members, int rank) {
  const auto at = std::find(members.begin(), members.end(), rank);
  if (at == members.end()) {
    raise(ErrorKind::Internal, "this rank is not among its host's members",
          {.rank = rank});
  }
  return static_cast<int>(at - members.begin());
}

uint64_t pid_namespace() {
  struct stat st {};
  return ::stat("/proc/self/ns/pid", &st) == 0 ? st.st_ino : 0;
}

// One rank's contribution to each of the four side-channel gathers of the
// set-up (fixed size, so each is one side-channel call). Every phase
// carries the rank's failure, if any, so every rank keeps running the same
// calls and a failure on one host is reported on all of them.
struct SetupMsg {
  uint64_t magic;
  uint8_t phase;
  uint8_t listening;  // phase 1, creator: its hand-off socket is up
  // Phase 2, member: kReach (it can reach the creator's hand-off socket)
  // or kMapped (it opened the creator's memfd through /proc already).
  uint8_t reach;
  uint8_t failed;
  int32_t kind;
  int32_t pid;
  uint32_t uid;
  uint64_t pid_ns;
  uint8_t nonce[16];   // phase 1: names the socket and segment
  uint8_t secret[16];  // phase 1: what a client must show the socket
  int32_t seg_fd;      // phase 1, creator: its memfd's number (-1: none)
  // A failed rank sends its failure, abridged; a working one, in phase 1,
  // where it may run (the frame has no room for both).
  union {
    char what[128];
    CpuMask cpus;
  };
};
static_assert(sizeof(SetupMsg) <= SideChannel::kInlineBytes);
constexpr uint8_t kReach = 1;
constexpr uint8_t kMapped = 2;
constexpr uint64_t kSetupMagic = 0x3130505353434a6aull;  // "jJCSSP01"

// Everything setup_shm keeps across the phases.
struct Setup {
  SideChannel* sc;  // null on a shrink's quick path (quick_setup)
  const std::vector<int>& members;
  int rank;
  int creator;
  bool alone;
  ShmLayout layout{};
  std::exception_ptr error;  // this rank's failure
  bool host_failed = false;  // any member of this host has failed
  SetupMsg head{};           // the creator's phase-1 message
  // Every rank's pid where it means something here (its pid namespace is
  // ours; else 0), from phase 1: not the whole messages (200 KiB of fresh
  // pages at 1024 ranks).
  std::vector<pid_t> pids;
  // The failed ranks' messages of the last gather, in rank order (the
  // messages are read where they arrived, not copied: N of them were 200
  // KiB of fresh pages at 1024 ranks, at ~10 us a page on a VM).
  std::vector<std::pair<int, SetupMsg>> failures;
  std::string name;   // "jaccl-<nonce>"
  int host_cpus = 1;  // the CPUs the members may run on

  SetupMsg blank(uint8_t phase) const {
    SetupMsg w;
    std::memset(&w, 0, sizeof(w));
    w.magic = kSetupMagic;
    w.phase = phase;
    if (error) {
      w.failed = 1;
      w.kind = static_cast<int32_t>(ErrorKind::Internal);
      std::string what = "unknown error";
      try {
        std::rethrow_exception(error);
      } catch (const Error& e) {
        w.kind = static_cast<int32_t>(e.kind());
        what = e.what();
      } catch (const std::exception& e) {
        what = e.what();
      }
      if (what.rfind("[jaccl] ", 0) == 0) {
        what = what.substr(8);
      }
      std::strncpy(w.what, what.c_str(), sizeof(w.what) - 1);
    }
    return w;
  }

  // Runs this rank's step of a phase unless its host has already failed;
  // a throw becomes this rank's failure, reported in the next gathers.
  template <class Fn>
  void step(Fn&& fn) {
    if (alone || host_failed || error) {
      return;
    }
    try {
      fn();
    } catch (...) {
      error = std::current_exception();
    }
  }

  bool is_member(int r) const {  // members ascend (setup_shm)
    return std::binary_search(members.begin(), members.end(), r);
  }

  // One gather: each rank's message, checked, handed to each(rank, message)
  // in rank order; the failed ones are kept (failures).
  void gather(const SetupMsg& mine,
              const std::function<void(int, const SetupMsg&)>& each = {}) {
    failures.clear();
    sc->all_gather_each(&mine, sizeof(SetupMsg), [&](int r, const char* at) {
      SetupMsg m;
      std::memcpy(&m, at, sizeof(m));
      if (m.magic != kSetupMagic || m.phase != mine.phase) {
        raise(ErrorKind::Protocol,
              "shared-memory set-up message out of step (phase " +
                  std::to_string(m.phase) + ", expected " +
                  std::to_string(mine.phase) + ")",
              {.rank = rank, .peer = r});
      }
      m.what[sizeof(m.what) - 1] = '\0';
      if (m.failed != 0) {
        failures.emplace_back(r, m);
        host_failed = host_failed || is_member(r);
      }
      if (each) {
        each(r, m);
      }
    });
  }

  HandoffPeer peer(int r) const {
    return HandoffPeer{r, pids[static_cast<size_t>(r)]};
  }

  // A pid means something only inside the pid namespace it came from.
  static pid_t pid_here(const SetupMsg& w, uint64_t ours) {
    return w.pid_ns != 0 && w.pid_ns == ours ? w.pid : 0;
  }

  // Keeps what later phases need of the first gather's message of rank r
  // (pids sized for the job).
  void keep_first(int r, const SetupMsg& m, uint64_t our_pid_ns) {
    if (r == creator) {
      head = m;
    }
    pids[static_cast<size_t>(r)] = pid_here(m, our_pid_ns);
  }

  void check_layout(const ShmSegment& seg) const {
    auto* h = reinterpret_cast<const ShmHeader*>(seg.data());
    if (h->magic != kShmMagic ||
        h->nranks != static_cast<uint32_t>(members.size()) ||
        h->slot_bytes != layout.slot_bytes) {
      raise(ErrorKind::Protocol,
            "shared-memory segment layout differs from this rank's "
            "(the ranks must run the same jaccl build, and JACCL_SHM_BUDGET "
            "must agree across them)",
            {.rank = rank, .address = seg.name()});
    }
  }

  // After the last gather: this rank's own failure, else the first failure
  // on its host (the creator's comes first), else the first in the job.
  void raise_first_failure() const {
    if (error) {
      std::rethrow_exception(error);
    }
    if (failures.empty()) {
      return;
    }
    const std::pair<int, SetupMsg>* first = &failures.front();
    for (int m : members) {
      auto it = std::find_if(failures.begin(), failures.end(),
                             [&](const auto& f) { return f.first == m; });
      if (it != failures.end()) {
        first = &*it;
        break;
      }
    }
    const int bad = first->first;
    const SetupMsg& w = first->second;
    int kind = std::clamp(w.kind, 0, static_cast<int>(ErrorKind::Internal));
    raise(static_cast<ErrorKind>(kind),
          "shared-memory set-up failed on " + rank_ref(bad) + ": " +
              Detail(std::string(w.what)),
          {.rank = rank, .peer = bad});
  }
};

// The memfd goes from the creator to `others` (the other members but
// those that mapped it already), who map it.
void hand_over(const Config& cfg, const Setup& s, bool creator, int listener,
               HandoffConn& conn, ShmSegment& seg, const HandoffSecret& secret,
               const FailureState* state, const std::vector<int>& others) {
  const Deadline dl = Deadline::after(cfg.get_timeout());
  if (creator) {
    std::vector<HandoffPeer> peers;
    for (int m : others) {
      peers.push_back(s.peer(m));
    }
    handoff_serve(listener, s.name, seg.fd(), seg.size(), secret, peers, s.rank,
                  dl, state);
    seg.close_fd();
    return;
  }
  if (!conn.fd.valid()) {
    conn = handoff_connect(s.name, s.peer(s.creator), s.rank);
    if (conn.reach == HandoffConn::Reach::Unreachable) {
      raise(ErrorKind::Io,
            "cannot reach the shared-memory hand-off socket @" + s.name +
                " of " + rank_ref(s.creator),
            {.rank = s.rank, .peer = s.creator, .sys_errno = conn.error});
    }
  }
  uint64_t bytes = 0;
  Fd fd = handoff_receive(conn, s.name, s.peer(s.creator), secret, s.rank, dl,
                          state, &bytes);
  seg = ShmSegment::adopt(std::move(fd), s.layout.total(), s.rank, s.name);
  s.check_layout(seg);
}

// Opens the creator's memfd through /proc/<pid>/fd (same uid, same pid
// namespace; the kernel checks we may): no hand-over round. false when it
// cannot, and the socket hands it over instead.
bool map_from_proc(const Setup& s, ShmSegment& seg) {
  const HandoffPeer c = s.peer(s.creator);
  const int32_t fd_no = s.head.seg_fd;
  if (c.pid <= 0 || fd_no < 0) {
    return false;
  }
  // s.name holds this set-up's nonce: the creator's memfd of this set-up.
  std::string why;
  Fd fd = open_memfd_of(c.pid, fd_no, s.name, &why);
  if (!fd.valid()) {
    return false;
  }
  seg = ShmSegment::adopt(std::move(fd), s.layout.total(), s.rank, s.name);
  s.check_layout(seg);
  return true;
}

// This rank's channel once the segment is mapped everywhere.
// keepalive: what the channel keeps alive (conns.keepalive when null).
std::optional<ShmChannel> finish(const Config& cfg, const Setup& s, int me,
                                 ShmSegment seg, bool use_memfd,
                                 const ControlBlock& conns,
                                 std::shared_ptr<void> keepalive = nullptr) {
  const int size = static_cast<int>(s.members.size());
  if (s.alone) {
    return std::nullopt;
  }
  if (s.rank == s.creator) {
    JACCL_LOG(Info, "rank " << s.rank << ": shared-memory group of " << size
                            << " ranks, " << s.layout.total() / 1024
                            << " KiB segment ("
                            << (use_memfd ? "memfd " : "/dev/shm/") << s.name
                            << "), " << size << " ranks on " << s.host_cpus
                            << " CPU(s) between them"
                            << (size > s.host_cpus ? " (oversubscribed)" : "")
                            << ", " << s.layout.slot_bytes / 1024
                            << " KiB slots, strategy " << cfg.get_shm_strategy()
                            << (s.layout.lazy_rings
                                    ? " (send/recv rings past "
                                      "JACCL_SHM_BUDGET: their pages come on "
                                      "first use)"
                                    : ""));
  }
  return ShmChannel(me, size, s.members, std::move(seg), s.layout, s.host_cpus,
                    conns.state,
                    keepalive ? std::move(keepalive) : conns.keepalive);
}

// Whether the cards put every rank of the group on one kernel, IPC and
// network namespace: a memfd one of them makes, the others can open
// through /proc (if the pid namespace and the user agree too, which the
// set-up messages tell).
bool one_namespace(const ControlBlock& conns) {
  if (!conns.cards || conns.cards->size() != static_cast<size_t>(conns.size) ||
      conns.cards->empty()) {
    return false;
  }
  const TcpCard& a = conns.cards->front();
  return !a.net_ns.empty() && !a.boot_id.empty() &&
         std::all_of(conns.cards->begin(), conns.cards->end(),
                     [&](const TcpCard& c) {
                       return c.net_ns == a.net_ns && c.boot_id == a.boot_id &&
                              c.ipc_ns == a.ipc_ns;
                     });
}

// Whether this set-up is a shrink's on one namespace (the quick path;
// setup_shm).
bool quick_shrink(const ControlBlock& conns) {
  return conns.shrink && conns.broadcast && one_namespace(conns);
}

// Whether other processes of this user may open this one's descriptors
// through /proc. A creator that is not (prctl(PR_SET_DUMPABLE, 0), a
// set-uid program) hands the memfd over through its socket only.
bool dumpable() {
  return ::prctl(PR_GET_DUMPABLE) == 1;
}

// Reserves the pages of a quick shrink's segment on a thread of its own,
// while the shrink commits (at 64 ranks, reserving the 64 MiB of the
// default budget took the creator tens of ms, which every member waited
// for). A full /dev/shm or memory then fails the group (every op throws
// it), as a failed reservation fails an init, instead of a SIGBUS on
// first touch; the pages touched before are the kernel's to find either
// way (the room was checked before the segment was made). Returns what
// the channel keeps alive: the thread (joined with it) and
// conns.keepalive.
std::shared_ptr<void> reserve_behind(const ShmSegment& seg, size_t bytes,
                                     const ControlBlock& conns, int rank) {
  struct Reserver {
    std::shared_ptr<void> keep;
    std::thread thread;
    ~Reserver() {
      if (thread.joinable()) {
        thread.join();
      }
    }
  };
  auto r = std::make_shared<Reserver>();
  r->keep = conns.keepalive;
  Fd fd(::fcntl(seg.fd(), F_DUPFD_CLOEXEC, 0));
  if (!fd.valid()) {
    raise(ErrorKind::Io, "cannot duplicate the shared-memory segment's fd",
          {.rank = rank, .address = "memfd:" + seg.name(), .sys_errno = errno});
  }
  r->thread = std::thread([fd = std::move(fd), bytes, state = conns.state, rank,
                           name = seg.name()] {
    const int rc = ::posix_fallocate(fd.get(), 0, static_cast<off_t>(bytes));
    if (rc != 0 && state) {
      state->fail(error_ptr(
          ErrorKind::Io,
          "cannot reserve " + std::to_string(bytes) +
              " bytes of shared memory for the shrunk group (sized by "
              "JACCL_SHM_BUDGET; is /dev/shm or memory full?)",
          {.rank = rank, .address = "memfd:" + name, .sys_errno = rc}));
    }
  });
  return r;
}

// The quick path of a shrink's set-up (quick_shrink): the creator makes
// and initializes the memfd and sends its pid, the memfd's number and the
// nonce to the members (conns.broadcast); each opens the memfd through
// /proc/<creator>/fd (same uid, pid namespace and kernel; the kernel checks
// we may). Nobody waits for anybody else: the shrink's commit agreement,
// which follows, tells whether every member mapped it (a member that could
// not fails its set-up; the shrink then tries again with the hand-over
// through the creator's socket, the four gathers above). The creator keeps
// the memfd's descriptor as long as the group: a member may still be
// opening it when the creator is done.
std::optional<ShmChannel> quick_setup(const Config& cfg,
                                      const ControlBlock& conns,
                                      const std::vector<int>& members,
                                      const ShmHeaderInit& init) {
  const int rank = cfg.get_rank();
  const int size = static_cast<int>(members.size());
  const int me = member_index(members, rank);
  Setup s{nullptr, members, rank, members.front(), false, {}, {}};
  const bool creator = rank == s.creator;
  s.layout = ShmLayout::for_budget(size, cfg.get_shm_budget() << 20);
  s.host_cpus = std::max(conns.host_cpus, 1);
  ShmSegment seg;
  SetupMsg w = s.blank(1);
  if (creator) {
    try {
      const std::string bad = cfg.shm_invalid_reason();
      if (!bad.empty()) {
        raise(ErrorKind::Config, bad, {.rank = rank});
      }
      random_bytes(w.nonce, sizeof(w.nonce));
      const std::string name = "jaccl-" + to_hex(w.nonce, sizeof(w.nonce));
      // Its pages are reserved once the members have the message (below):
      // tens of ms for tens of MiB, which they need not wait for.
      seg = ShmSegment::create_anonymous(
          name, s.layout.total(), rank,
          std::min<size_t>(s.layout.reserved(), size_t(4) << 10));
      ShmChannel::init_segment(seg.data(), s.layout, init.strategy,
                               init.chunk_bytes);
      w.seg_fd = seg.fd();
    } catch (...) {
      s.error = std::current_exception();
      w = s.blank(1);
    }
    w.pid = static_cast<int32_t>(::getpid());
    w.uid = static_cast<uint32_t>(::geteuid());
    w.pid_ns = pid_namespace();
  }
  const std::string got = conns.broadcast(
      std::string_view(reinterpret_cast<const char*>(&w), sizeof(w)),
      s.creator);
  if (got.size() != sizeof(SetupMsg)) {
    raise(ErrorKind::Protocol,
          "shared-memory set-up: the creator's message has " +
              std::to_string(got.size()) + " bytes, " +
              std::to_string(sizeof(SetupMsg)) + " expected",
          {.rank = rank, .peer = s.creator});
  }
  std::shared_ptr<void> keep;
  if (creator && !s.error) {
    keep = reserve_behind(seg, s.layout.reserved(), conns, rank);
  }
  std::memcpy(&w, got.data(), sizeof(w));
  w.what[sizeof(w.what) - 1] = '\0';
  if (w.magic != kSetupMagic || w.phase != 1) {
    raise(ErrorKind::Protocol, "shared-memory set-up message out of step",
          {.rank = rank, .peer = s.creator});
  }
  const auto n = static_cast<size_t>(cfg.get_size());
  s.head = w;
  s.pids.assign(n, 0);
  s.pids[static_cast<size_t>(s.creator)] = Setup::pid_here(w, pid_namespace());
  if (w.failed != 0) {
    s.failures.emplace_back(s.creator, w);
  }
  s.raise_first_failure();
  s.name = "jaccl-" + to_hex(w.nonce, sizeof(w.nonce));
  if (!creator && !map_from_proc(s, seg)) {
    raise(ErrorKind::Io,
          "cannot open the shared-memory segment of " + rank_ref(s.creator) +
              " through /proc/" + std::to_string(w.pid) + "/fd",
          {.rank = rank, .peer = s.creator});
  }
  return finish(cfg, s, me, std::move(seg), true, conns, std::move(keep));
}

}  // namespace

int first_nonlocal(const std::vector<TcpCard>& cards, int me) {
  const TcpCard& mine = cards[static_cast<size_t>(me)];
  for (const TcpCard& c : cards) {
    if (c.boot_id != mine.boot_id || c.ipc_ns != mine.ipc_ns ||
        c.boot_id.empty() || c.ipc_ns.empty()) {
      return c.rank;
    }
  }
  return -1;
}

// Four gathers, the same on every rank of the job:
//   1. the creator listens on @jaccl-<nonce>; nonce, secret, pids published
//   2. the others connect; whether each reached the socket published
//   3. the creator makes the segment: a memfd if every member reached it,
//      else (members in other network namespaces) /dev/shm/jaccl-<nonce>
//   4. the memfd is handed over (or the name opened) and mapped; results
//      published, then a named segment is unlinked by everyone.
// When the cards put the whole job on one kernel, IPC and network
// namespace and the creator's descriptors can be opened through /proc, the
// creator makes the memfd before the first gather and publishes its number
// there; the others open it through /proc/<creator>/fd right after (the
// link's name checked against the nonce) instead of connecting, and if
// every one could, the second gather ends the set-up: two rounds of every
// process instead of four (at 1024 ranks on 2 CPUs each round was about a
// second). Whoever could not is served by the socket in phases 3 and 4.
// A memfd has no name, so a SIGKILL at any moment leaves nothing behind;
// only the named fallback has a window (phases 3-4) where it could.
// A shrink's first attempt on one kernel, IPC, pid and network namespace
// (quick_setup) takes one message from the creator instead (at 64 ranks on
// a few cores every round of every process was tens of ms).
std::optional<ShmChannel> setup_shm(const Config& cfg, SideChannel& sc,
                                    const ControlBlock& conns,
                                    const std::vector<int>& members,
                                    const ShmHeaderInit& init) {
  const int rank = cfg.get_rank();
  const int size = static_cast<int>(members.size());
  const int me = member_index(members, rank);
  Setup s{&sc, members, rank, members.front(), size == 1, {}, {}};
  const bool creator = rank == s.creator;
  const FailureState* state = conns.state.get();
  Fd listener;
  HandoffConn conn;
  ShmSegment seg;
  bool use_memfd = false;
  bool named = false;  // a /dev/shm name may exist: unlink on every exit
  if (quick_shrink(conns) && size > 1) {
    return quick_setup(cfg, conns, members, init);
  }
  // Only the creator acts on it (it publishes its memfd in the first
  // gather); every rank then decides alike from the gathered messages.
  const bool direct = size > 1 && one_namespace(conns);

  SetupMsg w = s.blank(1);
  random_bytes(w.nonce, sizeof(w.nonce));
  random_bytes(w.secret, sizeof(w.secret));
  s.step([&] {
    // Here rather than in init: one rank's bad value fails every rank.
    const std::string bad = cfg.shm_invalid_reason();
    if (!bad.empty()) {
      raise(ErrorKind::Config, bad, {.rank = rank});
    }
    s.layout = ShmLayout::for_budget(size, cfg.get_shm_budget() << 20);
    if (!creator) {
      return;
    }
    // Bound before the nonce is published, so nobody else can take the
    // name first. Failing here only forfeits the memfd path.
    const std::string name = "jaccl-" + to_hex(w.nonce, sizeof(w.nonce));
    try {
      listener = handoff_listen(name, size + 16, rank);
    } catch (const Error& e) {
      JACCL_LOG(Info, "rank " << rank << ": no shared-memory hand-off socket ("
                              << e.what() << ")");
    }
    if (direct && listener.valid() && dumpable()) {
      seg = ShmSegment::create_anonymous(name, s.layout.total(), rank,
                                         s.layout.reserved());
      ShmChannel::init_segment(seg.data(), s.layout, init.strategy,
                               init.chunk_bytes);
    }
  });
  w = [&] {
    SetupMsg x = s.blank(1);
    std::memcpy(x.nonce, w.nonce, sizeof(x.nonce));
    std::memcpy(x.secret, w.secret, sizeof(x.secret));
    x.listening = listener.valid() ? 1 : 0;
    x.seg_fd = seg.data() != nullptr ? seg.fd() : -1;
    x.pid = static_cast<int32_t>(::getpid());
    x.uid = static_cast<uint32_t>(::geteuid());
    x.pid_ns = pid_namespace();
    if (!x.failed) {
      x.cpus = cpu_mask();
    }
    return x;
  }();
  try {
    CpuUnion cpus;
    const uint64_t our_pid_ns = pid_namespace();
    s.pids.assign(static_cast<size_t>(sc.size()), 0);
    s.gather(w, [&](int r, const SetupMsg& f) {
      s.keep_first(r, f, our_pid_ns);
      if (!f.failed && s.is_member(r)) {
        cpus.add(f.cpus);
      }
    });
    s.host_cpus = cpus.count();
    // Every rank has left setup_tcp, connected: its monitor may start.
    if (conns.start_monitor) {
      s.step([&] { conns.start_monitor(); });
    }
    const SetupMsg& head = s.head;
    s.name = "jaccl-" + to_hex(head.nonce, sizeof(head.nonce));
    HandoffSecret secret;
    std::memcpy(secret.data(), head.secret, secret.size());
    // Phase 2: the memfd through /proc where the creator published it,
    // else (or if that fails) can every member reach the creator's socket?
    bool mapped = creator && seg.data() != nullptr;
    s.step([&] {
      if (creator) {
        return;
      }
      mapped = map_from_proc(s, seg);
      if (!mapped && head.seg_fd >= 0) {
        JACCL_LOG(Debug, "rank " << rank << ": cannot open @" << s.name
                                 << " through /proc; the socket hands it "
                                    "over");
      }
      if (!mapped && head.listening != 0) {
        conn = handoff_connect(s.name, s.peer(s.creator), rank);
      }
    });
    w = s.blank(2);
    w.reach = mapped ? kMapped
              : creator || conn.reach != HandoffConn::Reach::Unreachable
                  ? kReach
                  : 0;
    std::vector<int> unreachable;
    std::vector<int> unmapped;  // the members the socket must serve
    bool all_mapped = true;
    s.gather(w, [&](int m, const SetupMsg& second) {
      if (!s.is_member(m)) {
        return;
      }
      const uint8_t got = second.reach;
      if (got == 0) {
        unreachable.push_back(m);
      }
      all_mapped = all_mapped && got == kMapped;
      if (got != kMapped && m != rank) {
        unmapped.push_back(m);
      }
    });
    if (all_mapped && !s.host_failed) {
      // Every member holds the memfd: the creator's descriptor and socket go.
      listener.reset();
      seg.close_fd();
      s.raise_first_failure();
      return finish(cfg, s, me, std::move(seg), true, conns);
    }
    use_memfd = unreachable.empty();
    if (!use_memfd) {
      listener.reset();
      conn = HandoffConn{};
      // The named segment replaces a memfd some have mapped already.
      seg = ShmSegment{};
      if (creator && !s.alone && !s.host_failed) {
        JACCL_LOG(Info, "rank " << rank << ": " << ranks_phrase(unreachable)
                                << " cannot reach @" << s.name
                                << " (another network namespace?): using "
                                   "the named segment /dev/shm/"
                                << s.name);
      }
    }

    // Phase 3: the creator makes the segment (unless it made the memfd).
    s.step([&] {
      if (!creator || seg.data() != nullptr) {
        return;
      }
      if (use_memfd) {
        seg = ShmSegment::create_anonymous(s.name, s.layout.total(), rank,
                                           s.layout.reserved());
      } else {
        named = true;
        seg = ShmSegment::create("/" + s.name, s.layout.total(), rank,
                                 s.layout.reserved());
      }
      ShmChannel::init_segment(seg.data(), s.layout, init.strategy,
                               init.chunk_bytes);
    });
    named = named || (!use_memfd && !s.alone);
    s.gather(s.blank(3));

    // Phase 4: hand it over to whoever has not mapped it (or open the
    // name) and check the layout.
    s.step([&] {
      if (use_memfd) {
        if (creator || !mapped) {
          hand_over(cfg, s, creator, listener.get(), conn, seg, secret, state,
                    unmapped);
        }
      } else if (!creator) {
        seg = ShmSegment::open("/" + s.name, s.layout.total(), rank);
        s.check_layout(seg);
      }
    });
    listener.reset();
    conn = HandoffConn{};
    s.gather(s.blank(4));
    if (named) {
      // Every member, not just the creator: covers a creator that dies now.
      ::shm_unlink(("/" + s.name).c_str());
      seg.unlink();
    }
    s.raise_first_failure();
  } catch (...) {
    // Whoever fails removes the name, so a dead creator leaves nothing.
    if (named) {
      ::shm_unlink(("/" + s.name).c_str());
    }
    throw;
  }
  return finish(cfg, s, me, std::move(seg), use_memfd, conns);
}

}  // namespace jaccl::detail
