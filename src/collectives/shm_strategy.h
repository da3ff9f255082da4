// Copyright 2026 the jaccl authors.
// How a shared-memory group's large ops move data through the segment. Three
// ways, which differ only in the kind of stores, never in what is computed:
//   cached        ordinary stores everywhere;
//   stream-stage  non-temporal stores for staging (what the peers read),
//                 ordinary ones for the copy into the caller's output;
//   stream        non-temporal stores for both.
// all_gather and all_to_all(v) have a fourth, when the host's ranks may
// read each other's memory (one probe per group) and do not outnumber the
// cores:
//   direct        every rank reads each peer's block straight out of the
//                 peer's input (process_vm_readv, Open MPI's single copy)
//                 instead of the peer staging it; other ops store as cached.
// Whether one kernel copy beats two user copies depends on the machine
// (page pinning per call against a second pass over the data).
// Non-temporal staging sends the lines to memory, so a peer reads them from
// there instead of pulling them out of this core's cache; non-temporal
// copy-out skips reading each output line first and does not evict the
// staging buffers. Which wins depends on the machine, not on a cache size
// (`sysconf` may even report the host's L3 instead of the guest's): the
// machines in BENCHMARKS.md (History; bench/shm_pattern) disagree, and so
// does one VM from minute to minute (its two vCPUs on one core complex or
// on two: a cache-line handoff seven times dearer; BENCHMARKS.md). So, unless a
// strategy is forced (JACCL_SHM_STRATEGY), every rank measures, per op kind and
// power-of-two size class, kRounds rounds of 3k calls for the k ways the op
// may take (nine, or twelve with direct: the guess, direct, then the others)
// after two untimed warm calls (the guess, then direct where it is a way):
// in each round each way three times in a row, and only the third call
// timed; a way's figure is the median of its rounds. One timed call was too
// few: with 4 ranks on 2 CPUs a rank descheduled for a slice inflates the
// slowest rank's time, and the tuner kept a way 1.3-1.6x slower in about
// half the runs (BENCHMARKS.md, History, "2026-12-05 midday"). The fastest
// of two rounds was still biased: direct reads take about five calls to
// reach their steady time (its first round ran 1.5x its steady time), and
// the fastest round favours whichever way had one lucky call, so a 2-rank
// all_to_all(v) of 4 MiB kept a staged way 1.3x slower than direct in 4
// of 10 runs (History, "2026-12-05 evening"). Rounds are
// interleaved so that a machine whose state drifts during the trials
// drifts for every way alike. A call's cost depends on
// the way the call before it took (which of the slots' lines this core and
// its peers still hold, and in what state): timed right after a streaming
// call, the cached way looked 4x faster than it then ran call after call
// (BENCHMARKS.md, History), and it was chosen. And an op of one sync step
// per call alternates between the slots' two parities, so its second call
// writes the parity the way before it wrote last: the third call of a trial
// follows two of its own way, as every call does once the choice is made.
// Each rank publishes each timed trial at the next sync step, and from then
// on every rank uses the way with the lowest time per byte (the slowest rank's
// time). Calls after the trials never change the figures: one call on unusual
// caches (buffers the caller has just rewritten) must not overturn the choice.
// But the first trials run on a process that is still warming up: timed call by
// call, a 2-rank all_gather of 1 MiB forced to cached took 100 us at first and
// 55 after some 30 calls, and the trials, interleaved with the other ways, kept
// measuring it 1.5-4x slow while direct (a kernel copy) was near its steady
// time (direct chosen in 6 of 8 runs, at 65-97 us, against cached at 44-57 in 8
// of 8 with this). So the class measures once more kSettleCalls calls after its
// first decision. And the machine may change under a long job (this VM's vCPUs
// move between core complexes within minutes, and which way wins moves with
// them), so every kRetrialCalls calls of a class, or as many as move
// kRetrialBytes if that is more, the class measures again from fresh figures:
// about a percent of its calls go to ways slower than the choice. And the calls
// of the choice are timed too (from the clock reads every large op already
// makes): kDriftCalls of them in a row
// at more than kDriftFactor times the choice's figure, once at least a gap
// of calls has passed since the decision, measure again at once (a 4-rank
// torch job's 64 MiB all_sum went from 25 to 58 ms when the VM changed
// state; the periodic re-trial comes after 2048 calls). The gap doubles at each
// such re-trial, so a caller whose calls alternate between warm and cold
// buffers pays for few of them. The decision is a
// pure function of values every rank reads from the same shared step, so every
// rank of the host makes the same choice; results do not depend on it (the
// reduction order is fixed), only speed.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>

