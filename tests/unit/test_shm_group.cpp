// Copyright 2026 the jaccl authors.
// ShmGroup with threads as ranks over one real shared-memory segment.
#include <gtest/gtest.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>
#include <thread>
#include <vector>

#include "collectives/shm_group.h"
#include "common/affinity.h"
#include "jaccl/jaccl.h"
#include "support/slowdown.h"
#include "transport/peer_copy.h"
#include "transport/shm_copy.h"
#include "transport/shm_sync.h"

using namespace jaccl;
using namespace jaccl::detail;

namespace {

std::string unique_name() {
  static std::atomic<int> n{0};
  return "/jaccl-test-" + std::to_string(::getpid()) + "-" +
         std::to_string(n++);
}

// The ops' deadline in these tests, longer in a sanitizer build.
const Millis kOpTimeout = Millis(20000) * jaccl::test::slowdown();

// Under TSan every byte a test writes or compares is instrumented, and the
// heaviest tests here took minutes each (a third of CI's TSan run): there
// they move less data, sized so that every path is still taken (larger
// than the small path, the direct threshold and, with kTsanBudget, several
// rounds of the staging window).
constexpr bool kTsan = jaccl::test::under_tsan();
constexpr size_t kBudget = size_t(8) << 20;
constexpr size_t kTsanBudget = kTsan ? size_t(2) << 20 : kBudget;

// One all_to_allv as rank `me` of `size` sees it: rank f sends rank t
// sends(f, t) bytes, byte i of them byte(f, t, i).
struct VPlan {
  std::vector<size_t> send, recv;
  std::vector<uint8_t> in, want;
};
template <class Sends, class Byte>
VPlan v_plan(int me, int size, Sends sends, Byte byte) {
  VPlan v;
  v.send.resize(static_cast<size_t>(size));
  v.recv.resize(static_cast<size_t>(size));
  for (int q = 0; q < size; ++q) {
    v.send[static_cast<size_t>(q)] = sends(me, q);
    v.recv[static_cast<size_t>(q)] = sends(q, me);
    for (size_t i = 0; i < sends(me, q); ++i)
      v.in.push_back(byte(me, q, i));
    for (size_t i = 0; i < sends(q, me); ++i)
      v.want.push_back(byte(q, me, i));
  }
  return v;
}

// Runs body(group) on `size` threads sharing one segment; rethrows the first
// exception.
void run_ranks(int size, const std::function<void(Group&)>& body,
               size_t budget = kBudget, Millis op_timeout = kOpTimeout,
               ShmStrategy strategy = ShmStrategy::Auto) {
  auto layout = ShmLayout::for_budget(size, budget);
  std::string name = unique_name();
  auto owner = ShmSegment::create(name, layout.total(), 0, layout.reserved());
  ShmChannel::init_segment(owner.data(), layout,
                           static_cast<uint32_t>(strategy),
                           ShmGroup::default_chunk_bytes());
  std::vector<std::unique_ptr<ShmGroup>> groups;
  for (int r = 0; r < size; ++r) {
    groups.push_back(std::make_unique<ShmGroup>(
        ShmChannel(r, size, {}, ShmSegment::open(name, layout.total(), r),
                   layout, allowed_cpu_count(),
                   std::make_shared<FailureState>(), nullptr),
        op_timeout));
  }
  owner.unlink();
  std::vector<std::exception_ptr> errors(size);
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      try {
        body(*groups[r]);
      } catch (...) {
        errors[r] = std::current_exception();
      }
    });
  }
  for (auto& t : threads)
    t.join();
  for (auto& e : errors) {
    if (e)
      std::rethrow_exception(e);
  }
}

// Every rank chose the same way for every call, and (st != 0: a forced
// strategy) the forced one, else one the tuner decided.
void expect_same_choices(const std::vector<std::vector<ShmStrategy>>& chosen,
                         int st) {
  for (size_t r = 1; r < chosen.size(); ++r)
    EXPECT_EQ(chosen[r], chosen[0])
        << "strategy " << st << ": rank " << r << " chose differently";
  for (ShmStrategy c : chosen[0]) {
    if (st == 0)
      EXPECT_NE(c, ShmStrategy::Auto) << "auto never decided";
    else
      EXPECT_EQ(c, static_cast<ShmStrategy>(st));
  }
}

// Calls that run more than twice their figure a few in a row measure again
// (drift), so under a loaded test run a class may still be measuring when a
// test looks at its choice. Every rank holds the same tables at the same
// call, so all of them make these extra calls alike: `call` while
// `measuring`, a few hundred times at most.
template <class Measuring, class Call>
void call_until_chosen(Measuring measuring, Call call) {
  for (int extra = 0; extra < 400 && measuring(); ++extra)
    call();
}

template <class T>
T at16(const void* buf, size_t i) {
  uint16_t b;
  std::memcpy(&b, static_cast<const char*>(buf) + i * 2, 2);
  return T::from_bits(b);
}

class ShmSizes : public ::testing::TestWithParam<int> {};

TEST_P(ShmSizes, AllSumFloatAndInt) {
  int size = GetParam();
  const size_t largest = kTsan ? size_t(1 << 18) + 3 : size_t(3 << 20) + 3;
  for (size_t count : {size_t(0), size_t(1), size_t(7), size_t(1000),
                       size_t(3001), size_t(8193), largest}) {
    run_ranks(
        size,
        [&](Group& g) {
          std::vector<float> x(count), y(count);
          std::vector<int32_t> a(count), b(count);
          for (size_t i = 0; i < count; ++i) {
            x[i] = float(g.rank() + 1) * float(i % 13);
            a[i] = int32_t(g.rank() * 1000 + i);
          }
          g.all_sum(x.data(), y.data(), count * 4, Float32);
          g.all_max(a.data(), b.data(), count * 4, Int32);
          float ranks = float(size * (size + 1) / 2);
          for (size_t i = 0; i < count; ++i) {
            ASSERT_EQ(y[i], ranks * float(i % 13)) << "i=" << i;
            ASSERT_EQ(b[i], int32_t((size - 1) * 1000 + i));
          }
          // In place.
          g.all_sum(x.data(), x.data(), count * 4, Float32);
          ASSERT_TRUE(count == 0 ||
                      std::memcmp(x.data(), y.data(), count * 4) == 0);
        },
        kTsanBudget);
  }
}

TEST_P(ShmSizes, AllGatherSumScatterBroadcast) {
  int size = GetParam();
  const size_t largest = kTsan ? size_t(1 << 20) + 5 : size_t(5 << 20);
  for (size_t n : {size_t(0), size_t(8), size_t(1000), largest}) {
    run_ranks(
        size,
        [&](Group& g) {
          std::vector<uint8_t> in(n), out(n * size);
          for (size_t i = 0; i < n; ++i)
            in[i] = uint8_t(g.rank() * 31 + i);
          g.all_gather(in.data(), out.data(), n);
          // One comparison per rank's block: a per-byte ASSERT over 8 x 5 MiB
          // takes longer under TSan than the peers' op deadline.
          std::vector<uint8_t> want(n);
          for (int q = 0; q < size; ++q) {
            for (size_t i = 0; i < n; ++i)
              want[i] = uint8_t(q * 31 + i);
            ASSERT_TRUE(
                std::equal(want.begin(), want.end(), out.begin() + q * n))
                << "block of rank " << q;
          }
          size_t count = n / 4;
          std::vector<int32_t> chunks(count * size), mine(count);
          for (size_t i = 0; i < chunks.size(); ++i) {
            chunks[i] = int32_t(i + g.rank());
          }
          g.sum_scatter(chunks.data(), mine.data(), count * 4, Int32);
          // sum over q of (rank * count + i + q)
          const int32_t q_sum = int32_t(size * (size - 1) / 2);
          for (size_t i = 0; i < count; ++i) {
            if (mine[i] != int32_t(size * (g.rank() * count + i)) + q_sum)
              FAIL() << "sum_scatter element " << i << ": " << mine[i];
          }
          std::vector<uint8_t> buf(n, uint8_t(g.rank()));
          g.broadcast(buf.data(), n, size - 1);
          ASSERT_EQ(std::count(buf.begin(), buf.end(), uint8_t(size - 1)),
                    std::ptrdiff_t(n));
          g.barrier();
        },
        kTsanBudget);
  }
}

