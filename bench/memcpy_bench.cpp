// Copyright 2026 the jaccl authors.
// memcpy_bench: the memory ceilings bench/compare's rooflines divide by.
//
//   memcpy_bench [SIZE=64] [reps=20]     # SIZE in MiB, or 64K, 256K, 4M
//   memcpy_bench handoff [iters=200000]
//   memcpy_bench touch [reps=5]
//
// Size mode (one JSON line): two pre-faulted buffers of SIZE; memcpy one into
// the other and report the best and the median copy bandwidth (bytes copied
// per second; a sample copies at least 8 MiB, so small sizes are not clock
// reads). Also:
// - a copy with non-temporal stores (SSE2 streaming stores: what a copy
//   larger than the caches can use instead of memcpy's; x86-64 only);
// - a plain loop of 16-byte loads and stores (what jaccl's shared-memory
//   copies use: glibc's memcpy takes `rep movsb` up to about the L2 size,
//   which some CPUs run at a fraction of their speed, AMD Zen 3 on lines
//   another core holds among them; x86-64 only);
// - all cores at once: one thread per CPU of our affinity mask, each copying
//   its own pair of buffers, same count, started together; aggregate bytes
//   per second over the slowest thread (median of reps; the faster of
//   memcpy and streaming stores);
// - cross-process read: process_vm_readv of one forked process's SIZE
//   buffer into another's (what a CMA collective costs per byte; null if
//   not allowed), alone and on every CPU at once (each process reading the
//   next one's buffer, as the ranks of a collective do together);
// - cross-core copies (xcore): the owner's copy into a shared buffer the
//   other core read last, the other core's copy out of it, with cached and
//   with streaming stores on the owner's side (each side copying by memcpy
//   or by the loop, whichever pair is faster: the machine's rate, not
//   glibc's choice of instruction);
// - a float32 c = a + b pass (the inner loop of a reduction), as bytes of c
//   produced per second and as bytes touched (read a, b, write c).
// Handoff mode: the latency floors of a shared-memory collective. Two
// threads on two CPUs bounce a cache line (half the round trip: one
// cross-core handoff), and two threads pinned to one CPU take turns with
// sched_yield (one context switch, what each call costs per rank beyond the
// first on an oversubscribed core).
// Touch mode: what fresh memory costs per 4 KiB page, the floor under every
// first call that fills new buffers (bootstrap above all): a first write
// from user space (the page fault), then the kernel's first write into
// those already-faulted pages (a read() from a socket, as a receive does)
// and its second. On bare metal the kernel's writes cost the copy; a VM
// that shadows page tables charges the first one again.
#include <pthread.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#include <sched.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

double median(std::vector<double> v) {
  if (v.empty())
    return NAN;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

#if defined(__SSE2__)
// A line per step through 16-byte loads, and ordinary (Stream false) or
// streaming stores (then a fence; dst 16-aligned); n a multiple of 64.
template <bool Stream>
__attribute__((noinline)) void lines_copy(char* dst, const char* src,
                                          size_t n) {
  for (size_t i = 0; i < n; i += 64) {
    __m128i v[4];
    for (int k = 0; k < 4; ++k)
      v[k] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i) + k);
    for (int k = 0; k < 4; ++k) {
      auto* to = reinterpret_cast<__m128i*>(dst + i) + k;
      if constexpr (Stream)
        _mm_stream_si128(to, v[k]);
      else
        _mm_storeu_si128(to, v[k]);
    }
  }
  if constexpr (Stream)
    _mm_sfence();
}

// Streaming stores: what a copy larger than the caches can use.
void nt_copy(char* dst, const char* src, size_t n) {
  lines_copy<true>(dst, src, n);
}

// Ordinary stores: jaccl's own copy loop (shm_copy.h), without `rep movsb`.
void loop_copy(char* dst, const char* src, size_t n) {
  lines_copy<false>(dst, src, n);
}
#endif

__attribute__((noinline)) void add(float* c, const float* a, const float* b,
                                   size_t n) {
  for (size_t i = 0; i < n; ++i)
    c[i] = a[i] + b[i];
}

// "64" (MiB), "64K", "256K", "4M" -> bytes.
size_t parse_size(const char* s) {
  char* end = nullptr;
  double v = std::strtod(s, &end);
  std::string suf = end ? end : "";
  if (suf == "K" || suf == "k")
    return static_cast<size_t>(v * 1024);
  return static_cast<size_t>(v * 1048576);  // "", "M"
}

