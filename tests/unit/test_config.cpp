// Copyright 2026 the jaccl authors.
// Config: the builder, validity (mesh / ring device matrices), from_env with
// both spellings and malformed values, init()'s strict / non-strict answers,
// and the side-channel precedence factory > function > coordinator.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/in_process.h"
#include "bootstrap/side_channel.h"
#include "common/env.h"
#include "jaccl/jaccl.h"
#include "transport/ofi_link.h"

namespace jaccl::detail {
// Defined in src/init.cpp.
SideChannel make_side_channel(const Config& cfg);
}  // namespace jaccl::detail

namespace jaccl {
namespace {

using namespace std::chrono_literals;
using detail::EnvVar;

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

#define EXPECT_HAS(haystack, needle)          \
  EXPECT_TRUE(contains((haystack), (needle))) \
      << "expected to find \"" << (needle) << "\" in:\n  " << (haystack)

// Clears every variable of the env table (both spellings) for the test's
// duration and restores the original values afterwards, also for set().
class EnvGuard {
 public:
  EnvGuard() {
    for (const auto& info : detail::env_table()) {
      clear(info.name);
      if (info.alias)
        clear(info.alias);
    }
  }
  ~EnvGuard() {
    for (const auto& [name, value] : saved_) {
      if (value)
        ::setenv(name.c_str(), value->c_str(), 1);
      else
        ::unsetenv(name.c_str());
    }
  }
  EnvGuard(const EnvGuard&) = delete;
  EnvGuard& operator=(const EnvGuard&) = delete;

  void set(const std::string& name, const std::string& value) {
    save(name);
    ::setenv(name.c_str(), value.c_str(), 1);
  }
  void clear(const std::string& name) {
    save(name);
    ::unsetenv(name.c_str());
  }

