// Copyright 2026 the jaccl authors.
#include "support/ipc_hosts.h"

#include <sys/mount.h>

#include <chrono>
#include <filesystem>
#include <fstream>

namespace jaccl::test {

IpcHosts::IpcHosts(int count) {
  using namespace std::chrono_literals;
  for (int h = 0; h < count; ++h) {
    std::string f =
        (std::filesystem::path(dir_.path()) / ("host" + std::to_string(h)));
    std::ofstream(f).put('\n');
    auto r = run("unshare", {"--ipc=" + f, "true"}, {}, 10s);
    if (!r.exited_ok()) {
      error_ = "unshare --ipc=FILE failed: " + r.describe() + ": " + r.output;
      return;
    }
    files_.push_back(f);
  }
}

IpcHosts::~IpcHosts() {
  for (const auto& f : files_)
    ::umount2(f.c_str(), MNT_DETACH);
}

Job start_on_hosts(
    const IpcHosts& hosts, const std::vector<int>& host_of,
    const std::string& worker, const std::vector<std::string>& args,
    const std::function<std::map<std::string, std::string>(int)>& env) {
  std::vector<std::string> sh = {
      "-c", "exec nsenter --ipc=\"$HIER_HOST\" -- \"$0\" \"$@\"", worker};
  sh.insert(sh.end(), args.begin(), args.end());
  const int n = static_cast<int>(host_of.size());
  return Job::start("/bin/sh", sh, n, [&](int r) {
    auto e = env(r);
    e["HIER_HOST"] = hosts.file(host_of[static_cast<size_t>(r)]);
    return e;
  });
}

}  // namespace jaccl::test
