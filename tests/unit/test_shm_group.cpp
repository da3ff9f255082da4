// Copyright 2026 the jaccl authors.
// ShmGroup with threads as ranks over one real shared-memory segment.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <functional>
#include <numeric>
#include <thread>
#include <vector>

#include "collectives/shm_group.h"
#include "jaccl/jaccl.h"

using namespace jaccl;
using namespace jaccl::detail;

namespace {

std::string unique_name() {
  static std::atomic<int> n{0};
  return "/jaccl-test-" + std::to_string(::getpid()) + "-" +
         std::to_string(n++);
}

// Runs body(group) on `size` threads sharing one segment; rethrows the first
// exception.
void run_ranks(int size, const std::function<void(Group&)>& body,
               size_t budget = 8 << 20, Millis op_timeout = Millis(20000)) {
  auto layout = ShmLayout::for_budget(size, budget);
  std::string name = unique_name();
  auto owner = ShmSegment::create(name, layout.total(), 0);
  ShmGroup::init_segment(owner.data(), layout);
  std::vector<std::unique_ptr<ShmGroup>> groups;
  for (int r = 0; r < size; ++r) {
    groups.push_back(std::make_unique<ShmGroup>(
        r, size, std::vector<int>{}, ShmSegment::open(name, layout.total(), r),
        layout, std::make_shared<FailureState>(), op_timeout, nullptr));
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

class ShmSizes : public ::testing::TestWithParam<int> {};

TEST_P(ShmSizes, AllSumFloatAndInt) {
  int size = GetParam();
  for (size_t count : {size_t(0), size_t(1), size_t(7), size_t(1000),
                       size_t(8193), size_t(3 << 20) + 3}) {
    run_ranks(size, [&](Group& g) {
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
    });
  }
}

TEST_P(ShmSizes, AllGatherSumScatterBroadcast) {
  int size = GetParam();
  for (size_t n : {size_t(0), size_t(8), size_t(1000), size_t(5 << 20)}) {
    run_ranks(size, [&](Group& g) {
      std::vector<uint8_t> in(n), out(n * size);
      for (size_t i = 0; i < n; ++i)
        in[i] = uint8_t(g.rank() * 31 + i);
      g.all_gather(in.data(), out.data(), n);
      for (int q = 0; q < size; ++q) {
        for (size_t i = 0; i < n; ++i) {
          ASSERT_EQ(out[q * n + i], uint8_t(q * 31 + i));
        }
      }
      size_t count = n / 4;
      std::vector<int32_t> chunks(count * size), mine(count);
      for (size_t i = 0; i < chunks.size(); ++i) {
        chunks[i] = int32_t(i + g.rank());
      }
      g.sum_scatter(chunks.data(), mine.data(), count * 4, Int32);
      for (size_t i = 0; i < count; ++i) {
        int32_t want = 0;
        for (int q = 0; q < size; ++q) {
          want += int32_t(g.rank() * count + i + q);
        }
        ASSERT_EQ(mine[i], want);
      }
      std::vector<uint8_t> buf(n, uint8_t(g.rank()));
      g.broadcast(buf.data(), n, size - 1);
      for (size_t i = 0; i < n; ++i)
        ASSERT_EQ(buf[i], uint8_t(size - 1));
      g.barrier();
    });
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

INSTANTIATE_TEST_SUITE_P(Ranks, ShmSizes, ::testing::Values(1, 2, 3, 4, 8));

TEST(ShmGroup, MismatchedOpsAreNamed) {
  EXPECT_THROW(run_ranks(2,
                         [&](Group& g) {
                           float x[4] = {};
                           if (g.rank() == 0) {
                             g.all_sum(x, x, 16, Float32);
                           } else {
                             g.all_gather(x, x, 8);
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
    EXPECT_NE(std::string(e.what()).find("ranks 2"), std::string::npos)
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
