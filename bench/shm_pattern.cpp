// Copyright 2026 the jaccl authors.
// shm_pattern: the shared-memory all_sum pipeline's access pattern replayed
// outside jaccl, one knob at a time, to find out what makes it slow or fast
// on a machine (see BENCHMARKS.md, interpretation).
//
//   shm_pattern [--ranks 2] [--sizes 64K,256K,1M,4M,16M,64M] [--reps 20]
//               [--chunk 512K] [--piece 32K] [--out memcpy|nt|movsb|loop]
//               [--stage memcpy|nt|movsb|loop] [--skip stage,reduce,copy]
//               [--res memcpy|nt] [--pin] [--algo pipe|flat|cma|xchg|gather]
//               [--own input|slot] [--syncs 1|2]
//   shm_pattern --offsets [--piece 32K]
//
// Ranks are processes (fork) sharing one memfd mapping, as in jaccl; each
// has its own private input and output. `pipe` is ShmGroup::reduce_large:
// body k stages chunk k (the slices peers reduce) into this rank's slot,
// reduces this rank's slice of chunk k - 1 into the shared result, copies
// chunk k - 2's result out, the three in interleaved pieces, then one
// barrier. `flat` is one chunk of the whole message (stage all, barrier,
// reduce own slice, barrier, copy all out). `cma` is Open MPI's large-message
// path: process_vm_readv of the peer's slice straight from its input, reduce,
// publish the reduced slice in shared memory, barrier, copy out. `xchg`
// reads every peer's whole input with process_vm_readv, a --piece at a time,
// and reduces all of them itself (no shared writes at all). `gather`
// is ShmGroup::all_gather's staged way (sizes are per rank; --own slot
// copies the own block back from the rank's slot, as jaccl did before
// 2026-12-01; --syncs 2 uses one slot and a second sync per op).
// Prints one JSON line per size (busbw as nccl-tests, median of reps).
// --offsets: one core, no sharing: copies 1 MiB in pieces with memcpy, an
// explicit `rep movsb` and a 16-byte load/store loop, for several distances
// (dst - src) mod 4096, one JSON line each (best of 15, GB/s).
#include <emmintrin.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "common/reduce.h"
#include "jaccl/types.h"
#include "transport/shm_copy.h"

