// Copyright 2026 the jaccl authors.
// The error hierarchy and its one formatting helper: format_error's layout,
// raise() throwing the concrete subclass for every kind, rethrow_as_error;
// the fields (rank, peer, peers, address, errno, detail) and the detail
// template whose rank references are fields, renaming a split child's
// member numbers by the fields (never by reading text) for errors of the
// real coordinator, handshake and TCP transport, the fields on the wire.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <exception>
#include <future>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "bootstrap/tcp_star.h"
#include "common/error.h"
#include "common/error_wire.h"
#include "common/handshake.h"
#include "jaccl/error.h"
#include "support/proc.h"
#include "transport/tcp_card.h"

namespace jaccl::detail {
namespace {

using namespace std::chrono_literals;

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

// ---- structured errors -----------------------------------------------------

template <class E = Error>
E caught(auto thrower) {
  try {
    thrower();
  } catch (const E& e) {
    return e;
  }
  throw std::logic_error("nothing of the expected class was thrown");
}

TEST(Detail, PlainTextIsTextBracesIncluded) {
  const Detail d = std::string("json {\"a\": 1} and {0} and }{");
  EXPECT_EQ(d.str(), "json {\"a\": 1} and {0} and }{");
  EXPECT_TRUE(d.ranks().empty());
  EXPECT_EQ(format_error(d), "[jaccl] json {\"a\": 1} and {0} and }{");
}

TEST(Detail, RankReferencesRenderAndAreFields) {
  const Detail d = "timed out waiting for " + ranks_ref({3, 5}) + ", " +
                   rank_ref(3) + " first (" + rank_num(7) + ")";
  EXPECT_EQ(d.str(), "timed out waiting for ranks 3, 5, rank 3 first (7)");
  EXPECT_EQ(d.ranks(), (std::vector<int>{3, 5, 7}));  // each once
  EXPECT_EQ(ranks_ref({4}).str(), "rank 4");
  EXPECT_EQ(rank_nums({2, 5, 7}).str(), "2, 5, 7");
  std::vector<int> many;
  for (int r = 0; r < 20; ++r) {
    many.push_back(r);
  }
  EXPECT_EQ(ranks_ref(many).str(),
            "ranks 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15 and "
            "4 more");
  EXPECT_EQ(ranks_ref(many).ranks(), many);  // all of them, not 16
}

TEST(Detail, ConcatenationKeepsEachSidesRanks) {
  Detail a = rank_ref(9) + " and " + rank_ref(2);
  const Detail b = rank_ref(2) + " then " + ranks_ref({8, 9});
  a += "; " + b;
  EXPECT_EQ(a.str(), "rank 9 and rank 2; rank 2 then ranks 8, 9");
  EXPECT_EQ(a.ranks(), (std::vector<int>{9, 2, 8}));
  a += a;
  EXPECT_EQ(a.str(),
            "rank 9 and rank 2; rank 2 then ranks 8, 9"
            "rank 9 and rank 2; rank 2 then ranks 8, 9");
}

TEST(Detail, MalformedPlaceholdersReadAsText) {
  EXPECT_EQ(render_detail("a {7} b", {1}), "a {7} b");  // no rank 7
  EXPECT_EQ(render_detail("a {0-} {x} {", {1}), "a {0-} {x} {");
  EXPECT_EQ(render_detail("{0}{{0}}{1-2}", {4, 5, 6}), "4{0}5, 6");
  EXPECT_EQ(render_detail("{2-1}", {4, 5, 6}), "{2-1}");
  EXPECT_EQ(render_detail("{0-4000000000}", {1}), "{0-4000000000}");
}

TEST(Detail, ReplacedOnlyInTextAndWholeWords) {
  const Detail d = Detail("this rank called x but ") + rank_ref(2) +
                   " called y (this "
                   "rank's op; thisrank)";
  const Detail r = d.replaced("this rank", rank_ref(1));
  EXPECT_EQ(r.str(),
            "rank 1 called x but rank 2 called y (rank 1's op; thisrank)");
  EXPECT_EQ(r.ranks(), (std::vector<int>{2, 1}));
}

TEST(Detail, WireFormCarriesRanksAsNumbers) {
  const Detail d = "{braces} " + rank_ref(3) + " and " + ranks_ref({4, 1});
  const std::string wire = d.to_wire();
  EXPECT_EQ(wire, "{{braces}} rank {=3} and ranks {=4,1}");
  const Detail back = Detail::from_wire(wire);
  EXPECT_EQ(back.str(), d.str());
  EXPECT_EQ(back.ranks(), (std::vector<int>{3, 4, 1}));
  // Not a jaccl sender: its text stays text.
  EXPECT_EQ(Detail::from_wire("a {=x} {b").str(), "a {=x} {b");
  EXPECT_TRUE(Detail::from_wire("a {=x} {b").ranks().empty());
}

TEST(ErrorFields, RaiseFillsEveryField) {
  auto e = caught<PeerLostError>([] {
    raise(ErrorKind::PeerLost,
          "timed out after 30 s waiting for " + ranks_ref({3, 5}),
          {.rank = 2,
           .peer = 7,
           .address = "10.0.0.1:4000",
           .sys_errno = ECONNRESET});
  });
  EXPECT_EQ(e.kind(), ErrorKind::PeerLost);
  EXPECT_TRUE(e.structured());
  EXPECT_EQ(e.rank(), 2);
  EXPECT_EQ(e.peer(), 7);
  EXPECT_EQ(e.peers(), (std::vector<int>{7, 3, 5}));  // the peer first
  EXPECT_EQ(e.address(), "10.0.0.1:4000");
  EXPECT_EQ(e.sys_errno(), ECONNRESET);
  EXPECT_EQ(e.detail(), "timed out after 30 s waiting for ranks 3, 5");
  EXPECT_EQ(std::string(e.what()),
            std::string("[jaccl] rank 2: timed out after 30 s waiting for "
                        "ranks 3, 5 (peer rank 7, address 10.0.0.1:4000): ") +
                std::strerror(ECONNRESET));
}

// A rank named in the detail and as the peer is listed once, and the
// message reads as it did when the text held the number.
TEST(ErrorFields, PeerNamedInTheTextIsListedOnce) {
  auto e = caught([] {
    raise(ErrorKind::Protocol,
          "operation mismatch: this rank called all_sum but " + rank_ref(5) +
              " called all_gather",
          {.rank = 0, .peer = 5});
  });
  EXPECT_EQ(e.peers(), (std::vector<int>{5}));
  EXPECT_EQ(std::string(e.what()),
            "[jaccl] rank 0: operation mismatch: this rank called all_sum but "
            "rank 5 called all_gather (peer rank 5)");
}

TEST(ErrorFields, RelayedByComesLastAndIsRenamed) {
  ErrorInfo info = error_info("rank 1 reported: lost", {.rank = 0, .peer = 2});
  info.relayed_by = 1;
  info.sys_errno = EPIPE;
  EXPECT_EQ(
      format_error(info),
      std::string("[jaccl] rank 0: rank 1 reported: lost (peer rank 2): ") +
          std::strerror(EPIPE) + " (relayed by rank 1)");
  EXPECT_EQ(renamed(info, {5, 6, 7}).relayed_by, 6);
}

TEST(ErrorFields, AbsentFieldsAreEmpty) {
  auto e = caught([] { raise(ErrorKind::Config, "bad"); });
  EXPECT_EQ(e.rank(), -1);
  EXPECT_EQ(e.peer(), -1);
  EXPECT_TRUE(e.peers().empty());
  EXPECT_EQ(e.address(), "");
  EXPECT_EQ(e.sys_errno(), 0);
  EXPECT_EQ(e.detail(), "bad");
}

TEST(ErrorFields, MessageOnlyErrorsStillConstruct) {
  const PeerLostError e("[jaccl] rank 1: rank 3 died");
  EXPECT_FALSE(e.structured());
  EXPECT_STREQ(e.what(), "[jaccl] rank 1: rank 3 died");
  EXPECT_EQ(e.detail(), "[jaccl] rank 1: rank 3 died");
  EXPECT_EQ(e.rank(), -1);
  EXPECT_TRUE(e.peers().empty());
  const Error braces(ErrorKind::Internal, "{0} {{");
  EXPECT_STREQ(braces.what(), "{0} {{");
  EXPECT_EQ(braces.detail(), "{0} {{");
}

TEST(ErrorFields, CopiesDoNotThrow) {
  static_assert(std::is_nothrow_copy_constructible_v<Error>);
  static_assert(std::is_nothrow_copy_constructible_v<PeerLostError>);
  auto e =
      caught([] { raise(ErrorKind::Io, rank_ref(1) + " x", {.rank = 0}); });
  const Error copy = e;
  EXPECT_STREQ(copy.what(), e.what());
  EXPECT_EQ(copy.peers(), e.peers());
}

TEST(ErrorFields, MakeErrorThrowsTheClassOfTheKind) {
  ErrorInfo info{.rank = 1, .peers = {4}, .detail = "lost {0}"};
  try {
    std::rethrow_exception(make_error(ErrorKind::PeerLost, info));
  } catch (const PeerLostError& e) {
    EXPECT_STREQ(e.what(), "[jaccl] rank 1: lost 4");
  }
  EXPECT_THROW(std::rethrow_exception(make_error(ErrorKind::Usage, info)),
               UsageError);
  EXPECT_THROW(throw_error(ErrorKind::Timeout, info), TimeoutError);
}

TEST(ErrorFields, WithContextKeepsClassAndFields) {
  auto e = caught([] {
    raise(ErrorKind::Timeout, "waiting for " + rank_ref(3), {.rank = 1});
  });
  try {
    std::rethrow_exception(with_context(e, "jaccl_torch: allreduce failed: "));
  } catch (const TimeoutError& w) {
    EXPECT_STREQ(w.what(),
                 "jaccl_torch: allreduce failed: [jaccl] rank 1: waiting for "
                 "rank 3");
    EXPECT_EQ(w.rank(), 1);
    EXPECT_EQ(w.peers(), (std::vector<int>{3}));
    EXPECT_EQ(w.detail(), "waiting for rank 3");
  }
  try {
    std::rethrow_exception(with_context(ConfigError("plain"), "ctx: "));
  } catch (const ConfigError& w) {
    EXPECT_STREQ(w.what(), "ctx: plain");
  }
}

// A split child's error: member numbers in every field and in every rank
// reference of the detail become job ranks, and the message is built again.
TEST(Renamed, MapsTheFieldsAndRebuildsTheMessage) {
  const std::vector<int> names = {4, 6, 7};  // member m is job rank names[m]
  auto child = caught<PeerLostError>([] {
    raise(ErrorKind::PeerLost,
          rank_ref(2) + " died or closed its connection; waiting for " +
              ranks_ref({0, 2}),
          {.rank = 1, .peer = 0, .address = "h:1"});
  });
  try {
    throw_renamed(child, names);
  } catch (const PeerLostError& e) {
    EXPECT_EQ(e.rank(), 6);
    EXPECT_EQ(e.peer(), 4);
    EXPECT_EQ(e.peers(), (std::vector<int>{4, 7}));
    EXPECT_EQ(e.address(), "h:1");
    EXPECT_STREQ(e.what(),
                 "[jaccl] rank 6: rank 7 died or closed its connection; "
                 "waiting for ranks 4, 7 (peer rank 4, address h:1)");
  }
  // Numbers that are not rank references stay.
  auto counts = caught([] {
    raise(ErrorKind::Protocol,
          "call #2 of 3 ranks: " + rank_ref(1) + " passed n_bytes=0",
          {.rank = 0});
  });
  try {
    throw_renamed(counts, names);
  } catch (const ProtocolError& e) {
    EXPECT_STREQ(e.what(),
                 "[jaccl] rank 4: call #2 of 3 ranks: rank 6 passed "
                 "n_bytes=0");
  }
}

// Renaming reads no text: numbers typed into a detail (a user's exception,
// a message-only error) stay as they are; only the fields change.
TEST(Renamed, TextIsNeverParsed) {
  const std::vector<int> names = {4, 6, 7, 8};
  auto typed = caught<IoError>([] {
    rethrow_as_error(std::make_exception_ptr(
                         std::runtime_error("rank 3 and ranks 0, 2 are busy")),
                     ErrorKind::Io, "side-channel all-gather #0 (user) threw",
                     {.rank = 1, .peer = 0});
  });
  try {
    throw_renamed(typed, names);
  } catch (const IoError& e) {
    EXPECT_EQ(e.rank(), 6);
    EXPECT_EQ(e.peer(), 4);
    EXPECT_EQ(e.peers(), (std::vector<int>{4}));
    EXPECT_EQ(e.detail(),
              "side-channel all-gather #0 (user) threw: rank 3 and ranks 0, 2 "
              "are busy");
    EXPECT_STREQ(e.what(),
                 "[jaccl] rank 6: side-channel all-gather #0 (user) threw: "
                 "rank 3 and ranks 0, 2 are busy (peer rank 4)");
  }
  try {
    throw_renamed(TimeoutError("[jaccl] rank 1: waiting for ranks 0, 2"),
                  names);
  } catch (const TimeoutError& e) {
    EXPECT_FALSE(e.structured());
    EXPECT_STREQ(e.what(), "[jaccl] rank 1: waiting for ranks 0, 2");
  }
}

// ---- a split child's errors ------------------------------------------------
// Member m of the child is job rank kNames[m]; the errors come from the real
// bootstrap and transport code and are renamed as GroupHandle and split_group
// rename them (throw_renamed).
const std::vector<int> kNames = {4, 6, 7};

// The child's coordinator (member 0) times out waiting for member 2 and
// tells member 1 over the wire: both errors name member 2 in their fields,
// so both read job rank 7 once renamed.
TEST(ChildErrors, BootstrapErrorIsRenamedThroughItsFields) {
  const std::string a =
      "127.0.0.1:" + std::to_string(jaccl::test::free_loopback_port());
  auto r0 = make_tcp_star({0, 3, a, "", 2s});
  std::exception_ptr e1;
  std::thread t([&] {
    try {
      auto fn = make_tcp_star({1, 3, a, "", 30s});
      const char in = 1;
      std::vector<char> out(3);
      fn(&in, out.data(), 1);
    } catch (...) {
      e1 = std::current_exception();
    }
  });
  auto coord = caught<TimeoutError>([&] {
    const char in = 0;
    std::vector<char> out(3);
    r0(&in, out.data(), 1);
  });
  t.join();
  ASSERT_TRUE(e1);
  auto member = caught<TimeoutError>([&] { std::rethrow_exception(e1); });
  for (const Error* e : {static_cast<const Error*>(&coord),
                         static_cast<const Error*>(&member)}) {
    EXPECT_EQ(e->peers(), (std::vector<int>{2})) << e->what();
    EXPECT_NE(e->detail().find("waiting for rank 2 to connect"),
              std::string::npos)
        << e->what();
  }
  EXPECT_EQ(member.detail().rfind("coordinator reports: ", 0), 0u)
      << member.what();
  for (const Error* e : {static_cast<const Error*>(&coord),
                         static_cast<const Error*>(&member)}) {
    try {
      throw_renamed(*e, kNames);
    } catch (const TimeoutError& r) {
      EXPECT_EQ(r.rank(), kNames[static_cast<size_t>(e->rank())]);
      EXPECT_EQ(r.peers(), (std::vector<int>{7}));
      EXPECT_EQ(r.detail(),
                std::string(e->detail())
                    .replace(e->detail().find("rank 2"), 6, "rank 7"))
          << r.what();
      EXPECT_EQ(std::string(r.what()).find("rank 2"), std::string::npos)
          << r.what();
    }
  }
}

// A coordinator's refusal travels to the client as a handshake verdict and
// keeps its rank as a field.
TEST(ChildErrors, RefusalVerdictKeepsItsRank) {
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  auto server = std::async(std::launch::async, [&] {
    std::string why;
    auto h = server_handshake(sv[1], "", Deadline::after(20s), &why);
    if (h) {
      const Detail no =
          star::admission_problem(*h, 3, h->job, {true, false, true});
      send_verdict(sv[1], no.empty(), no, Deadline::after(20s), {.rank = 0});
    }
    ::close(sv[1]);
  });
  Hello me;
  me.rank = 2;
  me.size = 3;
  me.job = token_fingerprint("");
  me.nonce = random_nonce();
  auto e = caught<ConfigError>([&] {
    client_handshake(sv[0], me, "", Deadline::after(20s), {.rank = 1});
  });
  ::close(sv[0]);
  server.get();
  EXPECT_EQ(e.peers(), (std::vector<int>{2}));
  try {
    throw_renamed(e, kNames);
  } catch (const ConfigError& r) {
    EXPECT_STREQ(r.what(),
                 "[jaccl] rank 6: connection rejected by peer: rank 7 is "
                 "already connected");
  }
}

// A transport error about a peer: its peer field and the rank its detail
// names are one member, renamed together.
TEST(ChildErrors, TransportErrorIsRenamedThroughItsFields) {
  auto e = caught<ProtocolError>([] { decode_card("{\"rank\": 2}", 2, 1); });
  EXPECT_EQ(e.rank(), 1);
  EXPECT_EQ(e.peer(), 2);
  try {
    throw_renamed(e, kNames);
  } catch (const ProtocolError& r) {
    EXPECT_EQ(r.rank(), 6);
    EXPECT_EQ(r.peer(), 7);
    EXPECT_EQ(r.peers(), (std::vector<int>{7}));
    EXPECT_STREQ(r.what(),
                 "[jaccl] rank 6: rank 7 published a malformed TCP card (a "
                 "JSON card, as jaccl wrote them before: run one jaccl "
                 "version on every rank) (peer rank 7)");
  }
}

TEST(Renamed, NoNamesRethrowsAsItIs) {
  auto e = caught([] {
    raise(ErrorKind::Io, "lost " + rank_ref(2), {.rank = 9, .sys_errno = EIO});
  });
  try {
    throw_renamed(e, {});
  } catch (const IoError& again) {
    EXPECT_STREQ(again.what(), e.what());
    EXPECT_EQ(again.peers(), e.peers());
  }
}

TEST(ErrorWire, FieldsRoundTrip) {
  const ErrorInfo info = error_info(
      "the slot of " + rank_ref(2) + " holds the input of " + rank_ref(5),
      {.rank = 1, .peer = 3, .address = "10.0.0.1:9", .sys_errno = EPIPE});
  const auto back = decode_error_info(encode_error_info(info, 4096));
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->rank, 1);
  EXPECT_EQ(back->peer, 3);
  EXPECT_EQ(back->peers, info.peers);
  EXPECT_EQ(back->address, "10.0.0.1:9");
  EXPECT_EQ(back->sys_errno, EPIPE);
  EXPECT_EQ(back->relayed_by, -1);
  EXPECT_EQ(format_error(*back), format_error(info));
}

TEST(ErrorWire, TooLongBecomesCutTextAndGarbageIsRefused) {
  std::vector<int> many(5000);
  for (int r = 0; r < 5000; ++r) {
    many[static_cast<size_t>(r)] = r;
  }
  const ErrorInfo info = error_info("late: " + ranks_ref(many), {.peer = 7});
  const std::string bytes = encode_error_info(info, 1024);
  EXPECT_LE(bytes.size(), 1024u);
  const auto back = decode_error_info(bytes);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->peers, (std::vector<int>{7}));
  EXPECT_EQ(
      render_detail(back->detail, back->peers).rfind("late: ranks 0, 1", 0),
      0u);
  EXPECT_FALSE(decode_error_info("").has_value());
  EXPECT_FALSE(decode_error_info("checksum mismatch").has_value());
  std::string cut = encode_error_info(info, 1024);
  cut.pop_back();
  EXPECT_FALSE(decode_error_info(cut).has_value());
}

}  // namespace
}  // namespace jaccl::detail