TEST_P(ShmSizes, SendRecvRing) {
  int size = GetParam();
  if (size < 2)
    return;
  run_ranks(size, [&](Group& g) {
    int right = (g.rank() + 1) % size, left = (g.rank() + size - 1) % size;
    for (size_t n : {size_t(0), size_t(5), size_t(1 << 20) + 7}) {
      std::vector<uint8_t> out(n, uint8_t(g.rank())), in(n);
      if (g.rank() % 2 == 0) {
        g.send(out.data(), n, right);
        g.recv(in.data(), n, left);
      } else {
        g.recv(in.data(), n, left);
        g.send(out.data(), n, right);
      }
      for (size_t i = 0; i < n; ++i)
        ASSERT_EQ(in[i], uint8_t(left));
    }
  });
}

// Small integers in any dtype (complex: (v, -v); bool: v & 1), read back as
// double (complex: the real part, after checking the imaginary one).
void put(int dtype, void* buf, size_t i, int v) {
  auto at = [&](auto x) {
    std::memcpy(static_cast<char*>(buf) + i * sizeof x, &x, sizeof x);
  };
  switch (dtype) {
    case Bool:
      at(uint8_t(v & 1));
      break;
    case Int8:
      at(int8_t(v));
      break;
    case Int16:
      at(int16_t(v));
      break;
    case Int32:
      at(int32_t(v));
      break;
    case Int64:
      at(int64_t(v));
      break;
    case UInt8:
      at(uint8_t(v));
      break;
    case UInt16:
      at(uint16_t(v));
      break;
    case UInt32:
      at(uint32_t(v));
      break;
    case UInt64:
      at(uint64_t(v));
      break;
    case Float16:
      at(float16_t(float(v)));
      break;
    case BFloat16:
      at(bfloat16_t(float(v)));
      break;
    case Float32:
      at(float(v));
      break;
    case Float64:
      at(double(v));
      break;
    case Complex64: {
      float c[2] = {float(v), -float(v)};
      std::memcpy(static_cast<char*>(buf) + i * 8, c, 8);
      break;
    }
  }
}
double get(int dtype, const void* buf, size_t i) {
  auto at = [&](auto x) {
    std::memcpy(&x, static_cast<const char*>(buf) + i * sizeof x, sizeof x);
    return double(x);
  };
  switch (dtype) {
    case Bool:
      return at(uint8_t());
    case Int8:
      return at(int8_t());
    case Int16:
      return at(int16_t());
    case Int32:
      return at(int32_t());
    case Int64:
      return at(int64_t());
    case UInt8:
      return at(uint8_t());
    case UInt16:
      return at(uint16_t());
    case UInt32:
      return at(uint32_t());
    case UInt64:
      return at(uint64_t());
    case Float16:
      return float(at16<float16_t>(buf, i));
    case BFloat16:
      return float(at16<bfloat16_t>(buf, i));
    case Float32:
      return at(float());
    case Float64:
      return at(double());
    case Complex64: {
      float c[2];
      std::memcpy(c, static_cast<const char*>(buf) + i * 8, 8);
      return c[1] == -c[0] ? c[0] : 1e30;
    }
  }
  return 0;
}

// Every dtype and op (sum, max, min), out of place and in place, on
// count(element size) elements, against the values reduced here.
void check_every_dtype_and_op(Group& g, int size,
                              const std::function<size_t(size_t)>& count_of) {
  for (int dtype = Bool; dtype <= Complex64; ++dtype) {
    const size_t esz = dtype_size(dtype);
    const size_t count = count_of(esz);
    if (count == 0)
      continue;
    const size_t n = count * esz;
    auto value = [](int r, size_t i) { return int((r * 3 + i) % 7); };
    std::vector<char> in(n), out(n), inplace(n);
    for (size_t i = 0; i < count; ++i)
      put(dtype, in.data(), i, value(g.rank(), i));
    const bool is_bool = dtype == Bool;
    for (int op = 0; op < 3; ++op) {
      auto reduce = [&](const void* from, void* to) {
        if (op == 0) {
          g.all_sum(from, to, n, dtype);
        } else if (op == 1) {
          g.all_max(from, to, n, dtype);
        } else {
          g.all_min(from, to, n, dtype);
        }
      };
      reduce(in.data(), out.data());
      inplace = in;
      reduce(inplace.data(), inplace.data());
      for (size_t i = 0; i < count; ++i) {
        int want = op == 2 ? 1000 : 0;
        for (int r = 0; r < size; ++r) {
          int v = is_bool ? value(r, i) & 1 : value(r, i);
          want = op == 0   ? (is_bool ? (want | v) : want + v)
                 : op == 1 ? std::max(want, v)
                           : std::min(want, v);
        }
        ASSERT_EQ(get(dtype, out.data(), i), double(want))
            << dtype_name(dtype) << " op " << op << " i=" << i;
      }
      ASSERT_EQ(std::memcmp(out.data(), inplace.data(), n), 0)
          << dtype_name(dtype) << " op " << op << " in place differs";
    }
  }
}

// Large reductions run the chunked pipeline: sizes that are multiples of
// no chunk, piece or slice, every dtype and op, in place and not.
TEST(ShmGroup, LargeReductionsEveryDtypeAndOp) {
  for (int size : {2, 3, 4}) {
    run_ranks(size, [&](Group& g) {
      check_every_dtype_and_op(g, size, [](size_t esz) {
        return ((size_t(1) << 20) + 4099) / esz + 3;
      });
    });
  }
}

// Up to kCarriedBytes the operands travel in the step lines: one element
// and as many as fit, between ops of the slots' path, which alternate the
// lines' parity differently.
TEST(ShmGroup, CarriedReductionsEveryDtypeAndOp) {
  for (int size : {2, 3, 5}) {
    run_ranks(size, [&](Group& g) {
      for (bool fill : {false, true}) {
        check_every_dtype_and_op(g, size, [&](size_t esz) {
          return fill ? kCarriedBytes / esz : size_t(1);
        });
        std::vector<float> big(1000, 1.0f);
        g.all_sum(big.data(), big.data(), big.size() * 4, Float32);
        ASSERT_EQ(big[999], float(size));
      }
    });
  }
}

// Carried all_gathers and broadcasts of 1 to kCarriedBytes bytes from every
// root, and a carried all_sum's floats bit-identical to the slots' path
// over the same values (3 ranks: the rounding order shows).
TEST(ShmGroup, CarriedGathersBroadcastsAndRounding) {
  for (int size : {1, 2, 3, 5}) {
    run_ranks(size, [&](Group& g) {
      const int me = g.rank();
      for (size_t n = 1; n <= kCarriedBytes; ++n) {
        std::vector<uint8_t> in(n), out(n * size_t(size));
        for (size_t i = 0; i < n; ++i)
          in[i] = uint8_t(me * 31 + int(i) + 1);
        g.all_gather(in.data(), out.data(), n);
        for (int q = 0; q < size; ++q)
          for (size_t i = 0; i < n; ++i)
            ASSERT_EQ(out[size_t(q) * n + i], uint8_t(q * 31 + int(i) + 1))
                << "n=" << n << " from rank " << q;
        for (int root = 0; root < size; ++root) {
          std::vector<uint8_t> b(n, uint8_t(me == root ? 200 + root : 0));
          g.broadcast(b.data(), n, root);
          ASSERT_EQ(b, std::vector<uint8_t>(n, uint8_t(200 + root)))
              << "n=" << n << " root " << root;
        }
      }
      std::mt19937 rng(99 + me);
      std::uniform_real_distribution<float> dist(-1e3f, 1e3f);
      std::vector<float> in(64), slots(64), carried(2);
      for (auto& x : in)
        x = dist(rng);
      g.all_sum(in.data(), slots.data(), in.size() * 4, Float32);
      g.all_sum(in.data() + 10, carried.data(), 8, Float32);
      ASSERT_EQ(std::memcmp(carried.data(), slots.data() + 10, 8), 0);
    });
  }
}

// Every path reduces in rank order, so a large all_sum's floats are
// bit-identical to the small path's over any window of it (both rounding
// orders differ for random data once there are 3 ranks).
TEST(ShmGroup, LargeAndSmallPathsRoundAlike) {
  for (int size : {2, 3, 5}) {
    run_ranks(size, [&](Group& g) {
      const size_t count = (size_t(3) << 20) / 4 + 77;
      std::vector<float> in(count), out(count);
      std::mt19937 rng(1234 + g.rank());
      std::uniform_real_distribution<float> dist(-1e3f, 1e3f);
      for (auto& x : in)
        x = dist(rng);
      g.all_sum(in.data(), out.data(), count * 4, Float32);
      for (size_t at : {size_t(0), count / 3 + 5, count - 1000}) {
        std::vector<float> small(1000);
        g.all_sum(in.data() + at, small.data(), small.size() * 4, Float32);
        ASSERT_EQ(std::memcmp(small.data(), out.data() + at, 4000), 0)
            << "window at " << at;
      }
    });
  }
}