std::vector<int> our_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set))
        cpus.push_back(c);
  }
  return cpus;
}

void pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

using CopyFn = void (*)(char*, const char*, size_t);

void libc_copy(char* dst, const char* src, size_t n) {
  std::memcpy(dst, src, n);
}

// One thread per CPU, each copying its own buffers `copies` times per
// sample, all released together; aggregate GB/s over the slowest thread.
double all_cores(size_t bytes, int copies, int reps, CopyFn copy) {
  auto cpus = our_cpus();
  int t = static_cast<int>(cpus.size());
  if (t < 2)
    return NAN;
  std::vector<double> agg;
  std::vector<std::vector<char>> src(t), dst(t);
  for (int i = 0; i < t; ++i) {
    src[i].assign(bytes, 1);
    dst[i].assign(bytes, 2);
  }
  for (int r = 0; r < reps + 1; ++r) {  // the first sample is a warm-up
    std::atomic<int> ready{0};
    std::atomic<bool> go{false};
    std::vector<double> secs(t);
    std::vector<std::thread> th;
    for (int i = 0; i < t; ++i) {
      th.emplace_back([&, i] {
        pin(cpus[i]);
        ready.fetch_add(1);
        ready.notify_one();
        // Futex waits, not spins, on both sides: under SCHED_FIFO a spinning
        // thread keeps an equal-priority one off its CPU for good, so a
        // thread not yet pinned (or the releasing main thread) never ran.
        go.wait(false, std::memory_order_acquire);
        auto t0 = Clock::now();
        for (int k = 0; k < copies; ++k)
          copy(dst[i].data(), src[i].data(), bytes);
        secs[i] = seconds_since(t0);
      });
    }
    for (int now = ready.load(); now < t; now = ready.load())
      ready.wait(now);
    go.store(true, std::memory_order_release);
    go.notify_all();
    for (auto& x : th)
      x.join();
    if (r > 0)
      agg.push_back(static_cast<double>(bytes) * copies * t /
                    *std::max_element(secs.begin(), secs.end()) / 1e9);
  }
  return median(agg);
}