namespace {

using Clock = std::chrono::steady_clock;

size_t parse_size(const std::string& s) {
  size_t v = std::strtoull(s.c_str(), nullptr, 10);
  char u = s.empty() ? 0 : s.back();
  if (u == 'K')
    v <<= 10;
  if (u == 'M')
    v <<= 20;
  return v;
}

enum class Copy { Memcpy, Nt, Movsb, Loop };

Copy parse_copy(const std::string& s) {
  if (s == "nt")
    return Copy::Nt;
  if (s == "movsb")
    return Copy::Movsb;
  if (s == "loop")
    return Copy::Loop;
  return Copy::Memcpy;
}

void copy(Copy how, void* dst, const void* src, size_t n) {
  if (n == 0)
    return;
  auto* d = static_cast<char*>(dst);
  auto* s = static_cast<const char*>(src);
  switch (how) {
    case Copy::Memcpy:
      std::memcpy(d, s, n);
      return;
    case Copy::Movsb:
      asm volatile("rep movsb" : "+D"(d), "+S"(s), "+c"(n) : : "memory");
      return;
    case Copy::Loop:
    case Copy::Nt: {
      // jaccl's own line loop (transport/shm_copy.h).
      const size_t body = n & ~size_t(63);
      if (how == Copy::Nt)
        jaccl::detail::copy_lines<true>(d, s, body);
      else
        jaccl::detail::copy_lines<false>(d, s, body);
      std::memcpy(d + body, s + body, n - body);
      if (how == Copy::Nt)
        _mm_sfence();
      return;
    }
  }
}

// jaccl's own float32 kernels (common/reduce.h), so the replay reduces as
// fast as jaccl does: a plain loop here was not vectorized at -O2 and ran
// at a third of jaccl's speed, which misplaced where the time goes.
void add3(float* out, const float* a, const float* b, size_t n) {
  jaccl::detail::reduce3(jaccl::detail::ReduceOp::Sum, jaccl::Float32, out, a,
                         b, n);
}
void add_into(float* out, const float* a, size_t n) {
  jaccl::detail::reduce_into(jaccl::detail::ReduceOp::Sum, jaccl::Float32, out,
                             a, n);
}

struct alignas(64) Arrive {
  std::atomic<uint64_t> v;
  pid_t pid;
  uint64_t src_addr;
};

struct Opts {
  int ranks = 2;
  std::vector<size_t> sizes{64 << 10, 256 << 10, 1 << 20,
                            4 << 20,  16 << 20,  64 << 20};
  int reps = 20;
  size_t chunk = 512 << 10;
  size_t piece = 32 << 10;
  Copy out = Copy::Memcpy, stage = Copy::Memcpy;
  bool skip_stage = false, skip_reduce = false, skip_copy = false;
  bool pin = false, yield = false;
  bool res_nt = false;  // reduce into a small private buffer, stream it out
  std::string algo = "pipe";
  bool own_from_slot = false;     // gather: own block copied back from the slot
  bool gather_two_syncs = false;  // gather: one slot, a second sync per op
};

size_t align64(size_t v) {
  return (v + 63) / 64 * 64;
}

void slice_of(size_t len, int n, int r, size_t* off, size_t* bytes) {
  size_t q = align64((len + n - 1) / n);
  size_t b = std::min(len, q * r), e = std::min(len, b + q);
  *off = b;
  *bytes = e - b;
}

size_t bound(size_t total, size_t j, size_t parts) {
  return j >= parts ? total : total * j / parts / 64 * 64;
}

struct Rank {
  const Opts& o;
  int r;
  char* seg;
  size_t slot_bytes;
  Arrive* arr;
  uint64_t step = 0;

  char* slot(int q, uint64_t s) const {
    return seg + (static_cast<size_t>(q) * 2 + (s & 1)) * slot_bytes;
  }
  char* result(uint64_t s) const {
    return seg + (static_cast<size_t>(o.ranks) * 2 + (s & 1)) * slot_bytes;
  }
  void barrier() {
    ++step;
    arr[r].v.store(step, std::memory_order_release);
    for (int q = 0; q < o.ranks; ++q) {
      while (arr[q].v.load(std::memory_order_acquire) < step) {
        _mm_pause();
        if (o.yield)
          sched_yield();
      }
    }
  }

  std::vector<float> tmp;
  void pipe(const char* src, char* dst, size_t n) {
    if (o.res_nt && tmp.size() < o.chunk / 4)
      tmp.resize(o.chunk / 4);
    const size_t chunk = std::min(o.chunk, slot_bytes);
    const size_t chunks = (n + chunk - 1) / chunk;
    auto len_of = [&](size_t k) { return std::min(chunk, n - k * chunk); };
    for (size_t k = 0; k <= chunks + 1; ++k) {
      size_t ls = k < chunks ? len_of(k) : 0;
      size_t lr = k >= 1 && k - 1 < chunks ? len_of(k - 1) : 0;
      size_t lc = k >= 2 ? len_of(k - 2) : 0;
      size_t sso, ssb, rso, rsb;
      slice_of(ls, o.ranks, r, &sso, &ssb);
      slice_of(lr, o.ranks, r, &rso, &rsb);
      size_t stage_total = ls - ssb;
      const char* sf = src + k * chunk;
      char* st = slot(r, step + 1);
      const char* own = src + (k - 1) * chunk + rso;
      char* res = result(step + 1) + rso;
      const char* of = result(step);
      char* ot = dst + (k - 2) * chunk;
      size_t parts = std::max<size_t>(1, std::max({ls, lr, lc}) / o.piece);
      for (size_t j = 0; j < parts; ++j) {
        size_t a = bound(stage_total, j, parts),
               b = bound(stage_total, j + 1, parts);
        if (!o.skip_stage) {
          if (a < sso)
            copy(o.stage, st + a, sf + a, std::min(b, sso) - a);
          if (b > sso) {
            size_t x = std::max(a, sso);
            copy(o.stage, st + x + ssb, sf + x + ssb, b - x);
          }
        }
        a = bound(rsb, j, parts);
        b = bound(rsb, j + 1, parts);
        if (b > a && !o.skip_reduce) {
          auto part = [&](int q) -> const float* {
            return reinterpret_cast<const float*>(
                q == r ? own + a : slot(q, step) + rso + a);
          };
          float* into =
              o.res_nt ? tmp.data() : reinterpret_cast<float*>(res + a);
          add3(into, part(0), part(1), (b - a) / 4);
          for (int q = 2; q < o.ranks; ++q)
            add_into(into, part(q), (b - a) / 4);
          if (o.res_nt)
            copy(Copy::Nt, res + a, into, b - a);
        }
        a = bound(lc, j, parts);
        b = bound(lc, j + 1, parts);
        if (!o.skip_copy)
          copy(o.out, ot + a, of + a, b - a);
      }
      if (k <= chunks)
        barrier();
    }
  }