namespace jaccl::detail {

enum class ShmStrategy : uint32_t {
  Auto = 0,
  Cached = 1,
  StreamStage = 2,
  Stream = 3,
  Direct = 4
};
inline constexpr int kShmWays = 4;    // the strategies other than Auto
inline constexpr int kStoreWays = 3;  // those every large op has
inline constexpr int kStageWays = 2;  // cached or streaming staging alone
// Ops from this size are measured too, not only large ones: a cached store
// into lines a peer read at the last call must take each line back from
// the peer's cache first, and on a machine where that costs a fifth of a
// copy's rate the small ops' cached staging ran at 8 GB/s, slower than the
// large path just above it (2 ranks: all_gather of 32 KiB a rank 7.7 us,
// of 64 KiB 5.1 us; BENCHMARKS.md, History). Below, a call is a handoff of
// a few lines and two clock reads would be a noticeable share of it.
inline constexpr size_t kShmTunedFromBytes = 4096;

inline const char* shm_strategy_name(ShmStrategy s) {
  switch (s) {
    case ShmStrategy::Auto:
      return "auto";
    case ShmStrategy::Cached:
      return "cached";
    case ShmStrategy::StreamStage:
      return "stream-stage";
    case ShmStrategy::Stream:
      return "stream";
    case ShmStrategy::Direct:
      return "direct";
  }
  return "unknown";
}

// "auto", "cached", "stream-stage", "stream", "direct"; false if none of
// these.
inline bool parse_shm_strategy(const char* text, ShmStrategy* out) {
  for (ShmStrategy s :
       {ShmStrategy::Auto, ShmStrategy::Cached, ShmStrategy::StreamStage,
        ShmStrategy::Stream, ShmStrategy::Direct}) {
    const char* a = text;
    const char* b = shm_strategy_name(s);
    while (*a != '\0' && *a == *b) {
      ++a;
      ++b;
    }
    if (*a == '\0' && *b == '\0') {
      *out = s;
      return true;
    }
  }
  return false;
}

// What one large op does.
struct ShmWay {
  bool stream_stage = false;
  bool stream_out = false;
  bool direct = false;  // all_gather reads the peers' inputs (else cached)
};

inline ShmWay shm_way(ShmStrategy s) {
  return ShmWay{s == ShmStrategy::StreamStage || s == ShmStrategy::Stream,
                s == ShmStrategy::Stream, s == ShmStrategy::Direct};
}

class ShmTuner {
 public:
  enum Kind {
    kReduce = 0,
    kGather = 1,
    kBroadcast = 2,
    kAllToAll = 3,
    kAllToAllv = 4,
    kSmallReduce = 5,  // all_sum's one-sync path: kStageWays
    kKinds = 6
  };

  // forced: Auto to measure, else the strategy every op uses.
  explicit ShmTuner(ShmStrategy forced = ShmStrategy::Auto) : forced_(forced) {}

  ShmStrategy forced() const { return forced_; }

  // How the large op about to start (kind, `bytes` of the caller's message)
  // moves its data. `guess` is the heuristic choice, measured first;
  // `ways` how many of the strategies this op may take (kStoreWays, or
  // kShmWays where direct is possible: the same on every rank, and the
  // same for every call of a size class). Remembers the op, so that
  // finish() can record its time.
  ShmWay begin(Kind kind, size_t bytes, ShmStrategy guess,
               int ways = kStoreWays) {
    if (forced_ != ShmStrategy::Auto) {
      return shm_way(forced_);
    }
    const size_t cls = class_of(bytes);
    Class& c = table_[kind][cls];
    if (c.calls == 0)
      c.ways = ways;
    const Pick p = pick_at(c, guess);
    if (p.decided) {
      c.calls = kWarmCalls + trials_of(c);  // no wrap
      if (++c.since >= (c.settled ? retrial_calls(cls) : kSettleCalls)) {
        c.settled = true;
        measure_again(c);  // from the next call
      }
    } else {
      ++c.calls;
    }
    timing_ = p.timed || p.decided;
    if (timing_)
      cur_ = Record{kind, cls, p.pick, bytes, p.decided};
    return p.way;
  }

  // What begin() would return now for these arguments, without counting
  // the call (all_to_allv stages its first round before the ranks know
  // the op's size: a guess from its own counts, shm_all_to_all.cpp).
  ShmWay peek(Kind kind, size_t bytes, ShmStrategy guess,
              int ways = kStoreWays) const {
    if (forced_ != ShmStrategy::Auto) {
      return shm_way(forced_);
    }
    Class c = table_[kind][class_of(bytes)];
    if (c.calls == 0)
      c.ways = ways;
    return pick_at(c, guess).way;
  }