// process_vm_readv between forked processes: `procs` of them (pinned to
// our CPUs in turn), each with a buffer of its own mapped after the fork;
// the first `readers` read the next one's buffer into theirs `copies` times
// per sample, released together through pipes, while the rest idle.
// Aggregate GB/s over the slowest reader, median of reps after a warm-up;
// NAN if not permitted. Each process maps its own buffers: buffers the
// parent allocates before the forks sit at whatever distance its heap
// gives them, and at a distance of 1-31 bytes mod 4096 the kernel's copy
// crawls (src/common/copy.h; 1.5 GB/s a process here, the first time).
double cma_readers(size_t bytes, int copies, int reps, int readers, int procs) {
  const auto cpus = our_cpus();
  std::vector<int> go(procs), back(procs);
  std::vector<pid_t> pids;
  for (int i = 0; i < procs; ++i) {
    int g[2], b[2];
    if (pipe(g) != 0 || pipe(b) != 0)
      break;
    pid_t pid = fork();
    if (pid == 0) {
      close(g[1]);
      close(b[0]);
      for (size_t k = 0; k < pids.size(); ++k) {  // the earlier children's
        close(go[k]);
        close(back[k]);
      }
      if (!cpus.empty())
        pin(cpus[static_cast<size_t>(i) % cpus.size()]);
      auto map = [bytes](int fill) {
        void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
          std::_Exit(1);
        std::memset(p, fill, bytes);
        return static_cast<char*>(p);
      };
      char* src = map(10 + i);  // what the previous process reads
      char* dst = map(20 + i);
      const uint64_t at = reinterpret_cast<uint64_t>(src);
      if (write(b[1], &at, sizeof(at)) != sizeof(at))
        std::_Exit(1);
      pid_t from = 0;
      uint64_t remote = 0;
      if (read(g[0], &from, sizeof(from)) != sizeof(from) ||
          read(g[0], &remote, sizeof(remote)) != sizeof(remote))
        std::_Exit(1);
      char c;
      while (read(g[0], &c, 1) == 1) {  // until the parent closes: exit
        auto t0 = Clock::now();
        bool ok = true;
        for (int k = 0; k < copies && ok; ++k) {
          iovec l{dst, bytes};
          iovec r{reinterpret_cast<void*>(remote), bytes};
          ok = process_vm_readv(from, &l, 1, &r, 1, 0) ==
               static_cast<ssize_t>(bytes);
        }
        double sec = ok ? seconds_since(t0) : -1;
        if (write(b[1], &sec, sizeof(sec)) != sizeof(sec))
          std::_Exit(1);
      }
      std::_Exit(0);
    }
    close(g[0]);
    close(b[1]);
    go[pids.size()] = g[1];
    back[pids.size()] = b[0];
    pids.push_back(pid);
  }
  double res = NAN;
  const int made = static_cast<int>(pids.size());
  bool ok = made == procs;
  std::vector<uint64_t> addr(procs);
  for (int i = 0; i < made && ok; ++i)
    ok = read(back[i], &addr[i], sizeof(addr[i])) == sizeof(addr[i]);
  for (int i = 0; i < made && ok; ++i) {
    const int j = (i + 1) % procs;
    ok = write(go[i], &pids[j], sizeof(pids[j])) == sizeof(pids[j]) &&
         write(go[i], &addr[j], sizeof(addr[j])) == sizeof(addr[j]);
  }
  std::vector<double> agg;
  for (int r = 0; r < reps + 1 && ok; ++r) {  // the first is a warm-up
    for (int i = 0; i < readers && ok; ++i)
      ok = write(go[i], "x", 1) == 1;
    double slowest = 0;
    for (int i = 0; i < readers && ok; ++i) {
      double sec = -1;
      ok = read(back[i], &sec, sizeof(sec)) == sizeof(sec) && sec > 0;
      slowest = std::max(slowest, sec);
    }
    if (ok && r > 0)
      agg.push_back(static_cast<double>(bytes) * copies * readers / slowest /
                    1e9);
  }
  if (ok)
    res = median(agg);
  for (int i = 0; i < made; ++i)
    close(go[i]);  // each child's read ends: it exits
  for (int i = 0; i < made; ++i) {
    waitpid(pids[i], nullptr, 0);
    close(back[i]);
  }
  return res;
}

// One process reading another's buffer (what a CMA collective costs per
// byte).
double cma(size_t bytes, int copies, int reps) {
  return cma_readers(bytes, copies, reps, 1, 2);
}

// Every CPU of our mask reading its neighbour's buffer at once, as the
// ranks of a collective do; NAN with fewer than two CPUs.
double cma_all_cores(size_t bytes, int copies, int reps) {
  const int t = static_cast<int>(our_cpus().size());
  return t < 2 ? NAN : cma_readers(bytes, copies, reps, t, t);
}

// Cross-core copies: a writer on our first CPU copies its private buffer
// into a shared one whose lines the reader on our second CPU read last
// round; then the reader copies the shared buffer (lines the writer just
// wrote) into its own. Median GB/s of each side's copies: what staging
// costs the owner and the receiver of a shared-memory collective. nt: the
// writer uses streaming stores. {NAN, NAN} with fewer than 2 CPUs.
struct XCore {
  double write, read;
};

