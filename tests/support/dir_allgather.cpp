// Copyright 2026 the jaccl authors.
#include "support/dir_allgather.h"

#include <filesystem>
#include <fstream>
#include <memory>
#include <thread>

#include "common/deadline.h"
#include "common/error.h"

namespace jaccl::test {

namespace fs = std::filesystem;

AllGatherFn dir_all_gather(std::string dir, int rank, int size,
                           std::chrono::milliseconds timeout,
                           std::function<void()> before_call) {
  std::error_code ec;
  fs::create_directories(dir, ec);  // a missing one fails at the first write
  auto seq = std::make_shared<int>(0);
  return [dir = std::move(dir), rank, size, timeout,
          before_call = std::move(before_call),
          seq](const char* src, char* dst, size_t n) {
    if (before_call) {
      before_call();
    }
    const std::string base = dir + "/" + std::to_string((*seq)++) + ".";
    const std::string mine = base + std::to_string(rank);
    std::ofstream(mine + ".tmp", std::ios::binary)
        .write(src, static_cast<std::streamsize>(n));
    fs::rename(mine + ".tmp", mine);
    const auto dl = detail::Deadline::after(timeout);
    for (int r = 0; r < size; ++r) {
      const std::string path = base + std::to_string(r);
      while (!fs::exists(path)) {
        if (dl.expired()) {
          detail::raise(ErrorKind::Timeout,
                        "directory all-gather: no input of rank " +
                            std::to_string(r) + " after " +
                            detail::format_duration(timeout),
                        {.rank = rank, .peer = r, .address = path});
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      std::ifstream(path, std::ios::binary)
          .read(dst + static_cast<size_t>(r) * n,
                static_cast<std::streamsize>(n));
    }
  };
}

}  // namespace jaccl::test