// Large enough that the output is written with non-temporal stores where
// the last-level cache is up to 36 MiB; and, forced to cached stores, that
// all_gather stages in cache-sized chunks (a block of more than twice one).
TEST(ShmGroup, VeryLargeAllSumAndAllGather) {
  for (ShmStrategy st : {ShmStrategy::Auto, ShmStrategy::Cached})
    run_ranks(
        2,
        [&](Group& g) {
          const size_t count = (size_t(9) << 20) / 4 + 5;
          std::vector<int32_t> in(count), out(count);
          for (size_t i = 0; i < count; ++i)
            in[i] = int32_t(i * (g.rank() + 1));
          g.all_sum(in.data(), out.data(), count * 4, Int32);
          for (size_t i = 0; i < count; ++i)
            ASSERT_EQ(out[i], int32_t(i * 3)) << i;
          std::vector<int32_t> all(count * 2);
          g.all_gather(in.data(), all.data(), count * 4);
          for (size_t i = 0; i < count; ++i) {
            ASSERT_EQ(all[i], int32_t(i));
            ASSERT_EQ(all[count + i], int32_t(i * 2));
          }
        },
        kBudget, kOpTimeout, st);
}

// Each copy-out strategy, forced through the segment header as
// JACCL_SHM_STRATEGY does, gives every rank the same bits as the others
// (auto: while it measures and after it has chosen, across size classes of
// every large path); and every rank ends with the same choice.
// Calls of one size class that take auto past its warm calls, every trial
// (four ways), the trials once more after kSettleCalls, and one more.
constexpr int kPastTheTrials =
    static_cast<int>(ShmTuner::kWarmCalls + ShmTuner::kSettleCalls +
                     8 * ShmTuner::kTrialCalls * ShmTuner::kRounds + 1);

TEST(ShmGroup, EveryStrategyGivesTheSameBits) {
  const int size = 3;
  std::vector<size_t> counts = {
      (size_t(12) << 10) / 4 + 5, (size_t(40) << 10) / 4 + 3,
      (size_t(1) << 20) / 4 + 17, (size_t(3) << 20) / 4 + 1};
  if (kTsan)
    counts.pop_back();  // 1 MiB already takes several rounds at kTsanBudget
  // strategy -> rank -> FNV-1a of the outputs of the first calls
  std::vector<std::vector<uint64_t>> bits(5);
  for (int st = 0; st < 5; ++st) {
    bits[st].assign(size, 0xcbf29ce484222325ull);
    std::vector<std::vector<ShmStrategy>> chosen(size);
    run_ranks(
        size,
        [&](Group& g) {
          auto& mine = bits[st][static_cast<size_t>(g.rank())];
          auto& shm = dynamic_cast<ShmGroup&>(g);
          std::mt19937 rng(99 + g.rank());
          std::uniform_real_distribution<float> dist(-1e3f, 1e3f);
          for (size_t count : counts) {
            std::vector<float> in(count), out(count), all(count * size);
            for (auto& x : in)
              x = dist(rng);
            // Auto: past the warm calls and every trial; a forced way
            // twice. Each call's outputs must equal the first call's (auto
            // switches ways between them); the first is hashed (8-byte
            // words: TSan makes a byte loop the test's whole cost).
            const int calls = st == 0 ? kPastTheTrials : 2;
            std::vector<float> out0, all0, b0;
            for (int call = 0; call < calls; ++call) {
              g.all_sum(in.data(), out.data(), count * 4, Float32);
              g.all_gather(in.data(), all.data(), count * 4);
              std::vector<float> b = g.rank() == 1 ? in : out;
              g.broadcast(b.data(), count * 4, 1);
              if (call == 0) {
                out0 = out;
                all0 = all;
                b0 = b;
                for (const auto* v : {&out, &all, &b}) {
                  std::vector<uint64_t> w((v->size() * 4 + 7) / 8);
                  std::memcpy(w.data(), v->data(), v->size() * 4);
                  for (uint64_t x : w)
                    mine = (mine ^ x) * 0x100000001b3ull;
                }
                continue;
              }
              EXPECT_TRUE(out == out0 && all == all0 && b == b0)
                  << "strategy " << st << " call " << call << " count " << count
                  << ": results differ from the first call's";
            }
            // In place: a rank's own operand comes from its staged copy
            // then, not from its input.
            std::vector<float> x = in;
            g.all_sum(x.data(), x.data(), count * 4, Float32);
            EXPECT_TRUE(x == out0) << "strategy " << st << " count " << count
                                   << ": in place differs";
            // Below 32 KiB: all_sum's one-sync path and all_gather are
            // tuned, broadcast is not.
            const bool small = count * 4 <= (size_t(32) << 10);
            const auto kinds =
                small ? std::vector<ShmTuner::Kind>{ShmTuner::kSmallReduce,
                                                    ShmTuner::kGather}
                      : std::vector<ShmTuner::Kind>{ShmTuner::kReduce,
                                                    ShmTuner::kGather,
                                                    ShmTuner::kBroadcast};
            auto measuring = [&] {
              for (auto kind : kinds)
                if (shm.strategy_for(kind, count * 4) == ShmStrategy::Auto)
                  return true;
              return false;
            };
            if (st == 0)
              call_until_chosen(measuring, [&] {
                g.all_sum(in.data(), out.data(), count * 4, Float32);
                g.all_gather(in.data(), all.data(), count * 4);
                std::vector<float> b = g.rank() == 1 ? in : out0;
                g.broadcast(b.data(), count * 4, 1);
                EXPECT_TRUE(out == out0 && all == all0 && b == b0)
                    << "count " << count << ": results differ after the trials";
              });
            for (auto kind : kinds)
              chosen[static_cast<size_t>(g.rank())].push_back(
                  shm.strategy_for(kind, count * 4));
          }
        },
        kTsanBudget, kOpTimeout, static_cast<ShmStrategy>(st));
    expect_same_choices(chosen, st);
  }
  for (int st = 0; st < 5; ++st) {
    for (int r = 0; r < size; ++r) {
      // all_sum, all_gather and broadcast outputs are the same on every
      // rank, so every rank's record equals rank 0's of the auto run.
      ASSERT_EQ(bits[st][static_cast<size_t>(r)], bits[0][0])
          << "strategy " << st << " rank " << r;
    }
  }
}

// all_to_all and all_to_allv through every way, forced as
// JACCL_SHM_STRATEGY does and auto (while it tries each way and after it
// has chosen): every block arrives byte for byte, and every rank ends with
// the same choice. Two ranks (where they have a CPU each, direct is a way)
// and three; blocks below and above the direct threshold, some over several
// rounds of the staging window (3 MiB: of all_to_all's cache-sized
// windows too, a2a_cache_place), of odd lengths; all_to_allv with empty and
// uneven blocks.
TEST(ShmGroup, AllToAllEveryWayDeliversEveryByte) {
  auto byte_of = [](int from, int to, size_t i) {
    return static_cast<uint8_t>(from * 31 + to * 7 + i * 13 + (i >> 9));
  };
  for (int size : {2, 3}) {
    const auto P = static_cast<size_t>(size);
    for (int st = 0; st < 5; ++st) {
      std::vector<std::vector<ShmStrategy>> chosen(P);
      run_ranks(
          size,
          [&](Group& g) {
            auto& shm = dynamic_cast<ShmGroup&>(g);
            const int me = g.rank();
            // Under TSan, 300 KiB takes several rounds of kTsanBudget's
            // window.
            std::vector<size_t> blocks = {(size_t(3) << 10) + 1,
                                          (size_t(20) << 10) + 3,
                                          (size_t(300) << 10) + 5};
            if (!kTsan)
              blocks.push_back((size_t(3) << 20) + 61);
            for (size_t block : blocks) {
              // all_to_all: `block` bytes to every rank.
              std::vector<uint8_t> in(block * P), out(block * P),
                  want(block * P);
              for (size_t q = 0; q < P; ++q) {
                for (size_t i = 0; i < block; ++i) {
                  in[q * block + i] = byte_of(me, static_cast<int>(q), i);
                  want[q * block + i] = byte_of(static_cast<int>(q), me, i);
                }
              }
              // all_to_allv: rank f sends rank t sends(f, t) bytes, some
              // none, the rest uneven.
              auto sends = [&](int f, int t) -> size_t {
                return (f + 2 * t) % 3 == 1
                           ? 0
                           : block / static_cast<size_t>(1 + t) +
                                 static_cast<size_t>(7 * f);
              };
              const VPlan v = v_plan(me, size, sends, byte_of);
              std::vector<uint8_t> vout(v.want.size());
              const int calls = st == 0 ? kPastTheTrials : 2;
              for (int call = 0; call < calls; ++call) {
                std::fill(out.begin(), out.end(), uint8_t(0xee));
                g.all_to_all(in.data(), out.data(), block);
                ASSERT_TRUE(out == want)
                    << "all_to_all, strategy " << st << ", " << size
                    << " ranks, block " << block << ", call " << call;
                std::fill(vout.begin(), vout.end(), uint8_t(0xee));
                g.all_to_allv(v.in.data(), v.send, vout.data(), v.recv);
                ASSERT_TRUE(vout == v.want)
                    << "all_to_allv, strategy " << st << ", " << size
                    << " ranks, block " << block << ", call " << call;
              }
              if (block * P < kShmTunedFromBytes)
                continue;
              if (st == 0)
                call_until_chosen(
                    [&] {
                      return shm.strategy_for(ShmTuner::kAllToAll, block * P) ==
                             ShmStrategy::Auto;
                    },
                    [&] {
                      g.all_to_all(in.data(), out.data(), block);
                      ASSERT_TRUE(out == want) << "all_to_all after the trials";
                    });
              chosen[static_cast<size_t>(me)].push_back(
                  shm.strategy_for(ShmTuner::kAllToAll, block * P));
            }
          },
          kTsanBudget, kOpTimeout, static_cast<ShmStrategy>(st));
      expect_same_choices(chosen, st);
    }
  }
}