XCore xcore(size_t bytes, int rounds, CopyFn writer_copy, CopyFn reader_copy) {
  auto cpus = our_cpus();
  if (cpus.size() < 2)
    return {NAN, NAN};
  std::vector<char> mine(bytes, 5), shared(bytes, 6), theirs(bytes, 7);
  std::atomic<int> turn{0};  // even: the writer's, odd: the reader's
  // At most ~2 s: on a busy machine every round waits for both threads to
  // be scheduled. The writer decides when to stop (rounds = -1 to stop).
  std::atomic<int> last{rounds};
  auto deadline = Clock::now() + std::chrono::seconds(2);
  std::vector<double> w, r;
  std::thread reader([&] {
    pin(cpus[1]);
    for (int i = 0; i < last.load(); ++i) {
      while (turn.load(std::memory_order_acquire) != 2 * i + 1) {
        if (i >= last.load())
          return;
      }
      auto t0 = Clock::now();
      reader_copy(theirs.data(), shared.data(), bytes);
      r.push_back(static_cast<double>(bytes) / seconds_since(t0) / 1e9);
      turn.store(2 * i + 2, std::memory_order_release);
    }
  });
  std::thread writer([&] {
    pin(cpus[0]);
    for (int i = 0; i < rounds; ++i) {
      // Bounded too: under SCHED_FIFO with both threads on one CPU (a pin
      // refused), the reader never runs while the writer spins.
      bool stuck = false;
      while (turn.load(std::memory_order_acquire) != 2 * i) {
        if (Clock::now() > deadline + std::chrono::seconds(1)) {
          stuck = true;
          break;
        }
      }
      if (stuck) {
        last.store(i);
        break;
      }
      if (i >= 4 && Clock::now() > deadline) {
        last.store(i);  // the reader stops at the same round
        break;
      }
      auto t0 = Clock::now();
      writer_copy(shared.data(), mine.data(), bytes);
      w.push_back(static_cast<double>(bytes) / seconds_since(t0) / 1e9);
      turn.store(2 * i + 1, std::memory_order_release);
    }
  });
  writer.join();
  reader.join();
  // The first two rounds warm the buffers.
  w.erase(w.begin(), w.begin() + std::min<size_t>(2, w.size()));
  r.erase(r.begin(), r.begin() + std::min<size_t>(2, r.size()));
  return {median(w), median(r)};
}

// The pair whose copy in and copy out take the least time together.
XCore faster(XCore a, XCore b) {
  auto cost = [](XCore x) {
    return std::isnan(x.write) || std::isnan(x.read) ? INFINITY
                                                     : 1 / x.write + 1 / x.read;
  };
  return cost(b) < cost(a) ? b : a;
}

int size_mode(size_t bytes, int reps) {
  // Copies per sample: at least 8 MiB of copying per clock read.
  int copies = static_cast<int>(std::max<size_t>(1, (size_t(8) << 20) / bytes));
  std::vector<char> a(bytes), b(bytes), c(bytes);  // value-initialized
  std::memset(a.data(), 1, bytes);
  std::memset(b.data(), 2, bytes);
  std::memset(c.data(), 3, bytes);
  for (int i = 0; i < 2; ++i)  // warm-up
    std::memcpy(b.data(), a.data(), bytes);
  std::vector<double> copy_gbps, add_gbps;
  for (int r = 0; r < reps; ++r) {
    auto t0 = Clock::now();
    for (int k = 0; k < copies; ++k)
      std::memcpy(r % 2 ? a.data() : b.data(), r % 2 ? b.data() : a.data(),
                  bytes);
    copy_gbps.push_back(static_cast<double>(bytes) * copies /
                        seconds_since(t0) / 1e9);
  }
  double nt = NAN, loop = NAN;
#if defined(__SSE2__)
  {
    size_t n64 = bytes / 64 * 64;  // vectors are 16-aligned (operator new)
    // Median GB/s of `copy` back and forth, after one untimed sample.
    auto rate = [&](CopyFn copy) {
      std::vector<double> g;
      for (int r = 0; r < reps + 1; ++r) {
        auto t0 = Clock::now();
        for (int k = 0; k < copies; ++k)
          copy(r % 2 ? a.data() : b.data(), r % 2 ? b.data() : a.data(), n64);
        if (r > 0)
          g.push_back(static_cast<double>(n64) * copies / seconds_since(t0) /
                      1e9);
      }
      return median(g);
    };
    nt = rate(nt_copy);
    loop = rate(loop_copy);
  }
#endif
  size_t nf = bytes / sizeof(float);
  auto* fa = reinterpret_cast<float*>(a.data());
  auto* fb = reinterpret_cast<float*>(b.data());
  auto* fc = reinterpret_cast<float*>(c.data());
  add(fc, fa, fb, nf);
  for (int r = 0; r < reps; ++r) {
    auto t0 = Clock::now();
    for (int k = 0; k < copies; ++k)
      add(fc, fa, fb, nf);
    add_gbps.push_back(static_cast<double>(bytes) * copies / seconds_since(t0) /
                       1e9);
  }
  volatile char sink = c[bytes / 2] + a[bytes / 3];
  (void)sink;
  int ncpu = static_cast<int>(our_cpus().size());
  // The faster way for all cores at once too.
  double all = all_cores(bytes, copies, std::max(3, reps / 4), libc_copy);
#if defined(__SSE2__)
  if (bytes % 64 == 0)
    all =
        std::max(all, all_cores(bytes, copies, std::max(3, reps / 4), nt_copy));
#endif
  double cm = cma(bytes, copies, std::max(3, reps / 4));
  double cm_all = cma_all_cores(bytes, copies, std::max(3, reps / 4));
  // Enough rounds for a steady median, fewer for big buffers.
  int rounds = static_cast<int>(
      std::clamp<size_t>((size_t(256) << 20) / bytes, 10, 400));
  XCore xc = xcore(bytes, rounds, libc_copy, libc_copy), xn{NAN, NAN};
#if defined(__SSE2__)
  if (bytes % 64 == 0) {
    xc = faster(xc, xcore(bytes, rounds, loop_copy, loop_copy));
    xn = faster(xcore(bytes, rounds, nt_copy, libc_copy),
                xcore(bytes, rounds, nt_copy, loop_copy));
  }
#endif
  auto num = [](double v) {
    char s[32];
    if (std::isnan(v))
      return std::string("null");
    std::snprintf(s, sizeof(s), "%.3f", v);
    return std::string(s);
  };
  std::printf(
      "{\"buffer_mib\":%.4g,\"buffer_bytes\":%zu,\"reps\":%d,"
      "\"memcpy_best_gbps\":%.3f,\"memcpy_median_gbps\":%.3f,"
      "\"nt_median_gbps\":%s,\"loop_median_gbps\":%s,"
      "\"cores\":%d,\"memcpy_all_cores_gbps\":%s,\"cma_median_gbps\":%s,"
      "\"cma_all_cores_gbps\":%s,"
      "\"xcore_write_gbps\":%s,\"xcore_read_gbps\":%s,"
      "\"xcore_nt_write_gbps\":%s,\"xcore_nt_read_gbps\":%s,"
      "\"add_best_gbps\":%.3f,\"add_median_gbps\":%.3f,"
      "\"add_touched_median_gbps\":%.3f}\n",
      static_cast<double>(bytes) / 1048576.0, bytes, reps,
      *std::max_element(copy_gbps.begin(), copy_gbps.end()), median(copy_gbps),
      num(nt).c_str(), num(loop).c_str(), ncpu, num(all).c_str(),
      num(cm).c_str(), num(cm_all).c_str(), num(xc.write).c_str(),
      num(xc.read).c_str(), num(xn.write).c_str(), num(xn.read).c_str(),
      *std::max_element(add_gbps.begin(), add_gbps.end()), median(add_gbps),
      3 * median(add_gbps));
  return 0;
}

