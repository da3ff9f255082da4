// Copyright 2026 the jaccl authors.
// Group::all_reduce with every ReduceOp, and the rooted ops (reduce, gather,
// scatter), on TCP (mesh) and shared memory with threads as ranks, small and
// large enough for each plane's second algorithm; the kernels of the new
// ops; the usage errors; ranks that disagree on the root.
#include <gtest/gtest.h>

#include <complex>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "common/reduce.h"
#include "jaccl/jaccl.h"
#include "support/thread_ranks.h"

namespace jaccl::detail {
namespace {

using namespace std::chrono_literals;

// ---- the kernels ---------------------------------------------------------

TEST(ReduceKernels, ProdWrapsIntegersAndMultipliesFloats) {
  int32_t a[3] = {1 << 20, -3, 7};
  const int32_t b[3] = {1 << 12, 5, -2};
  reduce_into(ReduceOp::Prod, Int32, a, b, 3);
  EXPECT_EQ(a[0], 0);  // 2^32 wraps to 0
  EXPECT_EQ(a[1], -15);
  EXPECT_EQ(a[2], -14);
  uint16_t u[1] = {300};
  const uint16_t v[1] = {300};
  reduce_into(ReduceOp::Prod, UInt16, u, v, 1);
  EXPECT_EQ(u[0], static_cast<uint16_t>(90000u));
  float f[2] = {1.5f, -2.0f};
  const float g[2] = {4.0f, 0.25f};
  reduce_into(ReduceOp::Prod, Float32, f, g, 2);
  EXPECT_EQ(f[0], 6.0f);
  EXPECT_EQ(f[1], -0.5f);
}

TEST(ReduceKernels, ProdOfComplexIsTheComplexProduct) {
  std::complex<float> a[1] = {{1.0f, 2.0f}};
  const std::complex<float> b[1] = {{3.0f, -1.0f}};
  reduce_into(ReduceOp::Prod, Complex64, a, b, 1);
  EXPECT_EQ(a[0], std::complex<float>(5.0f, 5.0f));
}

TEST(ReduceKernels, BitwiseOnIntegersAndBool) {
  uint8_t a[1] = {0b1100}, o[1] = {0b1100}, x[1] = {0b1100};
  const uint8_t b[1] = {0b1010};
  reduce_into(ReduceOp::BitAnd, UInt8, a, b, 1);
  reduce_into(ReduceOp::BitOr, UInt8, o, b, 1);
  reduce_into(ReduceOp::BitXor, UInt8, x, b, 1);
  EXPECT_EQ(a[0], 0b1000);
  EXPECT_EQ(o[0], 0b1110);
  EXPECT_EQ(x[0], 0b0110);
  int64_t s[1] = {-1};
  const int64_t t[1] = {0x0f0f};
  reduce_into(ReduceOp::BitAnd, Int64, s, t, 1);
  EXPECT_EQ(s[0], 0x0f0f);
  uint8_t p[2] = {2, 0};  // Bool: any nonzero byte is true
  const uint8_t q[2] = {7, 0};
  reduce_into(ReduceOp::BitXor, Bool, p, q, 2);
  EXPECT_EQ(p[0], 0);
  EXPECT_EQ(p[1], 0);
}

TEST(ReduceKernels, BitwiseOnFloatsIsAUsageErrorNamingOpAndDtype) {
  float a[1] = {1.0f};
  try {
    reduce_into(ReduceOp::BitOr, Float32, a, a, 1);
    FAIL() << "no error";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("bitor"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("float32"), std::string::npos);
  }
  EXPECT_FALSE(reduce_supported(ReduceOp::BitAnd, Float16));
  EXPECT_TRUE(reduce_supported(ReduceOp::Prod, BFloat16));
  EXPECT_STREQ(reduce_op_name(ReduceOp::BitXor), "bitxor");
}

// ---- groups --------------------------------------------------------------

struct Case {
  std::string name;
  std::string transport;  // tcp | shm
  int n;
};
void PrintTo(const Case& c, std::ostream* os) {
  *os << c.name;
}

class RootedOps : public ::testing::TestWithParam<Case> {
 protected:
  // f(group) on one thread per rank; returns each rank's error.
  std::vector<std::string> run(const std::function<void(Group&)>& f) {
    const Case& c = GetParam();
    return test::run_thread_ranks(
        c.n,
        [&](int) {
          Config cfg;
          cfg.set_transport(c.transport)
              .set_interface("127.0.0.1")
              .set_timeout(60s)
              .set_op_timeout(60s);
          return cfg;
        },
        [&](int, Group& g) { f(g); });
  }
  void expect_clean(const std::vector<std::string>& errors) {
    for (size_t r = 0; r < errors.size(); ++r) {
      EXPECT_EQ(errors[r], "") << "rank " << r;
    }
  }
};

// Rank r's element i for the reductions: small, so products stay exact.
int32_t ival(int r, size_t i) {
  return static_cast<int32_t>((r + 1) * 3 + static_cast<int>(i % 5)) |
         static_cast<int32_t>(i % 3 == 0 ? 0x100 : 0);
}
float fval(int r, size_t i) {
  return 1.0f + 0.5f * static_cast<float>((r + static_cast<int>(i)) % 3);
}

int32_t ifold(ReduceOp op, int a, int32_t b) {
  switch (op) {
    case ReduceOp::Sum:
      return a + b;
    case ReduceOp::Max:
      return std::max(a, b);
    case ReduceOp::Min:
      return std::min(a, b);
    case ReduceOp::Prod:
      return static_cast<int32_t>(static_cast<uint32_t>(a) *
                                  static_cast<uint32_t>(b));
    case ReduceOp::BitAnd:
      return a & b;
    case ReduceOp::BitOr:
      return a | b;
    case ReduceOp::BitXor:
      return a ^ b;
  }
  return 0;
}

constexpr ReduceOp kOps[] = {ReduceOp::Sum,   ReduceOp::Max,    ReduceOp::Min,
                             ReduceOp::Prod,  ReduceOp::BitAnd, ReduceOp::BitOr,
                             ReduceOp::BitXor};

TEST_P(RootedOps, AllReduceEveryOpInPlaceAndApart) {
  for (size_t count : {size_t{3}, size_t{1} << 18}) {  // 12 B and 1 MiB
    expect_clean(run([&](Group& g) {
      const int P = g.size(), me = g.rank();
      for (ReduceOp op : kOps) {
        std::vector<int32_t> in(count), out(count, -7);
        for (size_t i = 0; i < count; ++i)
          in[i] = ival(me, i);
        g.all_reduce(in.data(), out.data(), count * 4, Int32, op);
        g.all_reduce(in.data(), in.data(), count * 4, Int32, op);
        for (size_t i = 0; i < count; ++i) {
          int32_t want = ival(0, i);
          for (int r = 1; r < P; ++r)
            want = ifold(op, want, ival(r, i));
          if (out[i] != want || in[i] != want) {
            throw std::runtime_error(
                std::string(reduce_op_name(op)) + " count " +
                std::to_string(count) + " element " + std::to_string(i) + ": " +
                std::to_string(out[i]) + "/" + std::to_string(in[i]) +
                " want " + std::to_string(want));
          }
        }
      }
      // Float prod: the same bytes on every rank, and the exact value.
      std::vector<float> f(count), fo(count);
      for (size_t i = 0; i < count; ++i)
        f[i] = fval(me, i);
      g.all_reduce(f.data(), fo.data(), count * 4, Float32, ReduceOp::Prod);
      for (size_t i = 0; i < count; ++i) {
        float want = 1.0f;
        for (int r = 0; r < P; ++r)
          want *= fval(r, i);
        if (fo[i] != want)
          throw std::runtime_error("float prod element " + std::to_string(i));
      }
    }));
  }
}

TEST_P(RootedOps, ReduceLeavesTheResultOnTheRootOnly) {
  expect_clean(run([&](Group& g) {
    const int P = g.size(), me = g.rank();
    const size_t count = 1000;
    for (int root = 0; root < P; ++root) {
      std::vector<int32_t> in(count), out(count, -7);
      for (size_t i = 0; i < count; ++i)
        in[i] = ival(me, i);
      // Non-roots may pass a null output.
      g.reduce(in.data(), me == root ? out.data() : nullptr, count * 4, Int32,
               ReduceOp::Max, root);
      for (size_t i = 0; i < count; ++i) {
        const int32_t want = me == root ? ival(P - 1, i) : -7;
        if (out[i] != want)
          throw std::runtime_error("reduce root " + std::to_string(root) +
                                   " element " + std::to_string(i));
      }
    }
  }));
}

TEST_P(RootedOps, GatherAndScatterFromEveryRoot) {
  for (size_t n : {size_t{0}, size_t{8}, size_t{64} << 10}) {
    expect_clean(run([&](Group& g) {
      const int P = g.size(), me = g.rank();
      auto byte = [](int from, int to, size_t i) {
        return static_cast<uint8_t>(from * 29 + to * 5 + i * 11);
      };
      for (int root = 0; root < P; ++root) {
        std::vector<uint8_t> in(n), all(n * P, 0xA5);
        for (size_t i = 0; i < n; ++i)
          in[i] = byte(me, root, i);
        g.gather(in.data(), me == root ? all.data() : nullptr, n, root);
        if (me == root) {
          for (int q = 0; q < P; ++q)
            for (size_t i = 0; i < n; ++i)
              if (all[q * n + i] != byte(q, root, i))
                throw std::runtime_error("gather from " + std::to_string(q));
        }
        std::vector<uint8_t> blocks(me == root ? n * P : 0), mine(n, 0xA5);
        for (int q = 0; me == root && q < P; ++q)
          for (size_t i = 0; i < n; ++i)
            blocks[q * n + i] = byte(root, q, i);
        g.scatter(me == root ? blocks.data() : nullptr, mine.data(), n, root);
        for (size_t i = 0; i < n; ++i)
          if (mine[i] != byte(root, me, i))
            throw std::runtime_error("scatter from root " +
                                     std::to_string(root));
      }
    }));
  }
}

TEST_P(RootedOps, UsageErrorsLeaveTheGroupWorking) {
  expect_clean(run([&](Group& g) {
    float f[4] = {};
    EXPECT_THROW(g.all_reduce(f, f, sizeof f, Float32, ReduceOp::BitAnd),
                 UsageError);
    EXPECT_THROW(
        g.all_reduce(f, f, sizeof f, Float32, static_cast<ReduceOp>(42)),
        UsageError);
    EXPECT_THROW(g.reduce(f, f, sizeof f, Float32, ReduceOp::Sum, g.size()),
                 UsageError);
    EXPECT_THROW(g.gather(f, nullptr, sizeof f, -1), UsageError);
    EXPECT_THROW(g.scatter(f, f, sizeof f, g.size()), UsageError);
    int32_t x = g.rank() + 2;
    g.all_reduce(&x, &x, 4, Int32, ReduceOp::Prod);
    int32_t want = 1;
    for (int r = 0; r < g.size(); ++r)
      want *= r + 2;
    EXPECT_EQ(x, want);
  }));
}

TEST_P(RootedOps, RanksThatDisagreeOnTheRootFailAlike) {
  if (GetParam().n < 2)
    GTEST_SKIP() << "needs two ranks";
  const auto errors = run([&](Group& g) {
    char in[8] = {}, out[64] = {};
    // Rank 0 names root 0, the others root 1.
    g.gather(in, out, sizeof in, g.rank() == 0 ? 0 : 1);
  });
  for (size_t r = 0; r < errors.size(); ++r) {
    EXPECT_EQ(errors[r].rfind("Protocol:", 0), 0u)
        << "rank " << r << ": " << errors[r];
    EXPECT_NE(errors[r].find("gather (root "), std::string::npos) << errors[r];
  }
}

INSTANTIATE_TEST_SUITE_P(Planes, RootedOps,
                         ::testing::Values(Case{"tcp_n1", "tcp", 1},
                                           Case{"tcp_n3", "tcp", 3},
                                           Case{"shm_n2", "shm", 2},
                                           Case{"shm_n3", "shm", 3}),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace jaccl::detail