// all_to_allv stages its first round (or only publishes its input, where
// the tuner would read directly) before the ranks know each other's
// counts, guessing the op's size from its own: ranks whose totals differ
// guess differently (one stages, one does not; one guesses a large op and
// the op is small, or the other way round; with the default budget, one
// guesses the large ops' cache-sized windows, the other whole ones). Every
// way, forced and auto, through calls whose counts change from call to
// call: every byte arrives, and a mismatch still fails every rank alike
// afterwards.
TEST(ShmGroup, AllToAllvRanksGuessingDifferentlyDeliverEveryByte) {
  auto byte_of = [](int from, int to, size_t i, int call) {
    return static_cast<uint8_t>(from * 31 + to * 7 + i * 13 + call);
  };
  const size_t K = 1024;
  // Rank f sends rank t pattern(call)(f, t) bytes.
  using Pattern = std::function<size_t(int, int)>;
  const std::vector<Pattern> patterns = {
      // uniform and large: every guess right
      [&](int, int) { return 200 * K + 3; },
      // only rank 0 sends, 3 MiB in all: it guesses large (and direct),
      // the others small
      [&](int f, int t) { return f == 0 ? (t + 1) * 512 * K + 1 : 0; },
      // rank 0 sends 40 KiB, the rest nothing: rank 0 guesses large, the
      // op is small
      [&](int f, int) { return f == 0 ? 20 * K + 5 : 0; },
      // skewed and large, zeros in between
      [&](int f, int t) {
        return (f + 2 * t) % 3 == 1 ? 0 : (f + 1) * (t + 2) * 70 * K + 11;
      },
      // small and uneven
      [&](int f, int t) { return static_cast<size_t>(f * 100 + t * 7); },
      // rank 0 sends 6 MiB or more, the others 16 KiB a block: an op of
      // more than twice any L2 (a2a_in_cache) whose other ranks guess small
      [&](int f, int t) {
        return f == 0 ? static_cast<size_t>(t + 1) * 2048 * K + 9 : 16 * K;
      },
  };
  // 8 MiB: several rounds of whole-slot windows; 64 MiB (the default):
  // windows large enough for the cache-sized ones beside the counts.
  for (size_t budget : {size_t(8) << 20, size_t(64) << 20})
    for (int size : {2, 3}) {
      for (int st = 0; st < 5; ++st) {
        run_ranks(
            size,
            [&](Group& g) {
              const int me = g.rank();
              // Each pattern twice under TSan (the counts still change
              // from call to call), four times otherwise.
              for (int call = 0; call < (kTsan ? 12 : 24); ++call) {
                const Pattern& pat =
                    patterns[static_cast<size_t>(call) % patterns.size()];
                const VPlan v =
                    v_plan(me, size, pat, [&](int f, int t, size_t i) {
                      return byte_of(f, t, i, call);
                    });
                std::vector<uint8_t> out(v.want.size(), 0xee);
                g.all_to_allv(v.in.data(), v.send, out.data(), v.recv);
                ASSERT_TRUE(out == v.want) << "strategy " << st << ", " << size
                                           << " ranks, call " << call;
              }
              // A large mismatch after all that: every rank throws alike.
              std::vector<size_t> sc(static_cast<size_t>(size), 300 * K),
                  rc(static_cast<size_t>(size), 300 * K);
              if (me == size - 1)
                rc[0] = 5;
              std::vector<uint8_t> in(sc[0] * static_cast<size_t>(size), 1),
                  out(300 * K * static_cast<size_t>(size));
              EXPECT_THROW(g.all_to_allv(in.data(), sc, out.data(), rc),
                           ProtocolError);
              std::vector<size_t> ok(static_cast<size_t>(size), 300 * K);
              g.all_to_allv(in.data(), ok, out.data(), ok);
              EXPECT_EQ(out, std::vector<uint8_t>(out.size(), 1));
            },
            budget, kOpTimeout, static_cast<ShmStrategy>(st));
      }
    }
}

// Each way runs three times in a row and only the third call is timed, so a
// way is measured on the caches it leaves itself (as it runs once chosen;
// both parities of the slots), not on those of the way before it; calls
// after the trials are not timed, so no later call changes the choice.
TEST(ShmTuner, EachWayIsTimedAfterACallOfItsOwn) {
  using S = ShmStrategy;
  const size_t n = 1 << 20;
  const int warm = static_cast<int>(ShmTuner::kWarmCalls);
  const int rounds = static_cast<int>(ShmTuner::kRounds);
  const int tc = static_cast<int>(ShmTuner::kTrialCalls);
  auto way_of = [](ShmWay w) {
    return !w.stream_stage ? S::Cached
           : w.stream_out  ? S::Stream
                           : S::StreamStage;
  };
  // Runs the trials with `cost` (ns per byte, by way and the way of the
  // call before) and returns the choice.
  auto decide = [&](auto cost) {
    ShmTuner t;
    S before = S::Stream;  // the guess: the warm calls' way
    for (int call = 0; call < warm + 3 * tc * rounds; ++call) {
      const S way = way_of(t.begin(ShmTuner::kReduce, n, S::Stream));
      t.finish(1);
      const bool timed = t.take_report() != 0;
      EXPECT_EQ(timed, call >= warm && (call - warm) % tc == tc - 1) << call;
      const double ns = call < warm ? 0 : cost(way, before);
      t.absorb(static_cast<uint64_t>(ns * static_cast<double>(n)));
      before = way;
    }
    const S pick = t.chosen(ShmTuner::kReduce, n);
    // Later calls run the choice, however fast they are (timed only to
    // watch for drift).
    for (int call = 0; call < 3; ++call) {
      ShmWay w = t.begin(ShmTuner::kReduce, n, S::Stream);
      EXPECT_EQ(shm_way(pick).stream_stage, w.stream_stage);
      EXPECT_EQ(shm_way(pick).stream_out, w.stream_out);
      t.finish(1);
      t.take_report();
      t.absorb(1);
    }
    EXPECT_EQ(t.chosen(ShmTuner::kReduce, n), pick);
    return pick;
  };
  // Cached costs 0.5 ns/byte right after a streaming call but 4 after a
  // cached one; stream-stage 1.0, stream 1.1 whatever came before.
  auto cost = [](S w, S before) {
    if (w == S::Cached)
      return before == S::Cached ? 4.0 : 0.5;
    return w == S::Stream ? 1.1 : 1.0;
  };
  EXPECT_EQ(decide(cost), S::StreamStage);
  // Where cached is fast after itself too, it wins.
  EXPECT_EQ(decide([&](S w, S) { return w == S::Cached ? 0.5 : cost(w, w); }),
            S::Cached);
}

