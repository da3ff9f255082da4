// Copyright 2026 the jaccl authors.
// The op skeleton every group runs its ops through (collectives/op_runner.h):
// its order (checks, zero bytes, body), its deadline and its one failure
// rule, on a real FailureState.
#include <gtest/gtest.h>

#include <chrono>
#include <stdexcept>
#include <string>

#include "collectives/op_runner.h"
#include "common/error.h"
#include "jaccl/types.h"

using namespace jaccl;
using namespace jaccl::detail;
using namespace std::chrono_literals;

namespace {

std::shared_ptr<FailureState> fresh() {
  return std::make_shared<FailureState>();
}

TEST(OpRunner, BadArgumentsThrowUsageBeforeTheBodyAndLeaveTheGroup) {
  OpRunner ops(0, 3, 7, fresh(), 1000ms);
  char buf[16] = {};
  int ran = 0;
  auto body = [&](const Deadline&) { ++ran; };
  try {
    ops.run(call::all_reduce(OpKind::AllSum, buf, buf + 2, 8, Int8), body);
    FAIL() << "no exception";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("rank 7"), std::string::npos)
        << e.what();  // the job rank names this rank
    EXPECT_NE(std::string(e.what()).find("overlap partially"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(ops.run(call::send(buf, 4, 0), body), UsageError);  // self
  EXPECT_THROW(ops.run(call::recv(buf, 4, 3), body), UsageError);
  EXPECT_THROW(ops.run(call::broadcast(buf, 4, -1), body), UsageError);
  EXPECT_THROW(ops.run(call::all_to_all(buf, buf, 4), body), UsageError);
  EXPECT_EQ(ran, 0);
  EXPECT_FALSE(ops.state().failed());
  ops.run(call::barrier(), body);
  EXPECT_EQ(ran, 1);
}

TEST(OpRunner, ZeroBytesSkipTheBodyButBarrierAndAllToAllvRun) {
  OpRunner ops(1, 2, 1, fresh(), 0ms);
  int ran = 0;
  auto body = [&](const Deadline& dl) {
    EXPECT_TRUE(dl.is_never());  // op_timeout 0: no limit
    ++ran;
  };
  ops.run(call::all_reduce(OpKind::AllMax, nullptr, nullptr, 0, Float32), body);
  ops.run(call::all_gather(nullptr, nullptr, 0), body);
  ops.run(call::send(nullptr, 0, 0), body);
  ops.run(call::all_to_all(nullptr, nullptr, 0), body);
  EXPECT_EQ(ran, 0);
  const size_t zeros[2] = {0, 0};
  ops.run(call::all_to_allv(nullptr, zeros, nullptr, zeros), body);
  ops.run(call::barrier(), body);
  EXPECT_EQ(ran, 2);
}

TEST(OpRunner, AFailureIsTheGroupsAndEveryLaterCallSeesTheFirst) {
  OpRunner ops(0, 2, 0, fresh(), 5000ms);
  auto first = [&] {
    ops.run(call::barrier(), [](const Deadline& dl) {
      EXPECT_FALSE(dl.is_never());
      EXPECT_EQ(dl.total(), 5000ms);
      raise(ErrorKind::PeerLost, "rank 1 went away", {.rank = 0, .peer = 1});
    });
  };
  EXPECT_THROW(first(), PeerLostError);
  EXPECT_TRUE(ops.state().failed());
  int ran = 0;
  try {
    ops.run(call::barrier(), [&](const Deadline&) { ++ran; });
    FAIL() << "no exception";
  } catch (const PeerLostError& e) {
    EXPECT_NE(std::string(e.what()).find("went away"), std::string::npos);
  }
  EXPECT_EQ(ran, 0);
  // The failed state is checked before the arguments.
  EXPECT_THROW(ops.run(call::send(nullptr, 4, 1), [](const Deadline&) {}),
               PeerLostError);
}

TEST(OpRunner, AForeignExceptionBecomesAnInternalErrorOfTheGroup) {
  OpRunner ops(0, 2, 4, fresh(), 1000ms);
  try {
    ops.run(call::barrier(),
            [](const Deadline&) { throw std::runtime_error("boom"); });
    FAIL() << "no exception";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Internal);
    EXPECT_NE(std::string(e.what()).find("barrier: boom"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(ops.state().throw_if_failed(), Error);
}

TEST(OpRunner, UsageAndAgreedErrorsFromTheBodyLeaveTheGroup) {
  OpRunner ops(0, 2, 0, fresh(), 1000ms);
  EXPECT_THROW(ops.run(call::barrier(),
                       [](const Deadline&) {
                         raise(ErrorKind::Usage, "a bad dtype inside");
                       }),
               UsageError);
  EXPECT_THROW(ops.run(call::barrier(),
                       [&](const Deadline&) {
                         ops.agreed([] {
                           raise(ErrorKind::Protocol, "counts disagree");
                         });
                       }),
               ProtocolError);
  EXPECT_FALSE(ops.state().failed());
  // agreed() marks only its own op: the next op's protocol error poisons.
  EXPECT_THROW(ops.run(call::barrier(),
                       [](const Deadline&) {
                         raise(ErrorKind::Protocol, "out of step");
                       }),
               ProtocolError);
  EXPECT_TRUE(ops.state().failed());
}

TEST(OpRunner, InternalCallsSkipTheChecksAndAlwaysRun) {
  OpRunner ops(0, 2, 0, fresh(), 1000ms);
  int ran = 0;
  const OpCall c{
      .kind = OpKind::AllToAllv, .name = "all_to_allv", .internal = true};
  ops.run(c, [&](const Deadline&) { ++ran; });  // spans empty: unchecked
  EXPECT_EQ(ran, 1);
}

}  // namespace