  // The op begun last ended after `ns` on this rank: reported at the next
  // sync step (report()), then absorbed with every rank's report.
  void finish(uint64_t ns) {
    if (!timing_)
      return;
    timing_ = false;
    done_ = cur_;
    report_ = ns + 1;  // 0 means "nothing to report"
  }

  // What this rank publishes at its next sync step (0: nothing); taken
  // once.
  uint64_t take_report() {
    uint64_t r = report_;
    report_ = 0;
    reported_ = r != 0;
    return r;
  }

  // After that step: the largest report of all ranks (every rank reported
  // at the same step, since they run the same ops). Every rank calls this
  // with the same value, so the tables stay identical.
  void absorb(uint64_t slowest_ns) {
    if (!reported_)
      return;
    reported_ = false;
    Class& c = table_[done_.kind][done_.cls];
    const double per_byte =
        static_cast<double>(slowest_ns) / static_cast<double>(done_.bytes | 1);
    const auto w = static_cast<size_t>(done_.pick);
    if (done_.watch) {
      decided_.kind = -1;
      if (c.calls < kWarmCalls + trials_of(c))
        return;  // measuring again already
      c.slow = per_byte > kDriftFactor * c.best[w] ? c.slow + 1 : 0;
      if (c.slow >= kDriftCalls && c.since >= c.gap) {
        c.gap = std::min(2 * c.gap, retrial_calls(done_.cls));
        measure_again(c);
      }
      return;
    }
    // The lower median of the rounds so far (at the end: the middle one
    // of three).
    const uint32_t k = std::min(c.samples[w], kRounds - 1);
    auto& f = c.figures[w];
    f[k] = per_byte;
    std::array<double, kRounds> sorted = f;
    std::sort(sorted.begin(), sorted.begin() + k + 1);
    c.best[w] = sorted[k / 2];
    ++c.samples[w];
    uint32_t taken = 0;
    for (int w = 0; w < c.ways; ++w)
      taken += c.samples[static_cast<size_t>(w)];
    if (taken == trials_of(c) / kTrialCalls)
      decided_ = done_;  // the last trial's time: the class has chosen
    else
      decided_.kind = -1;
  }

  // After absorb(): the op kind and size class whose trials just ended, the
  // choice and the ns per byte of each way (logs); false otherwise.
  bool decided(int* kind, size_t* cls, ShmStrategy* pick,
               std::array<double, kShmWays>* ns_per_byte, int* ways) const {
    if (decided_.kind < 0)
      return false;
    const Class& c = table_[decided_.kind][decided_.cls];
    *kind = decided_.kind;
    *cls = decided_.cls;
    *pick = static_cast<ShmStrategy>(best_of(c, 0) + 1);
    *ns_per_byte = c.best;
    *ways = c.ways;
    return true;
  }
  bool reported() const { return reported_; }

  // The choice made for ops of this kind and size from now on, once the
  // measurements are complete (tests, logs): Auto while still measuring.
  ShmStrategy chosen(Kind kind, size_t bytes) const {
    if (forced_ != ShmStrategy::Auto)
      return forced_;
    const Class& c = table_[kind][class_of(bytes)];
    if (c.calls < kWarmCalls + trials_of(c))
      return ShmStrategy::Auto;
    for (int w = 0; w < c.ways; ++w) {
      if (c.samples[w] < kRounds)
        return ShmStrategy::Auto;
    }
    return static_cast<ShmStrategy>(best_of(c, 0) + 1);
  }

  // Calls of each size class that run the guess untimed before the trials.
  static constexpr uint32_t kWarmCalls = 2;
  // Rounds of trials (each way's figure is the median of its rounds).
  static constexpr uint32_t kRounds = 3;
  // Calls of one way in a row per trial, the last one timed.
  static constexpr uint32_t kTrialCalls = 3;
  // Calls of the first choice before the class measures once more.
  static constexpr uint32_t kSettleCalls = 16;
  // Measured again after this many calls of a class past its decision, or
  // after as many as move kRetrialBytes if that is more: the trials' calls
  // of the slower ways, kTrialCalls (k - 1) kRounds of them, stay near a
  // percent.
  static constexpr uint32_t kRetrialCalls = 2048;
  static constexpr size_t kRetrialBytes = size_t(4) << 30;
  // Measured again at once after kDriftCalls calls in a row of the choice
  // at more than kDriftFactor times its figure, kDriftGap calls after the
  // decision at the earliest (doubled at each such re-trial).
  static constexpr double kDriftFactor = 2.0;
  static constexpr uint32_t kDriftCalls = 4;
  static constexpr uint32_t kDriftGap = 16;

  static size_t class_of(size_t bytes) {
    size_t k = 0;
    while (k + 1 < kClasses && (size_t(1) << (k + 1)) <= bytes)
      ++k;
    return k;
  }