// The measuring itself: rounds in which each way runs three times in a row
// from the guess (the third call timed), then the lowest time per byte, the
// same sequence on every rank that absorbs the same reports.
TEST(ShmTuner, TriesEveryWayThenKeepsTheFastest) {
  ShmTuner t;
  const size_t n = 3 << 20;
  std::vector<ShmStrategy> trials;
  // ns per byte: cached 3, stream-stage 1, stream 2.
  auto cost = [&](ShmWay w) -> uint64_t {
    return !w.stream_stage ? 3 * n : w.stream_out ? 2 * n : n;
  };
  auto name = [](ShmWay w) {
    return !w.stream_stage ? ShmStrategy::Cached
           : w.stream_out  ? ShmStrategy::Stream
                           : ShmStrategy::StreamStage;
  };
  const int warm = static_cast<int>(ShmTuner::kWarmCalls);
  const int rounds = static_cast<int>(ShmTuner::kRounds);
  const int tc = static_cast<int>(ShmTuner::kTrialCalls);
  const int trials3 = 3 * tc * rounds;  // three ways
  for (int call = 0; call < warm + trials3 + 3; ++call) {
    ShmWay w = t.begin(ShmTuner::kReduce, n, ShmStrategy::Stream);
    trials.push_back(name(w));
    t.finish(0);
    uint64_t report = t.take_report();
    EXPECT_EQ(report != 0, call >= warm && (call >= warm + trials3 ||
                                            (call - warm) % tc == tc - 1))
        << "the last call of each way's trials is timed, and the choice";
    t.absorb(cost(w));
    if (call < warm + trials3 - 1)
      EXPECT_EQ(t.chosen(ShmTuner::kReduce, n), ShmStrategy::Auto) << call;
  }
  using S = ShmStrategy;
  std::vector<S> want{S::Stream, S::Stream};
  for (int r = 0; r < rounds; ++r) {
    for (S way : {S::Stream, S::Cached, S::StreamStage})
      want.insert(want.end(), static_cast<size_t>(tc), way);
  }
  want.insert(want.end(), 3, S::StreamStage);
  EXPECT_EQ(trials, want);
  EXPECT_EQ(t.chosen(ShmTuner::kReduce, n), ShmStrategy::StreamStage);
  // Another size class and kind are measured apart, from their guess.
  EXPECT_EQ(t.chosen(ShmTuner::kReduce, n * 4), ShmStrategy::Auto);
  EXPECT_FALSE(t.begin(ShmTuner::kGather, n, ShmStrategy::Cached).stream_stage);
  // all_gather with the direct way: eight trials, direct among them.
  ShmTuner g;
  std::vector<ShmStrategy> gtrials;
  for (int call = 0; call < warm + 4 * tc * rounds + 1; ++call) {
    ShmWay w = g.begin(ShmTuner::kGather, n, ShmStrategy::Cached, kShmWays);
    gtrials.push_back(w.direct ? S::Direct : name(w));
    g.finish(0);
    g.take_report();
    g.absorb(w.direct ? n / 2 : cost(w));
    if (call < warm + 4 * tc * rounds - 1)
      EXPECT_EQ(g.chosen(ShmTuner::kGather, n), ShmStrategy::Auto) << call;
  }
  // The last warm call runs direct (its first calls cost more than the
  // staged ways'), and direct is tried right after the guess.
  std::vector<S> gwant{S::Cached, S::Direct};
  for (int r = 0; r < rounds; ++r) {
    for (S way : {S::Cached, S::Direct, S::StreamStage, S::Stream})
      gwant.insert(gwant.end(), static_cast<size_t>(tc), way);
  }
  gwant.push_back(S::Direct);
  EXPECT_EQ(gtrials, gwant);
  EXPECT_EQ(g.chosen(ShmTuner::kGather, n), ShmStrategy::Direct);
  // Forced strategies never measure.
  ShmTuner forced(ShmStrategy::Cached);
  ShmWay w = forced.begin(ShmTuner::kReduce, n, ShmStrategy::Stream);
  EXPECT_FALSE(w.stream_stage || w.stream_out);
  forced.finish(5);
  EXPECT_EQ(forced.take_report(), 0u);
  ShmStrategy s{};
  EXPECT_TRUE(parse_shm_strategy("stream-stage", &s));
  EXPECT_EQ(s, ShmStrategy::StreamStage);
  EXPECT_TRUE(parse_shm_strategy("stream", &s));
  EXPECT_EQ(s, ShmStrategy::Stream);
  EXPECT_TRUE(parse_shm_strategy("direct", &s));
  EXPECT_EQ(s, ShmStrategy::Direct);
  EXPECT_TRUE(shm_way(ShmStrategy::Direct).direct);
  EXPECT_FALSE(shm_way(ShmStrategy::Direct).stream_stage);
  EXPECT_FALSE(parse_shm_strategy("streams", &s));
  EXPECT_FALSE(parse_shm_strategy("", &s));
}

// A way's figure is the median of its rounds (a rank descheduled in one
// timed call must not lose it the choice, nor one lucky call win it), and a
// class measures again from fresh figures after its re-trial interval, so
// a machine that changed under a long job gets the way that now wins.
TEST(ShmTuner, MedianRoundCountsAndTheClassMeasuresAgain) {
  using S = ShmStrategy;
  ShmTuner t;
  const size_t n = 1 << 20;
  auto name = [](ShmWay w) {
    return !w.stream_stage ? S::Cached
           : w.stream_out  ? S::Stream
                           : S::StreamStage;
  };
  // cost(way, timed trial): ns per byte.
  auto run = [&](int calls, auto cost) {
    S last{};
    for (int call = 0; call < calls; ++call) {
      const bool trial = t.chosen(ShmTuner::kReduce, n) == S::Auto;
      const ShmWay w = t.begin(ShmTuner::kReduce, n, S::Cached);
      last = name(w);
      t.finish(1);
      const bool timed = t.take_report() != 0 && trial;
      t.absorb(
          static_cast<uint64_t>(cost(last, timed) * static_cast<double>(n)));
    }
    return last;
  };
  int cached_timed = 0, stage_timed = 0;
  auto spiky = [&](S w, bool timed) {
    if (w == S::Cached)  // cached's first timed call spikes
      return timed && ++cached_timed == 1 ? 4.0 : 0.3;
    if (w == S::StreamStage)  // stream-stage's second is a lucky one
      return timed && ++stage_timed == 2 ? 0.05 : 0.4;
    return 0.5;
  };
  const int trials =
      static_cast<int>(3 * ShmTuner::kTrialCalls * ShmTuner::kRounds);
  const int first = static_cast<int>(ShmTuner::kWarmCalls) + trials;
  const int settle = static_cast<int>(ShmTuner::kSettleCalls);
  run(first + 1, spiky);
  EXPECT_EQ(cached_timed, static_cast<int>(ShmTuner::kRounds));
  EXPECT_EQ(stage_timed, static_cast<int>(ShmTuner::kRounds));
  EXPECT_EQ(t.chosen(ShmTuner::kReduce, n), S::Cached);
  // kSettleCalls calls after its first choice the class measures once more
  // (the buffers warm by then), here to the same figures and choice.
  run(settle - 2, spiky);
  EXPECT_EQ(t.chosen(ShmTuner::kReduce, n), S::Cached);
  run(1, spiky);
  EXPECT_EQ(t.chosen(ShmTuner::kReduce, n), S::Auto);
  run(trials, spiky);
  EXPECT_EQ(cached_timed, 2 * static_cast<int>(ShmTuner::kRounds));
  EXPECT_EQ(t.chosen(ShmTuner::kReduce, n), S::Cached);
  // The machine changes a little: cached is now the slowest, but within
  // the drift factor of its figure. Until the interval is up the choice
  // stands; then every way is measured again.
  auto changed = [](S w, bool) { return w == S::Cached ? 0.5 : 0.4; };
  run(1000, changed);
  EXPECT_EQ(t.chosen(ShmTuner::kReduce, n), S::Cached);
  run(4096 + first, changed);
  EXPECT_EQ(t.chosen(ShmTuner::kReduce, n), S::StreamStage);
}

