// Copyright 2026 the jaccl authors.
// One rank of a shared-memory set-up test (tests/unit/test_shm_segment.cpp):
// jaccl::init over a shared-directory all-gather, then a checked all_sum.
//
// Prints, in order:
//   "HANDOFF @jaccl-<hex>"   (the creator, at the first side-channel call
//                            made while it listens on its hand-off socket)
//   "PAUSED <n>"             with SHM_PAUSE_AT=n: the creator stops (120 s)
//                            before its n-th side-channel call counted from
//                            that one (0: before publishing the nonce),
//                            or until the file SHM_RESUME_FILE exists
//   "READY rank=R backend=B"
//   "SEGMENT <path>"         the segment's line in /proc/self/maps
//   "HOLDING"                with TEST_RELEASE_FILE, until that file exists
//   "OK"                     after a checked all_sum and a barrier (exit 0)
// On a jaccl error: "ERROR <kind> | <what>", exit 3.
//
// Environment: JACCL_* (Config::from_env); TEST_SIDE_DIR the shared
// directory of the all-gather; SHM_NOT_DUMPABLE=1: the process makes itself
// not dumpable first (prctl), so its descriptors cannot be opened through
// /proc (a creator then hands the memfd over through its socket only).
#include <dirent.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "jaccl/jaccl.h"
#include "support/dir_allgather.h"

namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

int g_calls = 0;
int g_base = -1;  // the call at which the hand-off socket was first seen

std::set<std::string> my_socket_inodes() {
  std::set<std::string> out;
  for (const auto& e : fs::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    std::string link = fs::read_symlink(e.path(), ec).string();
    if (link.rfind("socket:[", 0) == 0) {
      out.insert(link.substr(8, link.size() - 9));
    }
  }
  return out;
}

// "@jaccl-..." if this process holds such an abstract socket, else "".
std::string my_handoff_socket() {
  auto mine = my_socket_inodes();
  std::ifstream in("/proc/net/unix");
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::string num, refs, proto, flags, type, st, inode, path;
    f >> num >> refs >> proto >> flags >> type >> st >> inode >> path;
    if (path.rfind("@jaccl-", 0) == 0 && mine.count(inode)) {
      return path;
    }
  }
  return "";
}

void before_side_call() {
  const int call = g_calls++;
  if (g_base < 0) {
    std::string s = my_handoff_socket();
    if (s.empty()) {
      return;
    }
    g_base = call;
    std::cout << "HANDOFF " << s << std::endl;
  }
  if (const char* at = std::getenv("SHM_PAUSE_AT")) {
    if (call - g_base == std::atoi(at)) {
      std::cout << "PAUSED " << at << std::endl;
      const char* resume = std::getenv("SHM_RESUME_FILE");
      auto until = std::chrono::steady_clock::now() + 120s;
      while (std::chrono::steady_clock::now() < until &&
             !(resume != nullptr && fs::exists(resume))) {
        std::this_thread::sleep_for(5ms);
      }
    }
  }
}

std::string segment_line() {
  std::ifstream in("/proc/self/maps");
  std::string line;
  while (std::getline(in, line)) {
    auto at = line.find("jaccl-");
    if (at != std::string::npos) {
      return line.substr(line.find('/'));
    }
  }
  return "(none)";
}

}  // namespace

int main() {
  if (const char* nd = std::getenv("SHM_NOT_DUMPABLE");
      nd != nullptr && std::string(nd) == "1" &&
      ::prctl(PR_SET_DUMPABLE, 0) != 0) {
    std::cerr << "prctl(PR_SET_DUMPABLE, 0) failed\n";
    return 2;
  }
  try {
    jaccl::Config cfg = jaccl::Config::from_env();
    const char* side = std::getenv("TEST_SIDE_DIR");
    if (side == nullptr) {
      std::cerr << "TEST_SIDE_DIR not set\n";
      return 2;
    }
    std::string dir = side;
    cfg.set_all_gather_factory([dir](int rank, int size) {
      return jaccl::test::dir_all_gather(dir, rank, size, 60s,
                                         before_side_call);
    });
    auto group = jaccl::init(cfg, true);
    std::cout << "READY rank=" << group->rank()
              << " backend=" << group->backend_name() << std::endl;
    std::cout << "SEGMENT " << segment_line() << std::endl;
    if (const char* release = std::getenv("TEST_RELEASE_FILE")) {
      std::cout << "HOLDING" << std::endl;
      auto until = std::chrono::steady_clock::now() + 60s;
      while (!fs::exists(release) && std::chrono::steady_clock::now() < until) {
        std::this_thread::sleep_for(5ms);
      }
    }
    // The ranks really share memory: an exact all_sum larger than one slot.
    const size_t count = (6 << 20) / 4;
    std::vector<float> in(count), out(count);
    for (size_t i = 0; i < count; ++i) {
      in[i] = static_cast<float>(group->rank() + static_cast<int>(i % 5));
    }
    group->all_sum(in.data(), out.data(), count * 4, jaccl::Float32);
    const int n = group->size();
    for (size_t i = 0; i < count; ++i) {
      float want =
          static_cast<float>(n * (n - 1) / 2 + n * static_cast<int>(i % 5));
      if (out[i] != want) {
        std::cout << "WRONG at " << i << ": " << out[i] << " != " << want
                  << std::endl;
        return 1;
      }
    }
    group->barrier();
    std::cout << "OK" << std::endl;
    return 0;
  } catch (const jaccl::Error& e) {
    std::cout << "ERROR " << jaccl::to_string(e.kind()) << " | " << e.what()
              << std::endl;
    return 3;
  }
}