// Two threads pass a turn back and forth `iters` times; returns ns per
// handoff (half a round trip). yield: wait with sched_yield (same CPU).
double bounce(int cpu_a, int cpu_b, int iters, bool yield) {
  alignas(64) std::atomic<int> turn{0};
  auto player = [&](int cpu, int me) {
    pin(cpu);
    for (int i = 0; i < iters; ++i) {
      while (turn.load(std::memory_order_acquire) != me) {
        if (yield)
          sched_yield();
      }
      turn.store(1 - me, std::memory_order_release);
    }
  };
  // Both on threads of their own: the caller's CPU mask stays as it was.
  std::atomic<int> ready{0};
  Clock::time_point t0;
  auto start = [&](int cpu, int me) {
    pin(cpu);
    if (ready.fetch_add(1) == 1)
      t0 = Clock::now();  // the second to arrive starts the clock
    player(cpu, me);
  };
  std::thread a(start, cpu_a, 0), b(start, cpu_b, 1);
  a.join();
  b.join();
  return seconds_since(t0) * 1e9 / (2.0 * iters);
}

// Many short batches: the best is the floor the machine allows, the median
// what it gave most of the time (other work preempts long ones).
int handoff_mode(int iters) {
  auto cpus = our_cpus();
  const int batches = 100, per = std::max(50, iters / batches);
  std::vector<double> line, sw;
  // At most ~3 s (a busy machine makes every handoff wait for a slice).
  auto deadline = Clock::now() + std::chrono::seconds(3);
  for (int r = 0; r < batches && (r < 3 || Clock::now() < deadline); ++r) {
    if (cpus.size() >= 2)
      line.push_back(bounce(cpus[0], cpus[1], per, false));
    sw.push_back(bounce(cpus[0], cpus[0], per / 10 + 1, true));
  }
  std::sort(line.begin(), line.end());
  std::sort(sw.begin(), sw.end());
  auto num = [](const std::vector<double>& v, bool best) {
    char s[32];
    if (v.empty())
      return std::string("null");
    std::snprintf(s, sizeof(s), "%.1f", best ? v.front() : median(v));
    return std::string(s);
  };
  std::printf(
      "{\"handoff\":true,\"iters\":%d,\"line_oneway_median_ns\":%s,"
      "\"line_oneway_best_ns\":%s,\"switch_median_ns\":%s,"
      "\"switch_best_ns\":%s}\n",
      iters, num(line, false).c_str(), num(line, true).c_str(),
      num(sw, false).c_str(), num(sw, true).c_str());
  return 0;
}