 private:
  void save(const std::string& name) {
    if (saved_.count(name))
      return;
    const char* v = std::getenv(name.c_str());
    saved_[name] = v ? std::optional<std::string>(v) : std::nullopt;
  }
  std::map<std::string, std::optional<std::string>> saved_;
};

// A file in the test's temp dir, removed at scope end.
class TempFile {
 public:
  explicit TempFile(const std::string& contents) {
    static std::atomic<int> counter{0};
    path_ = ::testing::TempDir() + "jaccl_test_config_" +
            std::to_string(::getpid()) + "_" + std::to_string(counter++) +
            ".json";
    std::ofstream(path_) << contents;
  }
  ~TempFile() { std::remove(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// An all-gather valid for size 1: the output is the input.
AllGatherFn echo() {
  return [](const char* src, char* dst, size_t n) { std::memcpy(dst, src, n); };
}

Config::DeviceMatrix full_mesh(int n) {
  Config::DeviceMatrix m(n, std::vector<std::vector<std::string>>(n));
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j)
      if (i != j)
        m[i][j] = {"dev_" + std::to_string(i) + "_" + std::to_string(j)};
  return m;
}

Config::DeviceMatrix ring_only(int n, int wires = 1) {
  Config::DeviceMatrix m(n, std::vector<std::vector<std::string>>(n));
  for (int i = 0; i < n; ++i) {
    for (int w = 0; w < wires; ++w) {
      m[i][(i + 1) % n].push_back("r" + std::to_string(w));
      m[i][(i + n - 1) % n].push_back("l" + std::to_string(w));
    }
  }
  return m;
}

// ---- defaults, setters, getters ----------------------------------------

TEST(ConfigBuilder, Defaults) {
  Config c;
  EXPECT_EQ(c.get_rank(), -1);
  EXPECT_EQ(c.get_size(), 0);
  EXPECT_EQ(c.get_coordinator(), "");
  EXPECT_FALSE(c.get_prefer_ring());
  EXPECT_TRUE(c.get_devices().empty());
  EXPECT_FALSE(c.get_all_gather());
  EXPECT_FALSE(c.get_all_gather_factory());
  EXPECT_EQ(c.get_timeout(), 60s);
  EXPECT_EQ(c.get_op_timeout(), 600s);
  EXPECT_EQ(c.get_heartbeat_timeout(), 10s);
  EXPECT_EQ(c.get_token(), "");
  EXPECT_TRUE(c.get_listen());
  EXPECT_EQ(c.get_interface(), "");
  EXPECT_EQ(c.get_wires(), 2);
  EXPECT_FALSE(c.get_wires_set());
  EXPECT_EQ(jaccl::detail::ofi_wires(c), 1);  // ofi's own default
  EXPECT_EQ(c.get_transport(), "auto");
  EXPECT_FALSE(c.is_valid());
  EXPECT_FALSE(c.invalid_reason().empty());
}

TEST(ConfigBuilder, EverySetterChainsAndIsReadBack) {
  int fn_calls = 0, factory_calls = 0;
  Config c;
  c.set_rank(1)
      .set_size(3)
      .set_coordinator(std::string("10.1.2.3:4000"))
      .prefer_ring()
      .set_all_gather([&](const char*, char*, size_t) { ++fn_calls; })
      .set_all_gather_factory([&](int, int) {
        ++factory_calls;
        return AllGatherFn{};
      })
      .set_timeout(1500ms)
      .set_op_timeout(0ms)
      .set_heartbeat_timeout(250ms)
      .set_token("s3cret")
      .set_listen(false)
      .set_interface("eth1")
      .set_wires(7)
      .set_transport("shm");
  EXPECT_EQ(c.get_rank(), 1);
  EXPECT_EQ(c.get_size(), 3);
  EXPECT_EQ(c.get_coordinator(), "10.1.2.3:4000");
  EXPECT_TRUE(c.get_prefer_ring());
  EXPECT_EQ(c.get_timeout(), 1500ms);
  EXPECT_EQ(c.get_op_timeout(), 0ms);
  EXPECT_EQ(c.get_heartbeat_timeout(), 250ms);
  EXPECT_EQ(c.get_token(), "s3cret");
  EXPECT_FALSE(c.get_listen());
  EXPECT_EQ(c.get_interface(), "eth1");
  EXPECT_EQ(c.get_wires(), 7);
  EXPECT_TRUE(c.get_wires_set());
  EXPECT_EQ(jaccl::detail::ofi_wires(c), 7);
  EXPECT_EQ(c.get_transport(), "shm");
  ASSERT_TRUE(c.get_all_gather());
  c.get_all_gather()(nullptr, nullptr, 0);
  EXPECT_EQ(fn_calls, 1);
  ASSERT_TRUE(c.get_all_gather_factory());
  c.get_all_gather_factory()(0, 1);
  EXPECT_EQ(factory_calls, 1);
  EXPECT_TRUE(c.is_valid()) << c.invalid_reason();
  EXPECT_EQ(c.invalid_reason(), "");

  c.prefer_ring(false);
  EXPECT_FALSE(c.get_prefer_ring());
  c.set_coordinator("h:1");  // const char* overload
  EXPECT_EQ(c.get_coordinator(), "h:1");
  c.set_coordinator(static_cast<const char*>(nullptr));
  EXPECT_EQ(c.get_coordinator(), "");
  c.set_listen(true);
  EXPECT_TRUE(c.get_listen());
}

// The shared-memory settings: checked by the shared-memory set-up on every
// rank at once (ShmJob tests), so not part of is_valid().
TEST(ConfigBuilder, ShmSettings) {
  EnvGuard env;
  Config c;
  EXPECT_EQ(c.get_shm_budget(), 64u);
  EXPECT_EQ(c.get_shm_strategy(), "auto");
  c.set_shm_budget(8).set_shm_strategy("stream");
  EXPECT_EQ(c.get_shm_budget(), 8u);
  EXPECT_EQ(c.get_shm_strategy(), "stream");
  EXPECT_EQ(c.shm_invalid_reason(), "");
  c.set_shm_budget(0).set_shm_strategy("fastest");
  EXPECT_EQ(c.get_shm_budget(), 8u);  // a bad value is not taken
  EXPECT_EQ(c.get_shm_strategy(), "stream");
  EXPECT_HAS(c.shm_invalid_reason(), "0 MiB");
  EXPECT_HAS(c.shm_invalid_reason(), "'fastest'");
  c.set_rank(0).set_size(1).set_all_gather(echo());
  EXPECT_TRUE(c.is_valid()) << c.invalid_reason();
}

TEST(ConfigBuilder, SetRankFromString) {
  Config c;
  c.set_rank("3");
  EXPECT_EQ(c.get_rank(), 3);
  c.set_size(4).set_all_gather(echo());
  EXPECT_TRUE(c.is_valid()) << c.invalid_reason();
  c.set_rank("0");
  EXPECT_EQ(c.get_rank(), 0);
}

TEST(ConfigBuilder, SetRankFromMalformedStringIsRecorded) {
  for (const char* bad :
       {"abc", "-1", "3x", "", " 1", "1.5", "99999999999999999999"}) {
    SCOPED_TRACE(bad);
    Config c;
    c.set_size(4).set_all_gather(echo()).set_rank(bad);
    EXPECT_FALSE(c.is_valid());
    EXPECT_HAS(c.invalid_reason(), std::string("rank '") + bad + "'");
  }
  Config c;
  c.set_size(1).set_all_gather(echo()).set_rank(
      static_cast<const char*>(nullptr));
  EXPECT_FALSE(c.is_valid());
  EXPECT_HAS(c.invalid_reason(), "(null)");
}

TEST(ConfigBuilder, RecordedProblemSurvivesLaterGoodValues) {
  Config c;
  c.set_rank("abc").set_rank(0).set_size(1).set_all_gather(echo());
  EXPECT_FALSE(c.is_valid());
  EXPECT_HAS(c.invalid_reason(), "'abc'");
}

// ---- validity --------------------------------------------------------------

TEST(ConfigValidity, NeedsRankSizeAndBootstrap) {
  Config c;
  auto why = c.invalid_reason();
  EXPECT_HAS(why, "no group size");
  EXPECT_HAS(why, "no rank");
  EXPECT_HAS(why, "no way to bootstrap");

  c.set_rank(0);
  EXPECT_FALSE(c.is_valid());
  c.set_size(2);
  EXPECT_FALSE(c.is_valid());
  EXPECT_HAS(c.invalid_reason(), "no way to bootstrap");
  EXPECT_FALSE(contains(c.invalid_reason(), "no rank"));
  EXPECT_FALSE(contains(c.invalid_reason(), "no group size"));
}

TEST(ConfigValidity, CoordinatorAloneIsEnough) {
  Config c;
  c.set_rank(0).set_size(2).set_coordinator("127.0.0.1:5000");
  EXPECT_TRUE(c.is_valid()) << c.invalid_reason();
  c.set_coordinator("[::1]:5000");
  EXPECT_TRUE(c.is_valid()) << c.invalid_reason();
  c.set_coordinator("node-7.example:65535");
  EXPECT_TRUE(c.is_valid()) << c.invalid_reason();
}

TEST(ConfigValidity, FunctionAloneIsEnough) {
  Config c;
  c.set_rank(1).set_size(2).set_all_gather(echo());
  EXPECT_TRUE(c.is_valid()) << c.invalid_reason();
}

TEST(ConfigValidity, FactoryAloneIsEnough) {
  Config c;
  c.set_rank(1).set_size(2).set_all_gather_factory(
      [](int, int) { return echo(); });
  EXPECT_TRUE(c.is_valid()) << c.invalid_reason();
}

TEST(ConfigValidity, BadCoordinatorWithoutFunction) {
  for (const char* bad : {"localhost", "localhost:", "localhost:99999",
                          "localhost:abc", ":80", "::1:80", "[::1]80"}) {
    SCOPED_TRACE(bad);
    Config c;
    c.set_rank(0).set_size(2).set_coordinator(bad);
    EXPECT_FALSE(c.is_valid());
    EXPECT_HAS(c.invalid_reason(), std::string("'") + bad + "'");
    EXPECT_HAS(c.invalid_reason(), "coordinator");
  }
}

TEST(ConfigValidity, RankOutOfRange) {
  Config c;
  c.set_rank(2).set_size(2).set_all_gather(echo());
  EXPECT_FALSE(c.is_valid());
  EXPECT_HAS(c.invalid_reason(), "rank 2 is out of range for group size 2");
  c.set_size(3);
  EXPECT_TRUE(c.is_valid()) << c.invalid_reason();
}

TEST(ConfigValidity, BadSizes) {
  Config c;
  c.set_rank(0).set_all_gather(echo()).set_size(-3);
  EXPECT_FALSE(c.is_valid());
  EXPECT_HAS(c.invalid_reason(), "group size must be >= 1, got -3");
  c.set_size(0);
  EXPECT_HAS(c.invalid_reason(), "no group size");
}

TEST(ConfigValidity, SizeDisagreesWithDeviceMatrix) {
  Config c;
  c.set_rank(0).set_all_gather(echo()).set_size(3).set_devices(full_mesh(2));
  EXPECT_EQ(c.get_size(), 2);  // the matrix decides
  EXPECT_FALSE(c.is_valid());
  EXPECT_HAS(c.invalid_reason(), "the size 3 disagrees with the device matrix");
  c.set_size(2);
  EXPECT_TRUE(c.is_valid()) << c.invalid_reason();
}

TEST(ConfigValidity, WiresTransportTimeout) {
  auto base = [] {
    Config c;
    c.set_rank(0).set_size(1).set_all_gather(echo());
    return c;
  };
  EXPECT_TRUE(base().is_valid());
  EXPECT_HAS(base().set_wires(0).invalid_reason(), "wires must be in 1..64");
  EXPECT_HAS(base().set_wires(65).invalid_reason(), "got 65");
  EXPECT_TRUE(base().set_wires(64).is_valid());
  EXPECT_TRUE(base().set_wires(1).is_valid());
  EXPECT_HAS(base().set_transport("udp").invalid_reason(), "'udp'");
  EXPECT_TRUE(base().set_transport("tcp").is_valid());
  EXPECT_TRUE(base().set_transport("shm").is_valid());
  EXPECT_TRUE(base().set_transport("auto").is_valid());
  EXPECT_HAS(base().set_timeout(0ms).invalid_reason(),
             "set-up timeout must be positive");
  EXPECT_FALSE(base().set_timeout(-5ms).is_valid());
  EXPECT_TRUE(base().set_op_timeout(0ms).is_valid());
  EXPECT_TRUE(base().set_heartbeat_timeout(0ms).is_valid());
}

TEST(ConfigValidity, ReasonListsEveryProblem) {
  Config c;
  c.set_rank("x").set_size(2).set_wires(0).set_transport("bogus");
  auto why = c.invalid_reason();
  EXPECT_HAS(why, "rank 'x'");
  EXPECT_HAS(why, "no way to bootstrap");
  EXPECT_HAS(why, "wires");
  EXPECT_HAS(why, "'bogus'");
}

// ---- device matrices -------------------------------------------------------

TEST(ConfigDevices, NoMatrixIsMeshAndRing) {
  Config c;
  c.set_size(5);
  EXPECT_TRUE(c.is_valid_mesh());
  EXPECT_TRUE(c.is_valid_ring());
}

TEST(ConfigDevices, NoSizeIsNeither) {
  Config c;
  EXPECT_FALSE(c.is_valid_mesh());
  EXPECT_FALSE(c.is_valid_ring());
}

TEST(ConfigDevices, FullMesh) {
  for (int n : {1, 2, 3, 4, 8}) {
    SCOPED_TRACE(n);
    Config c;
    c.set_rank(0).set_all_gather(echo()).set_devices(full_mesh(n));
    EXPECT_EQ(c.get_size(), n);
    EXPECT_TRUE(c.is_valid_mesh());
    EXPECT_TRUE(c.is_valid_ring());  // a full mesh contains a ring
    EXPECT_TRUE(c.is_valid()) << c.invalid_reason();
  }
}

TEST(ConfigDevices, RingOfThreeIsAlsoAMesh) {
  Config c;
  c.set_rank(0).set_all_gather(echo()).set_devices(ring_only(3));
  EXPECT_TRUE(c.is_valid_mesh());
  EXPECT_TRUE(c.is_valid_ring());
}

TEST(ConfigDevices, RingOnly) {
  for (int n : {4, 5, 8}) {
    SCOPED_TRACE(n);
    Config c;
    c.set_rank(n - 1).set_all_gather(echo()).set_devices(ring_only(n));
    EXPECT_FALSE(c.is_valid_mesh());
    EXPECT_TRUE(c.is_valid_ring());
    EXPECT_TRUE(c.is_valid()) << c.invalid_reason();
  }
  // Two wires per neighbour (lists of names).
  Config c;
  c.set_rank(0).set_all_gather(echo()).set_devices(ring_only(4, 2));
  EXPECT_TRUE(c.is_valid_ring());
  EXPECT_EQ(c.get_devices()[0][1].size(), 2u);
}

TEST(ConfigDevices, RingWithUnevenWiresIsNotARing) {
  auto m = ring_only(4, 2);
  m[2][3].pop_back();
  Config c;
  c.set_rank(0).set_all_gather(echo()).set_devices(m);
  EXPECT_FALSE(c.is_valid_ring());
  EXPECT_FALSE(c.is_valid_mesh());
  EXPECT_HAS(c.invalid_reason(), "neither a valid mesh nor a ring");
}

TEST(ConfigDevices, MissingLinkIsNeither) {
  auto m = ring_only(4);
  m[1][2].clear();  // ring broken
  Config c;
  c.set_rank(0).set_all_gather(echo()).set_devices(m);
  EXPECT_FALSE(c.is_valid_mesh());
  EXPECT_FALSE(c.is_valid_ring());
  EXPECT_FALSE(c.is_valid());
  EXPECT_HAS(c.invalid_reason(), "neither a valid mesh nor a ring");
}

TEST(ConfigDevices, DiagonalEntryBreaksMesh) {
  auto m = full_mesh(3);
  m[1][1] = {"self"};
  Config c;
  c.set_rank(0).set_all_gather(echo()).set_devices(m);
  EXPECT_FALSE(c.is_valid_mesh());
  EXPECT_TRUE(c.is_valid_ring());  // the ring does not look at the diagonal
}

TEST(ConfigDevices, NonSquareIsRecordedAndNeither) {
  // Too few entries in one row.
  {
    auto m = full_mesh(3);
    m[1].pop_back();
    Config c;
    c.set_rank(0).set_all_gather(echo()).set_devices(m);
    EXPECT_FALSE(c.is_valid_mesh());
    EXPECT_FALSE(c.is_valid_ring());
    EXPECT_FALSE(c.is_valid());
    EXPECT_HAS(c.invalid_reason(), "must be square");
    EXPECT_HAS(c.invalid_reason(), "row 1 has 2 entries");
  }
  // A short row 0 (the ring check used to index row 0 before checking it).
  {
    Config::DeviceMatrix m = {{}, {{"a"}, {}}};
    Config c;
    c.set_rank(0).set_all_gather(echo()).set_devices(m);
    EXPECT_FALSE(c.is_valid_mesh());
    EXPECT_FALSE(c.is_valid_ring());
    EXPECT_HAS(c.invalid_reason(), "must be square");
  }
  // Size 1 with an empty row.
  {
    Config::DeviceMatrix m = {{}};
    Config c;
    c.set_rank(0).set_all_gather(echo()).set_devices(m);
    EXPECT_FALSE(c.is_valid_mesh());
    EXPECT_FALSE(c.is_valid_ring());
    EXPECT_FALSE(c.is_valid());
  }
}

TEST(ConfigDevices, FromFileNullStringAndListEntries) {
  TempFile f(R"([[null, "mlx5_0", ["mlx5_1", "mlx5_2"]],
                 ["a", null, "b"],
                 [["c"], "d", null]])");
  Config c;
  c.set_rank(2).set_all_gather(echo()).set_devices_from_file(f.path().c_str());
  ASSERT_TRUE(c.is_valid()) << c.invalid_reason();
  EXPECT_EQ(c.get_size(), 3);
  const auto& d = c.get_devices();
  ASSERT_EQ(d.size(), 3u);
  EXPECT_TRUE(d[0][0].empty());
  EXPECT_EQ(d[0][1], std::vector<std::string>{"mlx5_0"});
  EXPECT_EQ(d[0][2], (std::vector<std::string>{"mlx5_1", "mlx5_2"}));
  EXPECT_EQ(d[2][0], std::vector<std::string>{"c"});
  EXPECT_TRUE(c.is_valid_mesh());
  EXPECT_FALSE(c.is_valid_ring());  // 0 has 2 wires to 2 but 1 to 1
}

// What a machine without RDMA writes (exo, mlx.launch hostfiles): null in
// every entry. The matrix then only gives the size.
TEST(ConfigDevices, AllNullMatrixGivesTheSizeOnly) {
  TempFile f("[[null, null, null], [null, null, null], [null, null, null]]");
  Config c;
  c.set_rank(1).set_all_gather(echo()).set_devices_from_file(f.path().c_str());
  ASSERT_TRUE(c.is_valid()) << c.invalid_reason();
  EXPECT_EQ(c.get_size(), 3);
  EXPECT_TRUE(c.is_valid_mesh());
}

TEST(ConfigDevices, FromFileProblems) {
  struct Case {
    const char* json;
    const char* expect;
  } cases[] = {
      {"{\"a\": 1}", "must hold an array"},
      {"[1, 2]", "row 0 is not an array"},
      {"[[null, 5], [null, null]]", "entry [0][1] must be null"},
      {"[[null, [\"a\", 3]], [null, null]]", "non-string device name"},
      {"[[null, \"a\"", "is not valid JSON"},
      {"[[null, \"a\"], [\"b\"]]", "must be square"},
  };
  for (const auto& k : cases) {
    SCOPED_TRACE(k.json);
    TempFile f(k.json);
    Config c;
    c.set_rank(0).set_size(2).set_all_gather(echo()).set_devices_from_file(
        f.path().c_str());
    EXPECT_FALSE(c.is_valid());
    EXPECT_HAS(c.invalid_reason(), k.expect);
  }
  Config c;
  c.set_rank(0).set_size(1).set_all_gather(echo()).set_devices_from_file(
      "/nonexistent/dir/devices.json");
  EXPECT_HAS(c.invalid_reason(),
             "cannot read the device file '/nonexistent/dir/devices.json'");
  Config d;
  d.set_devices_from_file(nullptr);
  EXPECT_HAS(d.invalid_reason(), "cannot read the device file");
}

// ---- from_env --------------------------------------------------------------

TEST(ConfigFromEnv, EmptyEnvironmentIsIncomplete) {
  EnvGuard env;
  auto c = Config::from_env();
  EXPECT_FALSE(c.is_valid());
  EXPECT_EQ(c.get_rank(), -1);
  EXPECT_EQ(c.get_size(), 0);
  EXPECT_EQ(c.get_timeout(), 60s);
  EXPECT_EQ(c.get_wires(), 2);
  EXPECT_FALSE(c.get_wires_set());
  EXPECT_EQ(jaccl::detail::ofi_wires(c), 1);
  EXPECT_EQ(c.get_transport(), "auto");
}

TEST(ConfigFromEnv, JacclSpellings) {
  EnvGuard env;
  TempFile f(R"([[null, "x", "y"], ["x", null, "z"], ["y", "z", null]])");
  env.set("JACCL_RANK", "2");
  env.set("JACCL_SIZE", "3");
  env.set("JACCL_COORDINATOR", "127.0.0.1:7777");
  env.set("JACCL_IBV_DEVICES", f.path());
  env.set("JACCL_RING", "1");
  env.set("JACCL_TIMEOUT", "2.5");
  env.set("JACCL_OP_TIMEOUT", "0");
  env.set("JACCL_HEARTBEAT_TIMEOUT", "0.0001");  // rounds up, not to "off"
  env.set("JACCL_TOKEN", "tok");
  env.set("JACCL_LISTEN", "0");
  env.set("JACCL_IFNAME", "lo");
  env.set("JACCL_WIRES", "4");
  env.set("JACCL_TRANSPORT", "tcp");
  auto c = Config::from_env();
  ASSERT_TRUE(c.is_valid()) << c.invalid_reason();
  EXPECT_EQ(c.get_rank(), 2);
  EXPECT_EQ(c.get_size(), 3);
  EXPECT_EQ(c.get_coordinator(), "127.0.0.1:7777");
  EXPECT_EQ(c.get_devices().size(), 3u);
  EXPECT_TRUE(c.get_prefer_ring());
  EXPECT_EQ(c.get_timeout(), 2500ms);
  EXPECT_EQ(c.get_op_timeout(), 0ms);
  EXPECT_EQ(c.get_heartbeat_timeout(), 1ms);
  EXPECT_EQ(c.get_token(), "tok");
  EXPECT_FALSE(c.get_listen());
  EXPECT_EQ(c.get_interface(), "lo");
  EXPECT_EQ(c.get_wires(), 4);
  EXPECT_TRUE(c.get_wires_set());  // JACCL_WIRES holds for ofi too
  EXPECT_EQ(jaccl::detail::ofi_wires(c), 4);
  EXPECT_EQ(c.get_transport(), "tcp");
}

TEST(ConfigFromEnv, MlxSpellings) {
  EnvGuard env;
  TempFile f(R"([[null, "x"], ["x", null]])");
  env.set("MLX_RANK", "1");
  env.set("MLX_WORLD_SIZE", "2");
  env.set("MLX_JACCL_COORDINATOR", "10.0.0.1:4000");
  env.set("MLX_IBV_DEVICES", f.path());
  env.set("MLX_JACCL_RING", "true");
  auto c = Config::from_env();
  ASSERT_TRUE(c.is_valid()) << c.invalid_reason();
  EXPECT_EQ(c.get_rank(), 1);
  EXPECT_EQ(c.get_size(), 2);
  EXPECT_EQ(c.get_coordinator(), "10.0.0.1:4000");
  EXPECT_EQ(c.get_devices().size(), 2u);
  EXPECT_TRUE(c.get_prefer_ring());
}

TEST(ConfigFromEnv, JacclWinsOverMlx) {
  EnvGuard env;
  TempFile jf(R"([[null, "j", "j"], ["j", null, "j"], ["j", "j", null]])");
  TempFile mf(R"([[null, "m"], ["m", null]])");
  env.set("JACCL_RANK", "1");
  env.set("MLX_RANK", "0");
  env.set("JACCL_SIZE", "3");
  env.set("MLX_WORLD_SIZE", "2");
  env.set("JACCL_COORDINATOR", "jhost:1000");
  env.set("MLX_JACCL_COORDINATOR", "mhost:2000");
  env.set("JACCL_IBV_DEVICES", jf.path());
  env.set("MLX_IBV_DEVICES", mf.path());
  env.set("JACCL_RING", "0");
  env.set("MLX_JACCL_RING", "1");
  auto c = Config::from_env();
  ASSERT_TRUE(c.is_valid()) << c.invalid_reason();
  EXPECT_EQ(c.get_rank(), 1);
  EXPECT_EQ(c.get_size(), 3);
  EXPECT_EQ(c.get_coordinator(), "jhost:1000");
  EXPECT_EQ(c.get_devices()[0][1], std::vector<std::string>{"j"});
  EXPECT_FALSE(c.get_prefer_ring());
}

TEST(ConfigFromEnv, JacclWinsEvenWhenMalformed) {
  EnvGuard env;
  env.set("JACCL_RANK", "abc");
  env.set("MLX_RANK", "0");
  env.set("JACCL_SIZE", "1");
  env.set("JACCL_COORDINATOR", "h:1");
  auto c = Config::from_env();
  EXPECT_FALSE(c.is_valid());
  EXPECT_HAS(c.invalid_reason(), "JACCL_RANK='abc'");
}

TEST(ConfigFromEnv, EmptyValueCountsAsUnset) {
  EnvGuard env;
  env.set("JACCL_RANK", "");
  env.set("MLX_RANK", "1");
  env.set("MLX_WORLD_SIZE", "2");
  env.set("JACCL_COORDINATOR", "h:1");
  auto c = Config::from_env();
  EXPECT_TRUE(c.is_valid()) << c.invalid_reason();
  EXPECT_EQ(c.get_rank(), 1);
}

TEST(ConfigFromEnv, FlagSpellings) {
  EnvGuard env;
  for (const char* off : {"0", "false", "no", "off"}) {
    env.set("JACCL_RING", off);
    env.set("JACCL_LISTEN", off);
    auto c = Config::from_env();
    EXPECT_FALSE(c.get_prefer_ring()) << off;
    EXPECT_FALSE(c.get_listen()) << off;
  }
  for (const char* on : {"1", "true", "yes", "on"}) {
    env.set("JACCL_RING", on);
    env.set("JACCL_LISTEN", on);
    auto c = Config::from_env();
    EXPECT_TRUE(c.get_prefer_ring()) << on;
    EXPECT_TRUE(c.get_listen()) << on;
  }
}

// A complete, valid environment for rank 0 of 2; each malformed case sets
// one variable on top of it.
void set_valid_env(EnvGuard& env) {
  env.set("JACCL_RANK", "0");
  env.set("JACCL_SIZE", "2");
  env.set("JACCL_COORDINATOR", "127.0.0.1:5000");
}

struct Malformed {
  const char* var;
  const char* value;
};

// Each malformed value makes the config invalid, and the reason names the
// variable and the value as given.
TEST(ConfigFromEnv, MalformedValuesNameVariableAndValue) {
  const Malformed cases[] = {
      {"JACCL_RANK", "abc"},
      {"JACCL_RANK", "-1"},
      {"JACCL_RANK", "1.0"},
      {"JACCL_SIZE", "-2"},
      {"JACCL_SIZE", "0"},
      {"JACCL_SIZE", "two"},
      {"JACCL_COORDINATOR", "localhost"},
      {"JACCL_COORDINATOR", "localhost:"},
      {"JACCL_COORDINATOR", "localhost:70000"},
      {"JACCL_COORDINATOR", "localhost:http"},
      {"JACCL_TIMEOUT", "-1"},
      {"JACCL_TIMEOUT", "abc"},
      {"JACCL_TIMEOUT", "0"},
      {"JACCL_TIMEOUT", "5s"},
      {"JACCL_TIMEOUT", "nan"},
      {"JACCL_TIMEOUT", "inf"},
      {"JACCL_TIMEOUT", "1e300"},
      {"JACCL_OP_TIMEOUT", "-1"},
      {"JACCL_OP_TIMEOUT", "abc"},
      {"JACCL_HEARTBEAT_TIMEOUT", "-0.5"},
      {"JACCL_WIRES", "0"},
      {"JACCL_WIRES", "65"},
      {"JACCL_WIRES", "x"},
      {"JACCL_TRANSPORT", "bogus"},
      {"MLX_RANK", "abc"},
      {"MLX_WORLD_SIZE", "-4"},
      {"MLX_JACCL_COORDINATOR", "nohost"},
  };
  for (const auto& k : cases) {
    SCOPED_TRACE(std::string(k.var) + "=" + k.value);
    EnvGuard env;
    set_valid_env(env);
    // An MLX_* case needs its JACCL_* twin unset.
    if (std::string(k.var) == "MLX_RANK")
      env.clear("JACCL_RANK");
    if (std::string(k.var) == "MLX_WORLD_SIZE")
      env.clear("JACCL_SIZE");
    if (std::string(k.var) == "MLX_JACCL_COORDINATOR")
      env.clear("JACCL_COORDINATOR");
    env.set(k.var, k.value);
    auto c = Config::from_env();
    EXPECT_FALSE(c.is_valid());
    EXPECT_HAS(c.invalid_reason(), std::string(k.var) + "='" + k.value + "'");
  }
}

// Every Config takes them, not only from_env's (docs/environment.md).
TEST(ConfigFromEnv, ShmSettingsReachEveryConfig) {
  EnvGuard env;
  env.set("JACCL_SHM_BUDGET", "128");
  env.set("JACCL_SHM_STRATEGY", "stream-stage");
  for (const Config& c : {Config::from_env(), Config()}) {
    EXPECT_EQ(c.get_shm_budget(), 128u);
    EXPECT_EQ(c.get_shm_strategy(), "stream-stage");
    EXPECT_EQ(c.shm_invalid_reason(), "");
  }
  EXPECT_EQ(Config().set_shm_budget(16).get_shm_budget(), 16u);
}

TEST(ConfigFromEnv, MalformedShmSettingsNameVariableAndValue) {
  const Malformed cases[] = {
      {"JACCL_SHM_BUDGET", "0"},
      {"JACCL_SHM_BUDGET", "2097152"},
      {"JACCL_SHM_BUDGET", "8M"},
      {"JACCL_SHM_STRATEGY", "fastest"},
  };
  for (const auto& k : cases) {
    SCOPED_TRACE(std::string(k.var) + "=" + k.value);
    EnvGuard env;
    set_valid_env(env);
    env.set(k.var, k.value);
    auto c = Config::from_env();
    EXPECT_TRUE(c.is_valid()) << c.invalid_reason();
    EXPECT_HAS(c.shm_invalid_reason(),
               std::string(k.var) + "='" + k.value + "'");
  }
}

TEST(ConfigFromEnv, RankNotBelowSizeNamesBothVariables) {
  EnvGuard env;
  set_valid_env(env);
  env.set("JACCL_RANK", "2");
  auto c = Config::from_env();
  EXPECT_FALSE(c.is_valid());
  auto why = c.invalid_reason();
  EXPECT_HAS(why, "JACCL_RANK='2'");
  EXPECT_HAS(why, "JACCL_SIZE='2'");
  EXPECT_HAS(why, "out of range");
  // Reported once, not twice.
  EXPECT_EQ(why.find("out of range"), why.rfind("out of range")) << why;
}

TEST(ConfigFromEnv, RankNotBelowDeviceMatrixSize) {
  EnvGuard env;
  TempFile f(R"([[null, "x"], ["x", null]])");
  env.set("MLX_RANK", "5");
  env.set("MLX_IBV_DEVICES", f.path());
  env.set("JACCL_COORDINATOR", "h:1");
  auto c = Config::from_env();
  EXPECT_FALSE(c.is_valid());
  EXPECT_HAS(c.invalid_reason(), "MLX_RANK='5'");
  EXPECT_HAS(c.invalid_reason(), "MLX_IBV_DEVICES='" + f.path() + "'");
}

TEST(ConfigFromEnv, CoordinatorProblemReportedOnce) {
  EnvGuard env;
  set_valid_env(env);
  env.set("JACCL_COORDINATOR", "nohost");
  auto why = Config::from_env().invalid_reason();
  EXPECT_HAS(why, "JACCL_COORDINATOR='nohost'");
  EXPECT_HAS(why, "missing port");
  EXPECT_EQ(why.find("missing port"), why.rfind("missing port")) << why;
}

TEST(ConfigFromEnv, DeviceFileProblemsNameVariableAndPath) {
  struct Case {
    std::optional<std::string> json;  // nullopt: file does not exist
    const char* expect;
  } cases[] = {
      {std::nullopt, "cannot read the device file"},
      {std::string("[[null, \"x\"], [\"x\""), "not valid JSON"},
      {std::string("[[null, \"x\"], [\"x\"]]"), "must be square"},
      {std::string("[[null, 1], [1, null]]"), "must be null"},
  };
  for (const auto& k : cases) {
    SCOPED_TRACE(k.expect);
    EnvGuard env;
    set_valid_env(env);
    std::optional<TempFile> f;
    std::string path = ::testing::TempDir() + "jaccl_no_such_devices.json";
    if (k.json) {
      f.emplace(*k.json);
      path = f->path();
    }
    env.set("JACCL_IBV_DEVICES", path);
    auto c = Config::from_env();
    EXPECT_FALSE(c.is_valid());
    EXPECT_HAS(c.invalid_reason(), "JACCL_IBV_DEVICES='" + path + "'");
    EXPECT_HAS(c.invalid_reason(), k.expect);
  }
}

TEST(ConfigFromEnv, DeviceMatrixNeitherMeshNorRing) {
  EnvGuard env;
  TempFile f(R"([[null, "a", null, null], [null, null, "b", null],
                 [null, null, null, null], [null, null, null, null]])");
  env.set("JACCL_RANK", "0");
  env.set("JACCL_IBV_DEVICES", f.path());
  env.set("JACCL_COORDINATOR", "h:1");
  auto c = Config::from_env();
  EXPECT_FALSE(c.is_valid());
  EXPECT_HAS(c.invalid_reason(), "neither a valid mesh nor a ring");
}

TEST(ConfigFromEnv, TimeoutUnits) {
  EnvGuard env;
  env.set("JACCL_TIMEOUT", "0.25");
  env.set("JACCL_OP_TIMEOUT", "30");
  env.set("JACCL_HEARTBEAT_TIMEOUT", "1.5");
  auto c = Config::from_env();
  EXPECT_EQ(c.get_timeout(), 250ms);
  EXPECT_EQ(c.get_op_timeout(), 30s);
  EXPECT_EQ(c.get_heartbeat_timeout(), 1500ms);
  env.set("JACCL_TIMEOUT", "0.0004");  // positive stays positive
  EXPECT_EQ(Config::from_env().get_timeout(), 1ms);
  EXPECT_TRUE(Config::from_env().invalid_reason().find("timeout") ==
              std::string::npos);
}

// ---- init ------------------------------------------------------------------

TEST(ConfigInit, NonStrictIncompleteReturnsNull) {
  EnvGuard env;
  EXPECT_EQ(init(false), nullptr);
  EXPECT_EQ(init(), nullptr);
  env.set("JACCL_RANK", "0");
  EXPECT_EQ(init(false), nullptr);  // still no size, no bootstrap
  Config c;
  c.set_rank(0);
  EXPECT_EQ(init(c, false), nullptr);
  EXPECT_EQ(init(c), nullptr);
}

TEST(ConfigInit, NonStrictMalformedReturnsNull) {
  EnvGuard env;
  set_valid_env(env);
  env.set("JACCL_WIRES", "0");
  EXPECT_EQ(init(false), nullptr);
}

void expect_names_all_bootstrap_ways(const std::string& what) {
  EXPECT_HAS(what, "JACCL_COORDINATOR");
  EXPECT_HAS(what, "MLX_JACCL_COORDINATOR");
  EXPECT_HAS(what, "Config::set_all_gather");
  EXPECT_HAS(what, "Config::set_all_gather_factory");
  EXPECT_HAS(what, "init(strict, factory)");
}

TEST(ConfigInit, StrictIncompleteThrowsNamingAllWaysToBootstrap) {
  EnvGuard env;
  env.set("JACCL_RANK", "0");
  env.set("JACCL_SIZE", "2");
  try {
    init(true);
    FAIL() << "init(true) returned";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Config);
    expect_names_all_bootstrap_ways(e.what());
  }
  Config c;
  c.set_rank(0).set_size(2);
  try {
    init(c, true);
    FAIL() << "init(cfg, true) returned";
  } catch (const ConfigError& e) {
    expect_names_all_bootstrap_ways(e.what());
  }
}

TEST(ConfigInit, StrictMalformedThrowsTheReason) {
  EnvGuard env;
  set_valid_env(env);
  env.set("JACCL_TRANSPORT", "bogus");
  try {
    init(true);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_HAS(std::string(e.what()), "JACCL_TRANSPORT='bogus'");
  }
}

// ---- precedence: factory > function > coordinator --------------------------

struct Counters {
  std::atomic<int> factory{0};
  std::atomic<int> factory_fn{0};
  std::atomic<int> fn{0};
  std::atomic<int> factory_rank{-2};
  std::atomic<int> factory_size{-2};
};

// A config with all three ways set; the coordinator would fail if dialled
// (nothing listens on port 1 and the timeout is short).
Config all_three(Counters& k, int rank = 0, int size = 1) {
  Config c;
  c.set_rank(rank)
      .set_size(size)
      .set_timeout(2s)
      .set_coordinator("127.0.0.1:1")
      .set_all_gather([&k](const char* s, char* d, size_t n) {
        ++k.fn;
        std::memcpy(d, s, n);
      })
      .set_all_gather_factory([&k](int r, int sz) -> AllGatherFn {
        ++k.factory;
        k.factory_rank = r;
        k.factory_size = sz;
        return [&k](const char* s, char* d, size_t n) {
          ++k.factory_fn;
          std::memcpy(d, s, n);
        };
      });
  return c;
}

TEST(ConfigPrecedence, FactoryBeatsFunctionAndCoordinator) {
  Counters k;
  auto cfg = all_three(k);
  ASSERT_TRUE(cfg.is_valid()) << cfg.invalid_reason();
  auto sc = detail::make_side_channel(cfg);
  EXPECT_EQ(k.factory, 1);
  EXPECT_EQ(k.factory_rank, 0);
  EXPECT_EQ(k.factory_size, 1);
  EXPECT_HAS(sc.description(), "factory");
  int v = 42;
  auto all = sc.all_gather_value(v);
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0], 42);
  sc.barrier();
  EXPECT_EQ(k.factory_fn, 2);
  EXPECT_EQ(k.fn, 0);
  EXPECT_EQ(k.factory, 1);  // not called again per all-gather
}