// Calls of the choice that run kDriftFactor slower than its figure,
// kDriftCalls in a row, measure the class again at once (after the gap);
// fewer in a row do not, and each such re-trial doubles the gap.
TEST(ShmTuner, DriftMeasuresAgainAtOnce) {
  using S = ShmStrategy;
  ShmTuner t;
  const size_t n = 1 << 20;
  auto run = [&](int calls, auto cost) {
    for (int call = 0; call < calls; ++call) {
      const ShmWay w = t.begin(ShmTuner::kReduce, n, S::Cached);
      const S way = !w.stream_stage ? S::Cached
                    : w.stream_out  ? S::Stream
                                    : S::StreamStage;
      t.finish(1);
      t.take_report();
      t.absorb(static_cast<uint64_t>(cost(way) * static_cast<double>(n)));
    }
  };
  auto before = [](S w) { return w == S::Cached ? 0.3 : 0.6; };
  auto after = [](S w) { return w == S::Cached ? 1.0 : 0.6; };
  const int first = static_cast<int>(
      ShmTuner::kWarmCalls + 3 * ShmTuner::kTrialCalls * ShmTuner::kRounds);
  const int drift = static_cast<int>(ShmTuner::kDriftCalls);
  const int gap = static_cast<int>(ShmTuner::kDriftGap);
  // The first choice, then its settling re-trial.
  run(first + static_cast<int>(ShmTuner::kSettleCalls) + first, before);
  ASSERT_EQ(t.chosen(ShmTuner::kReduce, n), S::Cached);
  // Slow calls, but never kDriftCalls in a row: the choice stands.
  for (int i = 0; i < 3 * gap; ++i)
    run(1, [&](S w) { return i % drift == drift - 1 ? before(w) : after(w); });
  EXPECT_EQ(t.chosen(ShmTuner::kReduce, n), S::Cached);
  // kDriftCalls in a row: measured again, and the way that now wins kept.
  run(drift, after);
  EXPECT_EQ(t.chosen(ShmTuner::kReduce, n), S::Auto);
  run(first, after);
  EXPECT_EQ(t.chosen(ShmTuner::kReduce, n), S::StreamStage);
  // Now stream-stage slows down: the second drift waits until twice the
  // gap has passed since its decision (two calls of the choice ran above).
  auto worse = [](S w) {
    return w == S::Cached ? 0.3 : w == S::StreamStage ? 1.5 : 0.9;
  };
  run(2 * gap - 3, worse);
  EXPECT_EQ(t.chosen(ShmTuner::kReduce, n), S::StreamStage);
  run(1, worse);
  EXPECT_EQ(t.chosen(ShmTuner::kReduce, n), S::Auto);
  run(first, worse);
  EXPECT_EQ(t.chosen(ShmTuner::kReduce, n), S::Cached);
}

TEST(ShmCopy, CachedCopyMatchesMemcpyAtAnyAlignment) {
  std::vector<uint8_t> src(70000), dst(70000), want(70000);
  for (size_t i = 0; i < src.size(); ++i)
    src[i] = uint8_t(i * 5 + 3);
  for (size_t so : {0, 1, 16, 33}) {
    for (size_t dof : {0, 3, 16, 63}) {
      for (size_t n : {0, 1, 63, 1023, 1024, 1025, 4096 + 17, 65536 + 5}) {
        std::fill(dst.begin(), dst.end(), 0xee);
        want = dst;
        std::memcpy(want.data() + dof, src.data() + so, n);
        cached_copy(dst.data() + dof, src.data() + so, n);
        ASSERT_EQ(dst, want) << "src+" << so << " dst+" << dof << " n=" << n;
      }
    }
  }
}

TEST(ShmCopy, Overlaps) {
  char buf[16];
  EXPECT_TRUE(overlaps(buf, 8, buf + 4, 8));
  EXPECT_FALSE(overlaps(buf, 8, buf + 8, 8));
  EXPECT_FALSE(overlaps(buf, 0, buf, 8));
  EXPECT_TRUE(overlaps(buf, 16, buf + 15, 1));
}

// copy_bytes and move_bytes (common/copy.h) at the distances where `rep movsb`
// crawls and around them: the loop takes those from kLoopCopyFromBytes, memcpy
// the rest; every byte lands and none beside the destination changes.
TEST(ShmCopy, CopyBytesMatchesMemcpyAtEveryDistance) {
  EXPECT_FALSE(slow_copy_distance(4096 + 100, 100));
  EXPECT_TRUE(slow_copy_distance(101, 100));
  EXPECT_TRUE(slow_copy_distance(4096 + 131, 100));
  EXPECT_FALSE(slow_copy_distance(132, 100));
  EXPECT_FALSE(slow_copy_distance(99, 100));  // destination before the source
  std::vector<uint8_t> src(80000), dst(90000), want(90000);
  for (size_t i = 0; i < src.size(); ++i)
    src[i] = uint8_t(i * 11 + 5);
  const auto base = reinterpret_cast<uintptr_t>(src.data());
  for (size_t dist : {0, 1, 16, 31, 32, 64, 4095}) {
    // dst + dof - src == dist (mod 4096), dof < 4096 + 64.
    const auto d0 = reinterpret_cast<uintptr_t>(dst.data());
    const size_t dof = ((base + dist - d0) % 4096) + 64;
    for (size_t n : {0, 1000, 1024, 1025, 4096 + 17, 65536 + 5}) {
      std::fill(dst.begin(), dst.end(), 0xee);
      want = dst;
      std::memcpy(want.data() + dof, src.data(), n);
      copy_bytes(dst.data() + dof, src.data(), n);
      ASSERT_EQ(dst, want) << "distance " << dist << " n=" << n;
      std::fill(dst.begin(), dst.end(), 0xee);
      move_bytes(dst.data() + dof, src.data(), n);
      ASSERT_EQ(dst, want) << "move_bytes, distance " << dist << " n=" << n;
    }
  }
  // Overlapping ranges, both directions, past kLoopCopyFromBytes.
  for (ptrdiff_t shift : {-4095, -16, 16, 31, 4095}) {
    std::vector<uint8_t> buf(20000), ref;
    for (size_t i = 0; i < buf.size(); ++i)
      buf[i] = uint8_t(i * 3 + 1);
    ref = buf;
    const size_t from = 5000, n = 8000;
    std::memmove(ref.data() + from + shift, ref.data() + from, n);
    move_bytes(buf.data() + from + shift, buf.data() + from, n);
    ASSERT_EQ(buf, ref) << "overlapping, shift " << shift;
  }
}

