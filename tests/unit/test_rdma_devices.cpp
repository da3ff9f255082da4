// Copyright 2026 the jaccl authors.
// find_rdma_device: the cheap check that lets JACCL_TRANSPORT=auto skip
// loading libfabric where no RDMA hardware provider could work.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "jaccl/jaccl.h"
#include "support/thread_ranks.h"
#include "transport/ofi/ofi_fabric.h"
#include "transport/rdma_devices.h"

namespace fs = std::filesystem;
using jaccl::detail::find_rdma_device;

namespace {

// A scratch root directory with the given files created under it.
struct FakeRoot {
  fs::path dir;
  explicit FakeRoot(std::initializer_list<const char*> files) {
    dir = fs::temp_directory_path() /
          ("jaccl-rdma-devices-" + std::to_string(::getpid()) + "-" +
           std::to_string(counter++));
    fs::create_directories(dir);
    for (const char* f : files) {
      fs::path p = dir / f;
      fs::create_directories(p.parent_path());
      std::ofstream(p.string()).put('x');
    }
  }
  ~FakeRoot() { fs::remove_all(dir); }
  static inline int counter = 0;
};

bool libfabric_mapped() {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    if (line.find("libfabric.so") != std::string::npos) {
      return true;
    }
  }
  return false;
}

}  // namespace

TEST(RdmaDevices, NoneUnderAnEmptyRoot) {
  FakeRoot root({"dev/tty0", "dev/null", "sys/class/net/lo/x"});
  EXPECT_EQ(find_rdma_device(root.dir.string()), "");
  EXPECT_EQ(find_rdma_device((root.dir / "missing").string()), "");
}

TEST(RdmaDevices, FindsEachKindOfDevice) {
  EXPECT_EQ(find_rdma_device(
                FakeRoot({"sys/class/infiniband/mlx5_0/x"}).dir.string() + "/"),
            "/sys/class/infiniband/mlx5_0");
  {
    FakeRoot root({"dev/tty0", "dev/hfi1_0"});
    EXPECT_EQ(find_rdma_device(root.dir.string()), "/dev/hfi1_0");
  }
  {
    FakeRoot root({"dev/null", "dev/cxi0"});
    EXPECT_EQ(find_rdma_device(root.dir.string()), "/dev/cxi0");
  }
  {
    FakeRoot root({"sys/class/cxi/cxi0/x"});
    EXPECT_EQ(find_rdma_device(root.dir.string()), "/sys/class/cxi/cxi0");
  }
}

// The skip is only sound if libfabric agrees: where no device node exists,
// no hardware provider opens either.
TEST(RdmaDevices, NoDeviceMeansNoHardwareProvider) {
  if (!jaccl::detail::ofi::built()) {
    GTEST_SKIP() << "ofi not built";
  }
  const std::string dev = find_rdma_device();
  if (!dev.empty()) {
    GTEST_SKIP() << "this machine has an RDMA device: " << dev;
  }
  EXPECT_EQ(jaccl::detail::ofi::hardware_provider(), "");
}

// JACCL_TRANSPORT=auto on a machine without RDMA devices never loads
// libfabric (each test runs in its own process under ctest).
TEST(RdmaDevices, AutoWithoutDevicesLeavesLibfabricUnloaded) {
  if (!find_rdma_device().empty()) {
    GTEST_SKIP() << "this machine has an RDMA device";
  }
  ASSERT_FALSE(libfabric_mapped()) << "loaded before the test";
  auto errors = jaccl::test::run_thread_ranks(
      2, [](int) { return jaccl::Config().set_transport("auto"); },
      [](int r, jaccl::Group& g) {
        float in = static_cast<float>(r + 1), out = 0;
        g.all_sum(&in, &out, sizeof(float), jaccl::Float32);
        if (out != 3.0f) {
          throw std::runtime_error("wrong all_sum");
        }
      });
  for (const auto& e : errors) {
    EXPECT_EQ(e, "");
  }
  EXPECT_FALSE(libfabric_mapped());
}