TEST(ConfigPrecedence, FactoryGetsRankAndSize) {
  Counters k;
  auto cfg = all_three(k, 3, 5);
  auto sc = detail::make_side_channel(cfg);
  EXPECT_EQ(k.factory, 1);
  EXPECT_EQ(k.factory_rank, 3);
  EXPECT_EQ(k.factory_size, 5);
  EXPECT_EQ(sc.rank(), 3);
  EXPECT_EQ(sc.size(), 5);
}

TEST(ConfigPrecedence, FunctionBeatsCoordinator) {
  Counters k;
  auto cfg = all_three(k);
  cfg.set_all_gather_factory(nullptr);
  auto sc = detail::make_side_channel(cfg);
  EXPECT_HAS(sc.description(), "function");
  sc.barrier();
  EXPECT_EQ(k.fn, 1);
  EXPECT_EQ(k.factory, 0);
  EXPECT_EQ(k.factory_fn, 0);
}

TEST(ConfigPrecedence, InitWithAllThreeCallsOnlyTheFactoryOnce) {
  EnvGuard env;
  Counters k;
  auto cfg = all_three(k);
  try {
    auto g = init(cfg, true);  // may fail past bootstrap: no data plane yet
  } catch (const Error&) {
  }
  // One rank needs no exchange, so the factory's function may or may not
  // have been called; the plain function and the coordinator never are.
  EXPECT_EQ(k.factory, 1);
  EXPECT_EQ(k.fn, 0);
}

