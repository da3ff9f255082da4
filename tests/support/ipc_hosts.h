// Copyright 2026 the jaccl authors.
// "Hosts" made of IPC namespaces (unshare --ipc=FILE, entered with nsenter):
// ranks in one share memory with each other but not with the others, as on
// separate machines, while TCP still runs over loopback. Root only; error()
// says why they could not be made (a test then skips).
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "support/fixtures.h"
#include "support/proc.h"

namespace jaccl::test {

class IpcHosts {
 public:
  explicit IpcHosts(int count);
  ~IpcHosts();  // unmounts the namespace files
  IpcHosts(const IpcHosts&) = delete;
  IpcHosts& operator=(const IpcHosts&) = delete;
  const std::string& error() const { return error_; }
  const std::string& file(int h) const {
    return files_[static_cast<size_t>(h)];
  }

 private:
  TempDir dir_;
  std::vector<std::string> files_;
  std::string error_;
};

// Runs n = host_of.size() copies of worker (args), rank r inside host
// host_of[r], with env(r).
Job start_on_hosts(
    const IpcHosts& hosts, const std::vector<int>& host_of,
    const std::string& worker, const std::vector<std::string>& args,
    const std::function<std::map<std::string, std::string>(int)>& env);

}  // namespace jaccl::test