  // Whole message at once (n <= slot_bytes): stage, sync, reduce, sync,
  // copy out.
  void flat(const char* src, char* dst, size_t n) {
    size_t so, sb;
    slice_of(n, o.ranks, r, &so, &sb);
    char* st = slot(r, step + 1);
    copy(o.stage, st, src, so);
    copy(o.stage, st + so + sb, src + so + sb, n - so - sb);
    barrier();
    char* res = result(step + 1) + so;
    auto part = [&](int q) -> const float* {
      return reinterpret_cast<const float*>(q == r ? src + so
                                                   : slot(q, step) + so);
    };
    add3(reinterpret_cast<float*>(res), part(0), part(1), sb / 4);
    for (int q = 2; q < o.ranks; ++q)
      add_into(reinterpret_cast<float*>(res), part(q), sb / 4);
    barrier();
    copy(o.out, dst, result(step), n);
  }

  // len bytes of rank q's input from offset off into tmp (exits on error).
  void read_input(int q, size_t off, char* tmp, size_t len) const {
    iovec l{tmp, len};
    iovec rm{reinterpret_cast<void*>(arr[q].src_addr + off), len};
    if (process_vm_readv(arr[q].pid, &l, 1, &rm, 1, 0) !=
        static_cast<ssize_t>(len)) {
      std::perror("process_vm_readv");
      std::exit(1);
    }
  }

  // Open MPI style: read peers' slices of their inputs with
  // process_vm_readv into this rank's slot, reduce into the shared result,
  // sync, copy out. n <= slot_bytes.
  void cma(const char* src, char* dst, size_t n) {
    size_t so, sb;
    slice_of(n, o.ranks, r, &so, &sb);
    char* res = result(step + 1) + so;
    std::memcpy(res, src + so, sb);
    char* tmp = slot(r, 0);
    for (int q = 0; q < o.ranks; ++q) {
      if (q == r)
        continue;
      read_input(q, so, tmp, sb);
      add_into(reinterpret_cast<float*>(res), reinterpret_cast<float*>(tmp),
               sb / 4);
    }
    barrier();
    copy(o.out, dst, result(step), n);
    barrier();  // peers finished reading my input
  }

  // Full exchange, no shared writes: every rank reads each peer's whole
  // input with process_vm_readv, a piece at a time into a private
  // cache-sized buffer, and reduces all inputs in rank order into its
  // output (the same bits on every rank). Sync: inputs ready (the
  // harness's barrier), reads done.
  std::vector<char> xbuf;
  void xchg(const char* src, char* dst, size_t n) {
    const size_t piece = std::min(o.piece, n);
    if (xbuf.size() < piece * static_cast<size_t>(o.ranks))
      xbuf.resize(piece * static_cast<size_t>(o.ranks));
    for (size_t off = 0; off < n; off += piece) {
      size_t len = std::min(piece, n - off);
      auto part = [&](int q) -> const float* {
        if (q == r)
          return reinterpret_cast<const float*>(src + off);
        char* tmp = xbuf.data() + static_cast<size_t>(q) * piece;
        read_input(q, off, tmp, len);
        return reinterpret_cast<const float*>(tmp);
      };
      float* out = reinterpret_cast<float*>(dst + off);
      const float* p0 = part(0);
      add3(out, p0, part(1), len / 4);
      for (int q = 2; q < o.ranks; ++q)
        add_into(out, part(q), len / 4);
    }
    barrier();  // peers finished reading my input
  }

