// Copyright 2026 the jaccl authors.
// The error hierarchy and its one formatting helper: format_error's layout,
// raise() throwing the concrete subclass for every kind, rethrow_as_error.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/error.h"
#include "jaccl/error.h"

namespace jaccl::detail {
namespace {

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

const std::vector<ErrorKind> kAllKinds = {
    ErrorKind::Config,   ErrorKind::Timeout, ErrorKind::PeerLost,
    ErrorKind::Protocol, ErrorKind::Io,      ErrorKind::Usage,
    ErrorKind::Internal,
};

TEST(RankList, ListsAndCaps) {
  EXPECT_EQ(rank_list({}), "");
  EXPECT_EQ(rank_list({3}), "3");
  EXPECT_EQ(rank_list({2, 5, 7}), "2, 5, 7");
  std::vector<int> many;
  for (int r = 0; r < 20; ++r) {
    many.push_back(r);
  }
  EXPECT_EQ(rank_list(many),
            "0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15 and 4 more");
  EXPECT_EQ(ranks_phrase({3}), "rank 3");
  EXPECT_EQ(ranks_phrase({2, 5}), "ranks 2, 5");
}

TEST(FormatError, BareMessage) {
  EXPECT_EQ(format_error("something broke"), "[jaccl] something broke");
}

TEST(FormatError, RankOnly) {
  EXPECT_EQ(format_error("bad", {.rank = 2}), "[jaccl] rank 2: bad");
  EXPECT_EQ(format_error("bad", {.rank = 0}), "[jaccl] rank 0: bad");
}

TEST(FormatError, PeerOnly) {
  EXPECT_EQ(format_error("lost", {.peer = 3}), "[jaccl] lost (peer rank 3)");
  EXPECT_EQ(format_error("lost", {.peer = 0}), "[jaccl] lost (peer rank 0)");
}

TEST(FormatError, AddressOnly) {
  EXPECT_EQ(format_error("refused", {.address = "10.0.0.1:4000"}),
            "[jaccl] refused (address 10.0.0.1:4000)");
}

TEST(FormatError, ErrnoOnly) {
  EXPECT_EQ(format_error("bind", {.sys_errno = EADDRINUSE}),
            std::string("[jaccl] bind: ") + std::strerror(EADDRINUSE));
}

TEST(FormatError, EverythingInDocumentedOrder) {
  ErrorContext ctx{.rank = 2,
                   .peer = 3,
                   .address = "10.0.0.1:4000",
                   .sys_errno = ECONNREFUSED};
  EXPECT_EQ(format_error("connect failed", ctx),
            std::string("[jaccl] rank 2: connect failed (peer rank 3, "
                        "address 10.0.0.1:4000): ") +
                std::strerror(ECONNREFUSED));
}

TEST(FormatError, PeerAndAddressWithoutRank) {
  EXPECT_EQ(format_error("x", {.peer = 1, .address = "/tmp/jaccl"}),
            "[jaccl] x (peer rank 1, address /tmp/jaccl)");
}

TEST(FormatError, NegativeRankAndPeerMeanUnknown) {
  EXPECT_EQ(format_error("x", {.rank = -1, .peer = -1}), "[jaccl] x");
}

TEST(ErrorKindNames, AllKindsHaveDistinctNames) {
  std::vector<std::string> names;
  for (auto k : kAllKinds) {
    std::string n = to_string(k);
    EXPECT_FALSE(n.empty());
    EXPECT_NE(n, "Unknown");
    for (const auto& other : names)
      EXPECT_NE(n, other);
    names.push_back(n);
  }
  EXPECT_STREQ(to_string(ErrorKind::Config), "Config");
  EXPECT_STREQ(to_string(ErrorKind::Timeout), "Timeout");
  EXPECT_STREQ(to_string(ErrorKind::PeerLost), "PeerLost");
  EXPECT_STREQ(to_string(ErrorKind::Protocol), "Protocol");
  EXPECT_STREQ(to_string(ErrorKind::Io), "Io");
  EXPECT_STREQ(to_string(ErrorKind::Usage), "Usage");
  EXPECT_STREQ(to_string(ErrorKind::Internal), "Internal");
}

// raise(kind) throws exactly E, whose kind() is kind and whose what() is
// format_error's text.
template <class E>
void expect_raises_as(ErrorKind kind) {
  SCOPED_TRACE(to_string(kind));
  ErrorContext ctx{.rank = 1, .peer = 4, .address = "h:1"};
  try {
    raise(kind, "boom", ctx);
    FAIL() << "raise returned";
  } catch (const E& e) {
    EXPECT_EQ(e.kind(), kind);
    EXPECT_EQ(std::string(e.what()), format_error("boom", ctx));
  } catch (...) {
    FAIL() << "raise threw another type";
  }
}

TEST(Raise, ThrowsTheConcreteSubclassForEachKind) {
  expect_raises_as<ConfigError>(ErrorKind::Config);
  expect_raises_as<TimeoutError>(ErrorKind::Timeout);
  expect_raises_as<PeerLostError>(ErrorKind::PeerLost);
  expect_raises_as<ProtocolError>(ErrorKind::Protocol);
  expect_raises_as<IoError>(ErrorKind::Io);
  expect_raises_as<UsageError>(ErrorKind::Usage);
  expect_raises_as<Error>(ErrorKind::Internal);
}

TEST(Raise, SubclassIsNotConfusedWithAnother) {
  EXPECT_THROW(raise(ErrorKind::Timeout, "t"), TimeoutError);
  try {
    raise(ErrorKind::Timeout, "t");
  } catch (const PeerLostError&) {
    FAIL() << "a Timeout was caught as PeerLostError";
  } catch (const ConfigError&) {
    FAIL() << "a Timeout was caught as ConfigError";
  } catch (const TimeoutError&) {
  }
}

TEST(Raise, CatchByBaseClass) {
  for (auto kind : kAllKinds) {
    SCOPED_TRACE(to_string(kind));
    bool caught = false;
    try {
      raise(kind, "base", {.rank = 0});
    } catch (const Error& e) {
      caught = true;
      EXPECT_EQ(e.kind(), kind);
      EXPECT_EQ(std::string(e.what()), "[jaccl] rank 0: base");
    }
    EXPECT_TRUE(caught);
    // ... and as std::runtime_error / std::exception.
    EXPECT_THROW(raise(kind, "x"), std::runtime_error);
    EXPECT_THROW(raise(kind, "x"), std::exception);
  }
}

TEST(Raise, DirectConstructionSetsKind) {
  EXPECT_EQ(ConfigError("a").kind(), ErrorKind::Config);
  EXPECT_EQ(TimeoutError("a").kind(), ErrorKind::Timeout);
  EXPECT_EQ(PeerLostError("a").kind(), ErrorKind::PeerLost);
  EXPECT_EQ(ProtocolError("a").kind(), ErrorKind::Protocol);
  EXPECT_EQ(IoError("a").kind(), ErrorKind::Io);
  EXPECT_EQ(UsageError("a").kind(), ErrorKind::Usage);
  EXPECT_EQ(Error(ErrorKind::Internal, "a").kind(), ErrorKind::Internal);
  EXPECT_STREQ(UsageError("text").what(), "text");
}

std::exception_ptr capture(auto thrower) {
  try {
    thrower();
  } catch (...) {
    return std::current_exception();
  }
  return nullptr;
}

TEST(RethrowAsError, JacclErrorPassesThroughUnchanged) {
  auto ep = capture([] { raise(ErrorKind::PeerLost, "gone", {.peer = 5}); });
  try {
    rethrow_as_error(ep, ErrorKind::Io, "while reading", {.rank = 1});
    FAIL();
  } catch (const PeerLostError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::PeerLost);
    EXPECT_EQ(std::string(e.what()), "[jaccl] gone (peer rank 5)");
  }
}

TEST(RethrowAsError, StdExceptionBecomesTheGivenKind) {
  auto ep = capture([] { throw std::out_of_range("index 7"); });
  try {
    rethrow_as_error(ep, ErrorKind::Io, "user callback failed",
                     {.rank = 3, .address = "redis://x"});
    FAIL();
  } catch (const IoError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Io);
    EXPECT_EQ(std::string(e.what()),
              "[jaccl] rank 3: user callback failed: index 7 (address "
              "redis://x)");
  }
}

