// Copyright 2026 the jaccl authors.
#include "support/listen_sockets.h"

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

namespace jaccl::test {

int listen_sockets_of(pid_t pid) {
  const std::string proc =
      pid == 0 ? std::string("/proc/self") : "/proc/" + std::to_string(pid);
  std::set<std::string> inodes;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(proc + "/fd", ec)) {
    std::error_code ec2;
    auto target = std::filesystem::read_symlink(e.path(), ec2).string();
    if (!ec2 && target.rfind("socket:[", 0) == 0) {
      inodes.insert(target.substr(8, target.size() - 9));
    }
  }
  int count = 0;
  for (const char* table : {"/net/tcp", "/net/tcp6"}) {
    std::ifstream f(proc + table);  // the process's network namespace
    std::string line;
    std::getline(f, line);  // header
    while (std::getline(f, line)) {
      std::istringstream in(line);
      std::string sl, local, remote, st, queues, tr, retr, uid, timeout, inode;
      in >> sl >> local >> remote >> st >> queues >> tr >> retr >> uid >>
          timeout >> inode;
      count += st == "0A" && inodes.count(inode) ? 1 : 0;
    }
  }
  return count;
}

}  // namespace jaccl::test