 private:
  static constexpr size_t kClasses = 48;
  struct Class {
    uint32_t calls = 0;
    uint32_t since = 0;     // calls since the decision
    bool settled = false;   // measured once more after the first choice
    int ways = kStoreWays;  // fixed by the first call
    std::array<uint32_t, kShmWays> samples{};  // timed trials so far
    std::array<double, kShmWays> best{};       // the figure, ns per byte
    std::array<std::array<double, kRounds>, kShmWays> figures{};  // rounds
    uint32_t slow = 0;         // calls of the choice in a row past drift
    uint32_t gap = kDriftGap;  // calls past the decision before a drift
  };
  // The next call of c starts the trials again (past the warm calls).
  static void measure_again(Class& c) {
    c.since = 0;
    c.calls = kWarmCalls;
    c.samples = {};
    c.slow = 0;
  }
  static uint32_t trials_of(const Class& c) {
    return kTrialCalls * kRounds * static_cast<uint32_t>(c.ways);
  }
  // Class cls holds sizes from 2^cls bytes.
  static uint32_t retrial_calls(size_t cls) {
    const size_t by_bytes = kRetrialBytes >> std::min<size_t>(cls, 62);
    return static_cast<uint32_t>(
        std::clamp<size_t>(by_bytes, kRetrialCalls, size_t(1) << 20));
  }
  struct Pick {
    ShmWay way;
    int pick = 0;          // the way's index (strategy - 1)
    bool timed = false;    // the second call of a trial pair
    bool decided = false;  // past the trials
  };
  // The way for the next call of class c (begin() counts the call).
  static Pick pick_at(const Class& c, ShmStrategy guess) {
    const int nw = c.ways;
    const bool direct = nw == kShmWays;
    constexpr int kDirect = static_cast<int>(ShmStrategy::Direct) - 1;
    // Trial order: guess, direct (if a way), then the others in order;
    // each way kTrialCalls times in a row, the last call timed.
    int order[kShmWays];
    order[0] = static_cast<int>(guess) - 1;
    int k = 1;
    if (direct && order[0] != kDirect)
      order[k++] = kDirect;
    for (int w = 0; w < nw; ++w) {
      if (w != order[0] && !(direct && w == kDirect))
        order[k++] = w;
    }
    const uint32_t trials = trials_of(c);
    const uint32_t call = c.calls;
    Pick p;
    if (call < kWarmCalls) {
      // Untimed: the first calls on fresh buffers run several times slower
      // than the tenth whatever the way (page faults, caches, TLB), and
      // would decide the trials. Direct has first-call costs of its own
      // (the kernel's first reads of the peers' pages: ten times a later
      // call), while the staged ways share theirs (the slots' pages), so
      // the last warm call runs direct where it is a way.
      p.pick = direct && call + 1 == kWarmCalls ? kDirect : order[0];
      p.way = shm_way(static_cast<ShmStrategy>(p.pick + 1));
      return p;
    }
    const uint32_t idx = call - kWarmCalls;
    if (idx >= trials) {
      // Decided (or, for the call begun before the last trial's time is
      // absorbed, as good as: the same table on every rank). Untimed.
      p.decided = true;
      p.pick = best_of(c, order[0]);
      p.way = shm_way(static_cast<ShmStrategy>(p.pick + 1));
      return p;
    }
    // The first calls of a trial leave the caches as this way leaves them
    // (untimed); the last is timed. Each round tries every way once.
    const uint32_t in_round = idx % (kTrialCalls * static_cast<uint32_t>(nw));
    p.pick = order[in_round / kTrialCalls];
    p.timed = in_round % kTrialCalls == kTrialCalls - 1;
    p.way = shm_way(static_cast<ShmStrategy>(p.pick + 1));
    return p;
  }

  // The measured way with the lowest time per byte (ties: the lower index);
  // `fallback` if none is measured yet.
  static int best_of(const Class& c, int fallback) {
    int pick = -1;
    for (int w = 0; w < c.ways; ++w) {
      if (c.samples[w] != 0 && (pick < 0 || c.best[w] < c.best[pick]))
        pick = w;
    }
    return pick < 0 ? fallback : pick;
  }
  ShmStrategy forced_;
  std::array<std::array<Class, kClasses>, kKinds> table_{};
  struct Record {
    int kind = 0;
    size_t cls = 0;
    int pick = 0;
    size_t bytes = 1;
    bool watch = false;  // a call of the choice, not a trial
  };
  Record cur_;                   // the op begun last
  Record done_;                  // the op whose time is being reported
  Record decided_{-1, 0, 0, 1};  // the class that decided at the last absorb
  bool timing_ = false;
  bool reported_ = false;
  uint64_t report_ = 0;
};

}  // namespace jaccl::detail