TEST(ConfigPrecedence, InitWithAllThreeOnTwoRanksUsesOnlyTheFactories) {
  // Two ranks as threads; the factories hand out an in-process hub. Whatever
  // init does after bootstrap (a group, or an error from the data plane), the
  // hub carried the side channel and the other two ways were never used.
  EnvGuard env;
  const int P = 2;
  auto hub = detail::InProcessHub::create(P, 20s);
  std::atomic<int> hub_calls{0};
  Counters k[P];
  std::vector<std::thread> threads;
  for (int r = 0; r < P; ++r) {
    threads.emplace_back([&, r] {
      auto cfg = all_three(k[r], r, P);
      cfg.set_timeout(10s).set_all_gather_factory(
          [&, r](int rank, int size) -> AllGatherFn {
            ++k[r].factory;
            k[r].factory_rank = rank;
            k[r].factory_size = size;
            auto inner = hub->for_rank(rank);
            return [&, inner](const char* s, char* d, size_t n) {
              ++hub_calls;
              inner(s, d, n);
            };
          });
      try {
        auto g = init(cfg, true);
      } catch (const Error&) {
      }
    });
  }
  for (auto& t : threads)
    t.join();
  for (int r = 0; r < P; ++r) {
    EXPECT_EQ(k[r].factory, 1);
    EXPECT_EQ(k[r].factory_rank, r);
    EXPECT_EQ(k[r].factory_size, P);
    EXPECT_EQ(k[r].fn, 0);
  }
  EXPECT_GE(hub_calls, P);
}