  // ShmGroup::all_gather's staged way for n <= slot_bytes: stage into the
  // slot of the next step's parity, one sync, copy every block out (this
  // rank's from its input, or with --own slot from its slot). --syncs 2:
  // one slot and a second sync instead of the parity.
  void gather(const char* src, char* dst, size_t n) {
    const uint64_t s = o.gather_two_syncs ? 0 : step + 1;
    copy(o.stage, slot(r, s), src, n);
    barrier();
    for (int q = 0; q < o.ranks; ++q) {
      const char* from = q == r && !o.own_from_slot
                             ? src
                             : slot(q, o.gather_two_syncs ? 0 : step);
      copy(o.out, dst + static_cast<size_t>(q) * n, from, n);
    }
    if (o.gather_two_syncs)
      barrier();
  }
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int offsets(size_t piece) {
  const size_t total = 1 << 20;
  auto map = [&] {
    void* p = mmap(nullptr, total + 8192, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    std::memset(p, 1, total + 8192);
    return static_cast<char*>(p);
  };
  char* a = map();
  char* b = map();
  for (int off : {0, 8, 16, 24, 32, 40, 48, 64, 2064, 4080, 4112}) {
    double best[3] = {0, 0, 0};
    for (int m = 0; m < 3; ++m) {
      Copy how = m == 0 ? Copy::Memcpy : m == 1 ? Copy::Movsb : Copy::Loop;
      for (int r = 0; r < 15; ++r) {
        auto t0 = Clock::now();
        for (size_t i = 0; i < total; i += piece)
          copy(how, b + off + i, a + i, std::min(piece, total - i));
        double s = std::chrono::duration<double>(Clock::now() - t0).count();
        best[m] = std::max(best[m], static_cast<double>(total) / s / 1e9);
      }
    }
    std::printf(
        "{\"dst_minus_src_mod_4096\":%d,\"piece\":%zu,\"memcpy_gbps\":%.2f,"
        "\"rep_movsb_gbps\":%.2f,\"loop_gbps\":%.2f}\n",
        off, piece, best[0], best[1], best[2]);
  }
  return 0;
}

int main(int argc, char** argv) {
  Opts o;
  bool offs = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--ranks")
      o.ranks = std::atoi(next().c_str());
    else if (a == "--reps")
      o.reps = std::atoi(next().c_str());
    else if (a == "--chunk")
      o.chunk = parse_size(next());
    else if (a == "--piece")
      o.piece = parse_size(next());
    else if (a == "--out")
      o.out = parse_copy(next());
    else if (a == "--stage")
      o.stage = parse_copy(next());
    else if (a == "--offsets")
      offs = true;
    else if (a == "--res")
      o.res_nt = next() == "nt";
    else if (a == "--pin")
      o.pin = true;
    else if (a == "--yield")
      o.yield = true;
    else if (a == "--algo")
      o.algo = next();
    else if (a == "--own")
      o.own_from_slot = next() == "slot";
    else if (a == "--syncs")
      o.gather_two_syncs = next() == "2";
    else if (a == "--skip") {
      std::string s = next();
      o.skip_stage = s.find("stage") != std::string::npos;
      o.skip_reduce = s.find("reduce") != std::string::npos;
      o.skip_copy = s.find("copy") != std::string::npos;
    } else if (a == "--sizes") {
      o.sizes.clear();
      std::string s = next();
      size_t at = 0;
      while (at < s.size()) {
        size_t c = s.find(',', at);
        if (c == std::string::npos)
          c = s.size();
        o.sizes.push_back(parse_size(s.substr(at, c - at)));
        at = c + 1;
      }
    } else {
      std::fprintf(stderr, "unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  if (offs)
    return offsets(o.piece);
  size_t maxn = *std::max_element(o.sizes.begin(), o.sizes.end());
  // Slots as jaccl sizes them at the default 64 MiB budget (4 MiB at 2
  // ranks), or the whole message for flat / cma.
  size_t slot_bytes =
      o.algo == "pipe" ? std::max<size_t>(o.chunk, 4 << 20) : align64(maxn);
  const bool gather = o.algo == "gather";
  size_t ctl = 4096;
  size_t total = ctl + (2 * static_cast<size_t>(o.ranks) + 2) * slot_bytes;
  int fd = memfd_create("shm_pattern", 0);
  if (fd < 0 || ftruncate(fd, static_cast<off_t>(total)) != 0) {
    std::perror("memfd");
    return 1;
  }
  char* base = static_cast<char*>(
      mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
  std::memset(base, 0, total);
  auto* arr = reinterpret_cast<Arrive*>(base);
  auto* results = reinterpret_cast<double*>(base + 2048);
  std::vector<pid_t> kids;
  for (int r = 0; r < o.ranks; ++r) {
    pid_t p = fork();
    if (p == 0) {
      if (o.pin) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(r % std::thread::hardware_concurrency(), &set);
        sched_setaffinity(0, sizeof(set), &set);
      }
      Rank rk{o, r, base + ctl, slot_bytes, arr, 0, {}, {}};
      std::vector<char> src(maxn),
          dst(gather ? maxn * static_cast<size_t>(o.ranks) : maxn);
      for (size_t i = 0; i < maxn / 4; ++i)
        reinterpret_cast<float*>(src.data())[i] = static_cast<float>(i % 7);
      arr[r].pid = getpid();
      arr[r].src_addr = reinterpret_cast<uint64_t>(src.data());
      for (size_t si = 0; si < o.sizes.size(); ++si) {
        size_t n = o.sizes[si];
        std::vector<double> t;
        for (int rep = -3; rep < o.reps; ++rep) {
          rk.barrier();
          auto t0 = Clock::now();
          if (gather)
            rk.gather(src.data(), dst.data(), n);
          else if (o.algo == "flat")
            rk.flat(src.data(), dst.data(), n);
          else if (o.algo == "cma")
            rk.cma(src.data(), dst.data(), n);
          else if (o.algo == "xchg")
            rk.xchg(src.data(), dst.data(), n);
          else
            rk.pipe(src.data(), dst.data(), n);
          double us =
              std::chrono::duration<double, std::micro>(Clock::now() - t0)
                  .count();
          if (rep >= 0)
            t.push_back(us);
        }
        if (r == 0) {
          float want = 2.0f * static_cast<float>((n / 4 - 1) % 7) *
                       static_cast<float>(o.ranks) / 2.0f;
          float got = reinterpret_cast<float*>(dst.data())[n / 4 - 1];
          if (gather) {  // every rank's block is the same pattern
            want = static_cast<float>((n / 4 - 1) % 7);
            got = reinterpret_cast<float*>(dst.data() +
                                           (o.ranks - 1) * n)[n / 4 - 1];
          }
          results[si] = median(t);
          if (!o.skip_stage && !o.skip_reduce && !o.skip_copy && got != want)
            results[si] = -1;
        }
      }
      _exit(0);
    }
    kids.push_back(p);
  }
  for (pid_t p : kids)
    waitpid(p, nullptr, 0);
  for (size_t si = 0; si < o.sizes.size(); ++si) {
    double us = results[si];
    // nccl-tests' busbw: all_sum algbw * 2(n-1)/n; all_gather (whole
    // output n * bytes) algbw * (n-1)/n.
    double bus =
        us > 0 ? static_cast<double>(o.sizes[si]) / us / 1e3 *
                     (gather ? (o.ranks - 1) : 2.0 * (o.ranks - 1) / o.ranks)
               : -1;
    std::printf(
        "{\"ranks\":%d,\"bytes\":%zu,\"us\":%.1f,\"busbw_gbps\":%.2f}\n",
        o.ranks, o.sizes[si], us, bus);
  }
  return 0;
}