TEST(RethrowAsError, EachKindGetsItsSubclass) {
  auto ep = capture([] { throw std::runtime_error("inner"); });
  EXPECT_THROW(rethrow_as_error(ep, ErrorKind::Config, "c"), ConfigError);
  EXPECT_THROW(rethrow_as_error(ep, ErrorKind::Timeout, "c"), TimeoutError);
  EXPECT_THROW(rethrow_as_error(ep, ErrorKind::Protocol, "c"), ProtocolError);
  EXPECT_THROW(rethrow_as_error(ep, ErrorKind::Usage, "c"), UsageError);
}

TEST(RethrowAsError, NonStdExceptionIsUnknown) {
  auto ep = capture([] { throw 42; });
  try {
    rethrow_as_error(ep, ErrorKind::Config, "the factory threw", {.rank = 0});
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()),
              "[jaccl] rank 0: the factory threw: unknown exception");
  }
}

TEST(RethrowAsError, StringExceptionIsStillAnError) {
  auto ep = capture([] { throw std::string("not an exception class"); });
  EXPECT_THROW(rethrow_as_error(ep, ErrorKind::Io, "ctx"), IoError);
}

TEST(RethrowAsError, KeepsOriginalMessageText) {
  auto ep = capture([] { throw std::logic_error("very specific"); });
  try {
    rethrow_as_error(ep, ErrorKind::Usage, "calling f");
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), "very specific"));
    EXPECT_TRUE(contains(e.what(), "calling f"));
    EXPECT_EQ(e.kind(), ErrorKind::Usage);
  }
}

}  // namespace
}  // namespace jaccl::detail