// The kernel's writes into `buf` (`bytes`, a multiple of `chunk`): each
// chunk is sent into the socket (never blocking: this thread is also the
// reader) and read back into place; returns the seconds spent in the reads,
// or -1 after saying what failed.
double kernel_writes(int tx, int rx, const char* src, char* buf, size_t bytes,
                     size_t chunk) {
  double spent = 0;
  for (size_t off = 0; off < bytes; off += chunk) {
    const ssize_t sent = ::send(tx, src, chunk, MSG_DONTWAIT);
    if (sent != static_cast<ssize_t>(chunk)) {
      std::fprintf(stderr,
                   "memcpy_bench touch: the socket took %zd of %zu bytes "
                   "(%s)\n",
                   sent, chunk,
                   sent < 0 ? std::strerror(errno)
                            : "its send buffer is smaller: raise "
                              "net.core.wmem_max");
      return -1;
    }
    auto t0 = Clock::now();
    for (size_t got = 0; got < chunk;) {
      ssize_t k = ::read(rx, buf + off + got, chunk - got);
      if (k <= 0) {
        std::perror("memcpy_bench touch: read");
        return -1;
      }
      got += static_cast<size_t>(k);
    }
    spent += seconds_since(t0);
  }
  return spent;
}

int touch_mode(int reps) {
  const size_t page = 4096, chunk = size_t(256) << 10;
  const size_t bytes = size_t(16) << 20, pages = bytes / page;
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) {
    std::perror("memcpy_bench: socketpair");
    return 1;
  }
  int sz = static_cast<int>(2 * chunk);
  ::setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
  ::setsockopt(sv[1], SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz));
  std::vector<char> src(chunk, 3);
  std::vector<double> fault, first, again;
  for (int r = 0; r < reps; ++r) {
    void* m = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
      std::perror("memcpy_bench: mmap");
      return 1;
    }
    char* buf = static_cast<char*>(m);
    auto t0 = Clock::now();
    std::memset(buf, 1, bytes);
    fault.push_back(seconds_since(t0) * 1e9 / pages);
    const double k1 =
        kernel_writes(sv[0], sv[1], src.data(), buf, bytes, chunk);
    const double k2 =
        k1 < 0 ? -1
               : kernel_writes(sv[0], sv[1], src.data(), buf, bytes, chunk);
    ::munmap(m, bytes);
    if (k2 < 0) {
      return 1;
    }
    first.push_back(k1 * 1e9 / pages);
    again.push_back(k2 * 1e9 / pages);
  }
  std::printf(
      "{\"touch\":true,\"reps\":%d,\"page_bytes\":%zu,"
      "\"user_fault_median_ns\":%.0f,\"kernel_first_write_median_ns\":%.0f,"
      "\"kernel_later_write_median_ns\":%.0f}\n",
      reps, page, median(fault), median(first), median(again));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "handoff")
    return handoff_mode(argc > 2 ? std::atoi(argv[2]) : 200000);
  if (argc > 1 && std::string(argv[1]) == "touch")
    return touch_mode(std::max(1, argc > 2 ? std::atoi(argv[2]) : 5));
  size_t bytes = argc > 1 ? parse_size(argv[1]) : size_t(64) << 20;
  int reps = argc > 2 ? std::atoi(argv[2]) : 20;
  if (bytes < 64 || reps < 1) {
    std::fprintf(stderr, "memcpy_bench: bad size or reps\n");
    return 2;
  }
  return size_mode(bytes, reps);
}