TEST(ConfigPrecedence, InitStrictFactoryOverridesEnvCoordinator) {
  EnvGuard env;
  env.set("JACCL_RANK", "0");
  env.set("JACCL_SIZE", "1");
  env.set("JACCL_COORDINATOR", "127.0.0.1:1");
  env.set("JACCL_TIMEOUT", "2");
  std::atomic<int> calls{0}, fn_calls{0}, seen_rank{-2}, seen_size{-2};
  auto factory = [&](int r, int s) -> AllGatherFn {
    ++calls;
    seen_rank = r;
    seen_size = s;
    return [&](const char* src, char* dst, size_t n) {
      ++fn_calls;
      std::memcpy(dst, src, n);
    };
  };
  try {
    auto g = init(true, factory);
  } catch (const Error&) {
  }
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(seen_rank, 0);
  EXPECT_EQ(seen_size, 1);
}

TEST(ConfigPrecedence, InitFactoryMakesIncompleteEnvComplete) {
  EnvGuard env;
  env.set("MLX_RANK", "0");
  env.set("MLX_WORLD_SIZE", "1");
  EXPECT_EQ(init(false), nullptr);  // no way to bootstrap
  std::atomic<int> calls{0};
  try {
    auto g = init(false, [&](int, int) -> AllGatherFn {
      ++calls;
      return echo();
    });
  } catch (const Error&) {
  }
  EXPECT_EQ(calls, 1);
}

TEST(ConfigPrecedence, FactoryThatThrowsIsAConfigError) {
  Config c;
  c.set_rank(1).set_size(2).set_all_gather_factory(
      [](int, int) -> AllGatherFn { throw std::runtime_error("no kv store"); });
  try {
    detail::make_side_channel(c);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_HAS(std::string(e.what()), "factory");
    EXPECT_HAS(std::string(e.what()), "no kv store");
    EXPECT_HAS(std::string(e.what()), "rank 1");
  }
}

TEST(ConfigPrecedence, FactoryReturningEmptyFunctionIsAConfigError) {
  Config c;
  c.set_rank(0).set_size(1).set_all_gather_factory(
      [](int, int) { return AllGatherFn{}; });
  EXPECT_THROW(detail::make_side_channel(c), ConfigError);
}

}  // namespace
}  // namespace jaccl
