// Copyright 2026 the jaccl authors.
#include "support/ssh_hosts.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include "support/proc.h"

namespace jaccl::test {

namespace {

using namespace std::chrono_literals;

constexpr const char* kSshd = "/usr/sbin/sshd";

std::string read_file(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string cmdline_of(pid_t pid) {
  std::string s = read_file("/proc/" + std::to_string(pid) + "/cmdline");
  for (char& c : s) {
    if (c == '\0') {
      c = ' ';
    }
  }
  return s;
}

}  // namespace

// Namespaces and bridges of earlier test processes that died before their
// destructor ran (SIGKILLed at a ctest timeout): jl<pid>x<k>... whose pid
// is gone. Only this helper makes names of that shape.
void SshHosts::remove_stale() {
  sh("for ns in $(ip netns list | awk '{print $1}' | grep -E "
     "'^jl[0-9]+x[0-9]-[0-9]+$'); do p=${ns#jl}; p=${p%%x*}; "
     "[ -d /proc/$p ] && continue; for q in $(ip netns pids $ns); do kill -9 "
     "$q; done; ip netns del $ns; done; "
     "for b in $(ip -o link show type bridge | awk -F': ' '{print $2}' | grep "
     "-E '^jl[0-9]+x[0-9]b$'); do p=${b#jl}; p=${p%%x*}; [ -d /proc/$p ] || "
     "ip link del $b; done; true");
}

SshHosts::SshHosts(int count) {
  if (::geteuid() != 0) {
    skip_ = "needs root (network namespaces, sshd)";
    return;
  }
  if (::access(kSshd, X_OK) != 0 || !on_path("ssh") || !on_path("ssh-keygen")) {
    skip_ = "needs openssh-server and openssh-client (scripts/setup.sh)";
    return;
  }
  if (!on_path("ip") || !on_path("unshare")) {
    skip_ = "needs iproute2 and util-linux (ip, unshare)";
    return;
  }
  error_ = setup(count);
}

bool SshHosts::sh(const std::string& script, std::string* out) {
  ProcResult r = run("/bin/sh", {"-c", script}, {}, 30s);
  if (out != nullptr) {
    *out = r.describe() + ": " + r.output;
  }
  return r.exited_ok();
}

std::string SshHosts::setup(int count) {
  // Names unique on this machine (pid and a counter), within IFNAMSIZ.
  static std::atomic<int> counter{0};
  const int pid = static_cast<int>(::getpid());
  const int k = counter++;
  id_ = "jl" + std::to_string(pid) + "x" + std::to_string(k % 10);
  remove_stale();
  bridge_ = id_ + "b";
  const std::string net = "10." + std::to_string(150 + (pid / 256 + k) % 50) +
                          "." + std::to_string(pid % 256) + ".";
  bridge_ip_ = net + "1";
  std::string why;
  if (!sh("set -e; ip link add " + bridge_ + " type bridge; ip addr add " +
              bridge_ip_ + "/24 dev " + bridge_ + "; ip link set " + bridge_ +
              " up",
          &why)) {
    return "cannot make a bridge: " + why;
  }
  const std::string d = dir_.path();
  if (!sh("set -e; cd " + d +
              "; ssh-keygen -q -t ed25519 -N '' -f host_key; "
              "ssh-keygen -q -t ed25519 -N '' -f client_key; "
              "cp client_key.pub authorized_keys; mkdir -p /run/sshd",
          &why)) {
    return "cannot make keys: " + why;
  }
  for (int h = 0; h < count; ++h) {
    const std::string ns = id_ + "-" + std::to_string(h);
    const std::string ip = net + std::to_string(2 + h);
    const std::string a = id_ + "h" + std::to_string(h);
    const std::string b = id_ + "n" + std::to_string(h);
    if (!sh("set -e; ip netns add " + ns + "; ip link add " + a +
                " type veth peer name " + b + " netns " + ns +
                "; ip link set " + a + " master " + bridge_ + " up; ip -n " +
                ns + " addr add " + ip + "/24 dev " + b + "; ip -n " + ns +
                " link set " + b + " up; ip -n " + ns + " link set lo up",
            &why)) {
      ns_.push_back(ns);  // removed with the others
      return "cannot make host " + std::to_string(h) + ": " + why;
    }
    ns_.push_back(ns);
    ips_.push_back(ip);
    ifs_.push_back(b);
    ports_.push_back(free_loopback_port());
    const std::string conf = d + "/sshd_config" + std::to_string(h);
    std::ofstream(conf) << "Port " << ports_.back() << "\nListenAddress " << ip
                        << "\nHostKey " << d << "/host_key"
                        << "\nAuthorizedKeysFile " << d << "/authorized_keys"
                        << "\nPidFile " << d << "/sshd" << h << ".pid"
                        << "\nStrictModes no\nUsePAM no\n"
                           "PasswordAuthentication no\n"
                           "KbdInteractiveAuthentication no\n"
                           "PermitRootLogin prohibit-password\nPrintMotd no\n"
                           "MaxStartups 100\nMaxSessions 100\n"
                           "LogLevel ERROR\n"
                           // bash reads ~/.bashrc for an ssh command only
                           // below SHLVL 2: the hosts must not depend on
                           // this machine's login setup (a stale pyenv
                           // rehash lock there made every session wait
                           // 60 s, and the whole ssh suite time out).
                           "SetEnv SHLVL=1\n";
    // Its own IPC namespace, so its sessions share memory only with each
    // other; -D keeps it our child, -e logs to its stderr.
    sshd_.push_back(std::make_unique<Job>(
        Job::start("ip",
                   {"netns", "exec", ns, "unshare", "--ipc", kSshd, "-D", "-e",
                    "-f", conf},
                   1, nullptr)));
  }
  write_ssh_config();
  // Up when an ssh to it runs a command (sshd needs a moment to listen).
  // One budget for all of it, well inside ctest's timeout, so a host that
  // is slow to answer fails the setup with ssh's words instead of a hang.
  const auto until = std::chrono::steady_clock::now() + 60s;
  for (int h = 0; h < count; ++h) {
    ProcResult last;
    while (true) {
      std::vector<std::string> args = {
          "-F", d + "/ssh_config", "-o", "BatchMode=yes", ips_[h], "true"};
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          until - std::chrono::steady_clock::now());
      last = run("ssh", args, {}, std::max(left, 1000ms));
      if (last.exited_ok() || std::chrono::steady_clock::now() >= until) {
        break;
      }
      std::this_thread::sleep_for(100ms);
    }
    if (!last.exited_ok()) {
      return "sshd on host " + std::to_string(h) + " (" + ips_[h] +
             ") does not answer: " + last.describe() + ": " + last.output +
             "\nsshd: " + sshd_[h]->output(0);
    }
  }
  return "";
}

void SshHosts::write_ssh_config() {
  const std::string d = dir_.path();
  const std::string key = read_file(d + "/host_key.pub");
  const std::string key_type_and_blob = key.substr(0, key.rfind(' '));
  std::ofstream known(d + "/known_hosts");
  std::ofstream cfg(d + "/ssh_config");
  for (size_t h = 0; h < ips_.size(); ++h) {
    known << "[" << ips_[h] << "]:" << ports_[h] << " " << key_type_and_blob
          << "\n";
    cfg << "Host " << ips_[h] << "\n  Port " << ports_[h] << "\n";
  }
  for (const auto& [address, port] : aliases_) {
    cfg << "Host " << address << "\n";
    if (port != 0) {
      cfg << "  Port " << port << "\n";
    }
  }
  cfg << "Host *\n  User root\n  IdentityFile " << d
      << "/client_key\n  IdentitiesOnly yes\n  UserKnownHostsFile " << d
      << "/known_hosts\n  StrictHostKeyChecking yes\n  LogLevel ERROR\n";
}

void SshHosts::add_alias(const std::string& address, int port) {
  aliases_.emplace_back(address, port);
  write_ssh_config();
}

std::string SshHosts::ssh_command() const {
  return "ssh -F " + dir_.path() + "/ssh_config -o BatchMode=yes";
}

std::vector<pid_t> SshHosts::pids_in(int h) const {
  std::vector<pid_t> out;
  ProcResult r = run("ip", {"netns", "pids", netns(h)}, {}, 10s);
  const pid_t listener = sshd_.size() > static_cast<size_t>(h)
                             ? sshd_[static_cast<size_t>(h)]->pid(0)
                             : -1;
  std::istringstream in(r.output);
  for (long p; in >> p;) {
    if (p != listener && pid_alive(static_cast<pid_t>(p))) {
      out.push_back(static_cast<pid_t>(p));
    }
  }
  return out;
}

bool SshHosts::all_quiet(std::chrono::milliseconds deadline) const {
  const auto until = std::chrono::steady_clock::now() + deadline;
  while (true) {
    bool quiet = true;
    for (int h = 0; h < size() && quiet; ++h) {
      quiet = pids_in(h).empty();
    }
    if (quiet) {
      return true;
    }
    if (std::chrono::steady_clock::now() >= until) {
      return false;
    }
    std::this_thread::sleep_for(50ms);
  }
}

std::string SshHosts::describe_leftovers() const {
  std::string out;
  for (int h = 0; h < size(); ++h) {
    for (pid_t p : pids_in(h)) {
      out += "host " + std::to_string(h) + " pid " + std::to_string(p) + ": " +
             cmdline_of(p) + "\n";
    }
  }
  return out;
}

SshHosts::~SshHosts() {
  // Whatever still runs in our namespaces is ours (sshd, its sessions, a
  // test's ranks): SIGKILL it, then remove the namespaces and the bridge.
  for (const auto& ns : ns_) {
    sh("for p in $(ip netns pids " + ns +
       " 2>/dev/null); do kill -9 $p 2>/dev/null; done; true");
  }
  sshd_.clear();  // reaps the listeners
  for (const auto& ns : ns_) {
    sh("ip netns del " + ns + " 2>/dev/null; true");
  }
  if (!bridge_.empty()) {
    sh("ip link del " + bridge_ + " 2>/dev/null; true");
  }
}

}  // namespace jaccl::test