TEST(ShmCopy, StreamCopyMatchesMemcpyAtAnyAlignment) {
  std::vector<uint8_t> src(70000), dst(70000), want(70000);
  for (size_t i = 0; i < src.size(); ++i)
    src[i] = uint8_t(i * 7 + 1);
  for (size_t so : {0, 1, 15, 16, 33}) {
    for (size_t dof : {0, 3, 8, 16, 63}) {
      for (size_t n : {0, 1, 15, 16, 17, 63, 64, 65, 127, 1000, 65536 + 5}) {
        std::fill(dst.begin(), dst.end(), 0xee);
        want = dst;
        std::memcpy(want.data() + dof, src.data() + so, n);
        stream_copy(dst.data() + dof, src.data() + so, n);
        ASSERT_EQ(dst, want) << "src+" << so << " dst+" << dof << " n=" << n;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, ShmSizes, ::testing::Values(1, 2, 3, 4, 8));

// From kRootReduceRanks ranks a small reduction is rank 0's, the others
// copying its result; past the budget the send/recv rings are not reserved
// up front. Both still give every rank the serial rank-order result, bit for
// bit (20000 floats take the large path), and working rings.
TEST(ShmGroup, ManyRanksReduceAtTheRootAndRingsComeOnUse) {
  const int size = 130;
  const size_t budget = 8 << 20;
  ASSERT_TRUE(ShmLayout::for_budget(size, budget).lazy_rings);
  ASSERT_FALSE(ShmLayout::for_budget(8, budget).lazy_rings);
  auto value = [](int r, size_t i) {
    return 1.0f / float(3 + r) + float(i % 7) * 1e-3f * float(r % 5);
  };
  run_ranks(
      size,
      [&](Group& g) {
        for (size_t count :
             {size_t(1), size_t(37), size_t(5000), size_t(20000)}) {
          std::vector<float> x(count), y(count), want(count);
          for (size_t i = 0; i < count; ++i) {
            x[i] = value(g.rank(), i);
            want[i] = value(0, i);
          }
          for (int r = 1; r < size; ++r) {
            for (size_t i = 0; i < count; ++i) {
              want[i] += value(r, i);
            }
          }
          g.all_sum(x.data(), y.data(), count * 4, Float32);
          ASSERT_EQ(std::memcmp(y.data(), want.data(), count * 4), 0)
              << "count " << count;
          int32_t m = g.rank() * 3, top = -1;
          g.all_max(&m, &top, 4, Int32);
          ASSERT_EQ(top, (size - 1) * 3);
        }
        // all_to_allv's counts of this many ranks do not fit the result
        // buffer: they ride at the head of each slot, before windows of a
        // few hundred bytes, so the larger blocks take several rounds.
        {
          const int me = g.rank();
          auto sends = [](int f, int t) {
            return static_cast<size_t>(
                (f + 2 * t) % 3 == 1 ? 0 : 97 * ((f + t) % 11));
          };
          auto byte = [](int f, int t, size_t i) {
            return static_cast<uint8_t>(f * 7 + t * 13 + i);
          };
          const VPlan v = v_plan(me, size, sends, byte);
          std::vector<uint8_t> vout(v.want.size(), 0xee);
          g.all_to_allv(v.in.data(), v.send, vout.data(), v.recv);
          ASSERT_EQ(vout, v.want);
        }
        const int right = (g.rank() + 1) % size;
        const int left = (g.rank() + size - 1) % size;
        std::vector<uint8_t> out(10000, uint8_t(g.rank())), in(10000);
        if (g.rank() % 2 == 0) {
          g.send(out.data(), out.size(), right);
          g.recv(in.data(), in.size(), left);
        } else {
          g.recv(in.data(), in.size(), left);
          g.send(out.data(), out.size(), right);
        }
        ASSERT_EQ(in, std::vector<uint8_t>(10000, uint8_t(left)));
        g.barrier();
      },
      budget, Millis(120000));
}

TEST(ShmGroup, MismatchedOpsAreNamed) {
  EXPECT_THROW(run_ranks(2,
                         [&](Group& g) {
                           float x[4] = {};
                           if (g.rank() == 0) {
                             g.all_sum(x, x, 16, Float32);
                           } else {
                             g.all_gather(x + 2, x, 8);  // in place
                           }
                         }),
               ProtocolError);
}

TEST(ShmGroup, MissingRankTimesOutNamingIt) {
  try {
    run_ranks(
        3,
        [&](Group& g) {
          if (g.rank() == 2)
            return;
          g.barrier();
        },
        8 << 20, Millis(300));
    FAIL() << "expected a timeout";
  } catch (const TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("waiting for rank 2"),
              std::string::npos)
        << e.what();
  }
}

TEST(ShmGroup, RecvSizeMismatchIsAnError) {
  try {
    run_ranks(2, [&](Group& g) {
      char buf[16] = {};
      if (g.rank() == 0) {
        g.send(buf, 16, 1);
      } else {
        g.recv(buf, 8, 0);
      }
    });
    FAIL() << "expected an error";
  } catch (const ProtocolError& e) {
    EXPECT_NE(std::string(e.what()).find("sent 16 bytes"), std::string::npos)
        << e.what();
  }
}

// Sets the calling thread's CPUs (common/affinity.h), or fails the test.
void allow_cpus(const std::vector<int>& cpus) {
  ASSERT_TRUE(set_allowed_cpus(cpus));
}

TEST(CpuPlacement, MoveOffThisCpuMovesAndLeavesTheMask) {
  const std::vector<int> cpus = allowed_cpus();
  if (cpus.size() < 2)
    GTEST_SKIP() << "needs two CPUs";
  std::thread([&] {
    allow_cpus({cpus[0]});  // runs on cpus[0] from here ...
    allow_cpus(cpus);       // ... and may run anywhere again
    // True only if the thread ran elsewhere while its mask excluded
    // cpus[0]; after that the scheduler may bring it back at any time (a
    // look at sched_getcpu() here failed under TSan beside another test).
    EXPECT_TRUE(move_off_this_cpu());
    EXPECT_EQ(allowed_cpus(), cpus);
    allow_cpus({cpus[1]});
    EXPECT_FALSE(move_off_this_cpu()) << "a mask of one CPU: nowhere to go";
    EXPECT_EQ(::sched_getcpu(), cpus[1]);
    EXPECT_EQ(allowed_cpus(), std::vector<int>{cpus[1]});
  }).join();
}

// The CPU count is the affinity mask's (taskset, a cpuset), not the host's:
// two ranks held to one CPU are oversubscribed and yield at every wait
// instead of spinning against each other. The mask is set on a thread of
// its own, which the group's construction and its rank threads inherit.
TEST(CpuPlacement, CountIsTheAffinityMasksAndDrivesOversubscription) {
  const std::vector<int> cpus = allowed_cpus();
  ASSERT_FALSE(cpus.empty());
  EXPECT_EQ(allowed_cpu_count(), static_cast<int>(cpus.size()));
  std::thread([&] {
    allow_cpus({cpus.back()});
    EXPECT_EQ(allowed_cpu_count(), 1);
    run_ranks(2, [&](Group& g) {
      EXPECT_TRUE(dynamic_cast<ShmGroup&>(g).oversubscribed());
      float x[2] = {1, float(g.rank())};
      g.all_sum(x, x, sizeof(x), Float32);
      EXPECT_EQ(x[1], 1.0f);
    });
    if (cpus.size() < 2)
      return;
    allow_cpus({cpus[0], cpus[1]});
    EXPECT_EQ(allowed_cpu_count(), 2);
    run_ranks(2, [&](Group& g) {
      EXPECT_FALSE(dynamic_cast<ShmGroup&>(g).oversubscribed());
    });
    run_ranks(3, [&](Group& g) {
      EXPECT_TRUE(dynamic_cast<ShmGroup&>(g).oversubscribed());
    });
  }).join();
  EXPECT_EQ(allowed_cpus(), cpus) << "the test's thread kept its own mask";
}

// Oversubscribed members go back to CPUs in consecutive blocks (members
// 0-1 on the first of 2 CPUs, 2-3 on the second); share_cpus reads the
// mask once for all of them and must agree with share_cpu member by member.
TEST(CpuPlacement, ShareCpusGivesEveryMembersShareCpu) {
  const std::vector<int> cpus = allowed_cpus();
  if (cpus.size() < 2)
    GTEST_SKIP() << "needs two CPUs";
  std::thread([&] {
    allow_cpus({cpus[0], cpus[1]});
    EXPECT_EQ(share_cpus(4),
              (std::vector<int>{cpus[0], cpus[0], cpus[1], cpus[1]}));
    EXPECT_EQ(share_cpus(3), (std::vector<int>{cpus[0], cpus[0], cpus[1]}));
    for (int count : {1, 2, 5, 8})
      for (int i = 0; i < count; ++i)
        EXPECT_EQ(share_cpus(count)[static_cast<size_t>(i)],
                  share_cpu(i, count))
            << i << " of " << count;
    allow_cpus({cpus[0]});
    EXPECT_TRUE(share_cpus(4).empty()) << "one CPU: no homes";
    EXPECT_EQ(share_cpu(0, 4), -1);
  }).join();
}

// Small all_sums and all_gathers stage into the next band of a window each
// call, with a core per rank and with ranks that outnumber their cores
// (held to one CPU here). Every call's operands differ, so a band a rank
// read out of turn, or one a peer overwrote too early, gives a wrong sum;
// enough calls of each size to wrap the window twice.
TEST(ShmGroup, MovingBandsKeepEveryCallsOperands) {
  const std::vector<int> cpus = allowed_cpus();
  ASSERT_FALSE(cpus.empty());
  for (bool one_cpu : {false, true}) {
    const int n = one_cpu ? 3 : 2;
    std::thread([&] {
      if (one_cpu)
        allow_cpus({cpus[0]});
      run_ranks(n, [&](Group& g) {
        EXPECT_EQ(dynamic_cast<ShmGroup&>(g).oversubscribed(),
                  one_cpu || cpus.size() < 2);
        for (size_t bytes : {size_t(4096), size_t(48 << 10) + 64,
                             size_t(256) << 10, size_t(512) << 10}) {
          const size_t count = bytes / 4;
          const int calls = static_cast<int>((size_t(4) << 20) / bytes) + 3;
          std::vector<float> x(count), y(count), all(size_t(n) * count);
          for (int c = 0; c < calls; ++c) {
            const auto k = float(c % 17 + 1);
            for (size_t i = 0; i < count; ++i)
              x[i] = float(g.rank() + 1) * k + float(i % 5);
            g.all_sum(x.data(), y.data(), bytes, Float32);
            const float want = float(n * (n + 1) / 2) * k;
            for (size_t i = 0; i < count; i += 61)
              ASSERT_EQ(y[i], want + float(n) * float(i % 5))
                  << bytes << " B, call " << c << ", i=" << i;
            g.all_gather(x.data(), all.data(), bytes);
            for (int q = 0; q < n; ++q)
              ASSERT_EQ(all[size_t(q) * count + count - 1],
                        float(q + 1) * k + float((count - 1) % 5))
                  << bytes << " B, call " << c << ", rank " << q;
          }
        }
      });
    }).join();
  }
}

CpuMask mask_of(std::initializer_list<int> cpus, uint32_t beyond = 0) {
  CpuMask m{};
  for (int c : cpus)
    m.bits[c / 64] |= uint64_t{1} << (c % 64);
  m.beyond = beyond;
  return m;
}

// What ranks may run on between them: the union of their masks.
TEST(CpuPlacement, CpusInUnionCountsWhatRanksHaveBetweenThem) {
  auto count = [](std::vector<CpuMask> v) {
    CpuUnion u;
    for (const CpuMask& m : v)
      u.add(m);
    return u.count();
  };
  EXPECT_EQ(count({mask_of({0}), mask_of({1})}), 2);  // one CPU each
  EXPECT_EQ(count({mask_of({0}), mask_of({0})}), 1);  // taskset -c 0
  EXPECT_EQ(count({mask_of({0, 1}), mask_of({1})}), 2);
  EXPECT_EQ(count({mask_of({3, 64, 191}), mask_of({130})}), 4);
  EXPECT_EQ(count({mask_of({}, 5), mask_of({0}, 7)}), 8);  // past the bits
  EXPECT_EQ(count({}), 1);
  const CpuMask mine = cpu_mask();
  EXPECT_EQ(count({mine}), allowed_cpu_count());
}

// Two ranks the scheduler left on one CPU (as it may after they woke each
// other): the higher one moves itself off it at a wait, so they do not
// take turns on one core (a whole step per small all_sum). Where
// they end up is the scheduler's business (another test on the other CPU
// may bring them back together), so the test checks the move itself. The
// scheduler may also part them before they ever wait side by side (CI saw
// that once with the ranks put together only at the start), so both are put
// back on one CPU before every call: rank 1 then meets rank 0 there at some
// wait, and may move once in these fewer than kMoveEverySteps steps.
TEST(ShmGroup, RanksStartedOnOneCpuSpreadOut) {
  const std::vector<int> cpus = allowed_cpus();
  if (cpus.size() < 2)
    GTEST_SKIP() << "needs two CPUs";
  std::vector<int> moves(2, -1);
  run_ranks(2, [&](Group& g) {
    for (int i = 0; i < 300; ++i) {
      allow_cpus({cpus[0]});
      allow_cpus(cpus);
      float x[2] = {1, float(g.rank())};
      g.all_sum(x, x, sizeof(x), Float32);
      ASSERT_EQ(x[0], 2.0f);
      ASSERT_EQ(x[1], 1.0f);
    }
    moves[static_cast<size_t>(g.rank())] =
        dynamic_cast<ShmGroup&>(g).cpu_moves();
    EXPECT_EQ(allowed_cpus(), cpus) << "the mask is the caller's";
  });
  EXPECT_EQ(moves[0], 0) << "only the higher rank of a pair moves";
  EXPECT_GE(moves[1], 1) << "rank 1 never moved off rank 0's CPU";
  EXPECT_LE(moves[1], 1) << "at most one move per 1024 steps";
}

// Ranks pinned to one CPU by their user cannot move: they take turns
// (yielding), stay where they were put, and compute the same results.
TEST(ShmGroup, RanksPinnedToOneCpuTakeTurns) {
  const std::vector<int> cpus = allowed_cpus();
  run_ranks(2, [&](Group& g) {
    allow_cpus({cpus[0]});
    std::vector<float> big(1 << 18, 1.0f);
    for (int i = 0; i < 300; ++i) {
      float x[2] = {1, float(g.rank())};
      g.all_sum(x, x, sizeof(x), Float32);
      ASSERT_EQ(x[0], 2.0f);
      ASSERT_EQ(x[1], 1.0f);
    }
    g.all_sum(big.data(), big.data(), big.size() * 4, Float32);
    EXPECT_EQ(big.back(), 2.0f);
    EXPECT_EQ(allowed_cpus(), std::vector<int>{cpus[0]});
    EXPECT_EQ(dynamic_cast<ShmGroup&>(g).cpu_moves(), 0) << "nowhere to go";
  });
}

TEST(ShmGroup, BadDtypeIsUsageErrorAndGroupStillWorks) {
  run_ranks(2, [&](Group& g) {
    float x[2] = {1, 2};
    EXPECT_THROW(g.all_sum(x, x, 7, Float32), UsageError);
    EXPECT_THROW(g.all_sum(x, x, 8, 99), UsageError);
    g.all_sum(x, x, 8, Float32);
    EXPECT_EQ(x[1], 4.0f);
  });
}

}  // namespace

// A waiter that has run out of spinning sleeps on the wake word; a waker
// that publishes and bumps wakes it, with either fence scheme (shm_sync.h):
// the waker's light fence and the sleeper's membarrier, or a fence on both
// sides. The waker starts only once the waiter counts as a sleeper.
TEST(ShmSync, SleeperWakesWithEitherFenceScheme) {
  for (bool asymmetric : {false, true}) {
    if (asymmetric && !asymmetric_fences()) {
      ADD_FAILURE() << "membarrier GLOBAL_EXPEDITED refused on this kernel";
      continue;
    }
    WakeWord ww;
    std::atomic<uint64_t> progress{0};
    std::thread waker([&] {
      while (ww.sleepers.load() == 0)
        std::this_thread::yield();
      progress.store(1, std::memory_order_release);
      waker_fence(asymmetric);
      ww.bump();
    });
    const Deadline dl = Deadline::after(std::chrono::seconds(10));
    wait_until(
        ww, asymmetric, dl,
        [&] { return progress.load(std::memory_order_acquire) == 1; },
        [&] { ASSERT_FALSE(dl.expired()) << "still asleep at the deadline"; },
        [] { return WaitMode::kYield; });
    waker.join();
    EXPECT_EQ(progress.load(), 1u);
    EXPECT_EQ(ww.sleepers.load(), 0u);
  }
}

// read_peer / write_peer (this process as the peer: process_vm_readv of
// one's own pid is allowed): every distance between destination and source
// mod 4096, those the kernel's copy crawls at (1-31, through a bounce
// buffer) among them, at lengths below, at and past the bounce's piece and
// from source offsets that make pieces cross pages. Every byte arrives,
// none beside the destination changes, and a bad address is an error, not
// a crash, on both paths.
TEST(PeerCopy, EveryDistanceMovesEveryByteAndNothingElse) {
  constexpr size_t kPage = 4096, kGuard = 64;
  const pid_t me = ::getpid();
  const std::vector<size_t> lengths = {
      8, 1000, 4096 + 13, 64 << 10, (64 << 10) + 1, (200 << 10) + 7};
  const size_t most = *std::max_element(lengths.begin(), lengths.end());
  std::vector<char> src(most + 2 * kPage), dst(most + 3 * kPage + kGuard);
  for (size_t i = 0; i < src.size(); ++i)
    src[i] = static_cast<char>(i * 7 + (i >> 12));
  auto page_at = [&](std::vector<char>& v, size_t off) {
    const auto p = reinterpret_cast<uintptr_t>(v.data());
    return v.data() + ((kPage - p % kPage) % kPage) + off;
  };
  for (size_t src_off : {size_t(0), size_t(100), size_t(4090)}) {
    const char* s = page_at(src, src_off);
    const auto s_addr = reinterpret_cast<uint64_t>(s);
    for (size_t dist : {0, 1, 16, 31, 32, 33, 64, 2048, 4095}) {
      char* d = page_at(dst, kGuard + (src_off + dist) % kPage);
      for (size_t len : lengths) {
        for (bool write : {false, true}) {
          std::fill(dst.begin(), dst.end(), char(0x5a));
          // write_peer copies s into the "peer's" d.
          const int err =
              write ? write_peer(me, reinterpret_cast<uint64_t>(d), s, len)
                    : read_peer(me, s_addr, d, len);
          ASSERT_EQ(err, 0) << (write ? "write" : "read") << " distance "
                            << dist << " length " << len;
          ASSERT_EQ(std::memcmp(d, s, len), 0)
              << (write ? "write" : "read") << " distance " << dist
              << " length " << len << " source offset " << src_off;
          ASSERT_EQ(d[-1], char(0x5a)) << "byte before, distance " << dist;
          ASSERT_EQ(d[len], char(0x5a)) << "byte after, distance " << dist;
        }
      }
    }
  }
  // An address nobody maps (in page 0), at a fast and at a slow distance.
  constexpr uint64_t kUnmapped = 64;
  for (size_t dist : {0, 16}) {
    EXPECT_EQ(read_peer(me, kUnmapped, page_at(dst, kUnmapped + dist), 4096),
              EFAULT)
        << "distance " << dist;
    EXPECT_EQ(write_peer(me, kUnmapped, page_at(dst, kUnmapped - dist), 4096),
              EFAULT)
        << "distance " << dist;
  }
}
