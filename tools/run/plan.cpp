// Copyright 2026 the jaccl authors.
#include "run/plan.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <stdexcept>

#include "common/affinity.h"
#include "run/binding.h"
#include "run/hosts.h"
#include "run/remote.h"
#include "run/util.h"

namespace jaccl::run {

namespace {

// The environment of a local rank: ours, then --env, then the JACCL_* we
// set.
std::vector<std::string> local_env(const Options& opt, int rank,
                                   const std::string& coordinator,
                                   int coordinator_fd,
                                   const std::string& token) {
  std::map<std::string, std::string> vars;
  for (const auto& e : our_environment()) {
    size_t eq = e.find('=');
    if (eq != std::string::npos) {
      vars[e.substr(0, eq)] = e.substr(eq + 1);
    }
  }
  for (const auto& kv : opt.env) {
    size_t eq = kv.find('=');
    vars[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  vars["JACCL_RANK"] = std::to_string(rank);
  vars["JACCL_SIZE"] = std::to_string(opt.n);
  if (!opt.side_channel.empty()) {
    vars["JACCL_SIDE_CHANNEL"] = opt.side_channel;
    vars.erase("JACCL_COORDINATOR");
    vars.erase("MLX_JACCL_COORDINATOR");
  } else {
    vars["JACCL_COORDINATOR"] = coordinator;
  }
  // Ours only in rank 0, and only when it gets the socket.
  vars.erase("JACCL_COORDINATOR_FD");
  if (rank == 0 && coordinator_fd >= 0) {
    vars["JACCL_COORDINATOR_FD"] = std::to_string(coordinator_fd);
  }
  if (!token.empty()) {
    vars["JACCL_TOKEN"] = token;
  }
  std::vector<std::string> out;
  for (const auto& [k, v] : vars) {
    out.push_back(k + "=" + v);
  }
  return out;
}

// Each local rank's CPUs under --bind-to (all empty: unbound); cpus: ours.
std::vector<std::vector<int>> local_binding(const Options& opt,
                                            const std::vector<int>& cpus,
                                            int& code) {
  const bool fits = static_cast<size_t>(opt.n) <= cpus.size();
  if (opt.bind_to == "cpus" && !fits) {
    code = kUsageExit;
    throw std::runtime_error("--bind-to cpus: " + std::to_string(opt.n) +
                             " ranks but only " + std::to_string(cpus.size()) +
                             " CPU(s) to bind them to (" + cpu_list(cpus) +
                             "); use --bind-to none to run them unbound");
  }
  if (opt.bind_to == "none" || !fits) {
    return std::vector<std::vector<int>>(static_cast<size_t>(opt.n));
  }
  return cpu_shares(opt.n, cpus);
}

JobPlan plan_local(const Options& opt, const std::string& token, int& code) {
  int err = 0;
  const std::string path = resolve_program(opt.command[0], err);
  if (path.empty()) {
    code = err == ENOENT ? 127 : 126;
    throw std::runtime_error("cannot execute " + opt.command[0] + ": " +
                             std::strerror(err));
  }
  JobPlan job;
  if (opt.side_channel.empty() && !opt.coordinator.empty()) {
    job.coordinator = opt.coordinator;
  } else if (opt.side_channel.empty()) {
    // Listening from now on and handed to rank 0: no other process can take
    // the port while the ranks start, and ranks that dial before rank 0
    // runs wait in its queue.
    int port = 0;
    job.coordinator_fd = coordinator_socket(&port);
    job.coordinator = "127.0.0.1:" + std::to_string(port);
  }
  const std::vector<int> cpus = jaccl::detail::allowed_cpus();
  const auto binding = local_binding(opt, cpus, code);
  for (int rank = 0; rank < opt.n; ++rank) {
    RankPlan rp;
    rp.spec.cpus = binding[static_cast<size_t>(rank)];
    rp.spec.path = path;
    rp.spec.argv = opt.command;
    rp.spec.env =
        local_env(opt, rank, job.coordinator, job.coordinator_fd, token);
    if (rank == 0) {
      rp.spec.pass_fd = job.coordinator_fd;
    }
    rp.spec.capture = !opt.no_prefix;
    rp.spec.stdin_ours = rank == 0;  // only rank 0 reads our stdin
    std::string env =
        "JACCL_RANK=" + std::to_string(rank) +
        " JACCL_SIZE=" + std::to_string(opt.n) + " " +
        (job.coordinator.empty() ? "JACCL_SIDE_CHANNEL=" + opt.side_channel
                                 : "JACCL_COORDINATOR=" + job.coordinator);
    rp.display = env + " " + shell_join(opt.command);
    if (!rp.spec.cpus.empty()) {
      rp.display += "  (bound to CPUs " + cpu_list(rp.spec.cpus) + ")";
    }
    job.ranks.push_back(std::move(rp));
  }
  job.summary = "starting " + std::to_string(opt.n) + " rank(s) of " + path +
                (job.coordinator.empty() ? ", side channel " + opt.side_channel
                                         : ", coordinator " + job.coordinator) +
                (binding[0].empty()
                     ? ", unbound"
                     : ", each bound to its share of CPUs " + cpu_list(cpus));
  return job;
}

JobPlan plan_remote(const Options& opt, const std::string& token, int& code) {
  if (opt.bind_to == "cpus") {
    code = kUsageExit;
    throw std::runtime_error(
        "--bind-to cpus binds ranks started here; ranks on --hosts run "
        "unbound (their CPUs are not known here)");
  }
  HostPlan hosts = !opt.hostfile.empty() ? parse_hostfile(opt.hostfile)
                                         : parse_host_list(opt.hosts);
  const std::vector<int> host_of = place_ranks(hosts, opt.n);
  const int n = static_cast<int>(host_of.size());
  std::vector<std::string> ssh;
  try {
    ssh = shell_split(opt.ssh);
  } catch (const std::invalid_argument& e) {
    code = kUsageExit;
    throw std::runtime_error(std::string("--ssh: ") + e.what());
  }
  if (ssh.empty()) {
    code = kUsageExit;
    throw std::runtime_error("--ssh: empty command");
  }
  int err = 0;
  const std::string ssh_path = resolve_program(ssh[0], err);
  if (ssh_path.empty()) {
    code = err == ENOENT ? 127 : 126;
    throw std::runtime_error("cannot execute " + ssh[0] +
                             " (--ssh): " + std::strerror(err));
  }
  JobPlan job;
  if (opt.side_channel.empty()) {
    job.coordinator = !opt.coordinator.empty()
                          ? opt.coordinator
                          : coordinator_address(hosts, host_of, free_port());
  }
  std::string cwd = opt.cwd;
  if (cwd.empty()) {
    char buf[4096];
    if (::getcwd(buf, sizeof(buf)) == nullptr) {
      throw std::runtime_error(std::string("getcwd: ") + std::strerror(errno) +
                               " (give --cwd)");
    }
    cwd = buf;
  }
  for (int rank = 0; rank < n; ++rank) {
    const Host& h = hosts.hosts[static_cast<size_t>(host_of[rank])];
    RemoteRank rr;
    rr.cwd = cwd;
    rr.env = hosts.envs;
    if (hosts.ring) {
      rr.env.push_back("JACCL_RING=1");
    }
    rr.env.insert(rr.env.end(), opt.env.begin(), opt.env.end());
    rr.env.push_back("JACCL_RANK=" + std::to_string(rank));
    rr.env.push_back("JACCL_SIZE=" + std::to_string(n));
    if (job.coordinator.empty()) {
      rr.env.push_back("JACCL_SIDE_CHANNEL=" + opt.side_channel);
    } else {
      rr.env.push_back("JACCL_COORDINATOR=" + job.coordinator);
    }
    rr.devices = hosts.devices;
    rr.grace = opt.grace;
    rr.command = opt.command;
    RankPlan rp;
    rp.remote = true;
    rp.host = h.ssh;
    rp.spec.path = ssh_path;
    rp.spec.argv = ssh_argv(ssh, h.ssh, rr);
    rp.spec.env = our_environment();
    rp.spec.capture = true;
    rp.spec.ctl = true;
    rp.spec.own_group = true;  // a terminal's Ctrl-C reaches only us
    rp.spec.first_input = token + "\n";
    rp.display = shell_join(rp.spec.argv);
    job.ranks.push_back(std::move(rp));
  }
  job.summary = "starting " + std::to_string(n) + " rank(s) of " +
                opt.command[0] + " on " + std::to_string(hosts.hosts.size()) +
                " host(s) through " + ssh[0] +
                (job.coordinator.empty() ? ", side channel " + opt.side_channel
                                         : ", coordinator " + job.coordinator);
  return job;
}

}  // namespace

JobPlan plan_job(const Options& opt, int& code) {
  code = 1;
  std::string token;
  if (!opt.no_token) {
    token = random_token();
  } else if (opt.multi_host() && std::getenv("JACCL_TOKEN") != nullptr) {
    token = std::getenv("JACCL_TOKEN");  // ours travels on stdin too
  }
  if (!opt.multi_host()) {
    return plan_local(opt, opt.no_token ? "" : token, code);
  }
  return plan_remote(opt, token, code);
}

}  // namespace jaccl::run
