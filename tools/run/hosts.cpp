// Copyright 2026 the jaccl authors.
#include "run/hosts.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace jaccl::run {

namespace {

using nlohmann::json;

bool all_digits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) {
    return std::isdigit(c) != 0;
  });
}

int parse_slots(const std::string& text, const std::string& where) {
  if (!all_digits(text) || text.size() > 6 || std::stoi(text) < 1) {
    throw HostsError(where + ": slots must be a positive integer, got '" +
                     text + "'");
  }
  return std::stoi(text);
}

void check_name(const std::string& ssh, const std::string& where) {
  if (ssh.empty()) {
    throw HostsError(where + ": empty host name");
  }
  if (ssh[0] == '-' || std::any_of(ssh.begin(), ssh.end(), [](unsigned char c) {
        return std::isspace(c) != 0 || c == '\'' || c == '"' || c == '\\';
      })) {
    throw HostsError(where + ": '" + ssh + "' is not a host name");
  }
}

// A shell variable name (the remote side exports it).
bool is_name(const std::string& s) {
  return !s.empty() && std::isdigit(static_cast<unsigned char>(s[0])) == 0 &&
         std::all_of(s.begin(), s.end(), [](unsigned char c) {
           return std::isalnum(c) != 0 || c == '_';
         });
}

bool is_ip(const std::string& s) {
  in_addr a4{};
  in6_addr a6{};
  return ::inet_pton(AF_INET, s.c_str(), &a4) == 1 ||
         ::inet_pton(AF_INET6, s.c_str(), &a6) == 1;
}

bool is_loopback(const std::string& ip) {
  in_addr a4{};
  if (::inet_pton(AF_INET, ip.c_str(), &a4) == 1) {
    return (ntohl(a4.s_addr) >> 24) == 127;
  }
  in6_addr a6{};
  return ::inet_pton(AF_INET6, ip.c_str(), &a6) == 1 &&
         IN6_IS_ADDR_LOOPBACK(&a6);
}

// The first address of name, IPv4 preferred; "" and err set if none.
std::string resolve(const std::string& name, std::string& err) {
  for (int family : {AF_INET, AF_INET6}) {
    addrinfo hints{};
    hints.ai_family = family;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    int rc = ::getaddrinfo(name.c_str(), nullptr, &hints, &res);
    if (rc != 0) {
      err = ::gai_strerror(rc);
      continue;
    }
    char buf[INET6_ADDRSTRLEN] = {0};
    const void* addr =
        family == AF_INET
            ? static_cast<const void*>(
                  &reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr)
            : static_cast<const void*>(
                  &reinterpret_cast<sockaddr_in6*>(res->ai_addr)->sin6_addr);
    ::inet_ntop(family, addr, buf, sizeof(buf));
    ::freeaddrinfo(res);
    return buf;
  }
  return "";
}

HostPlan parse_json(const std::string& text, const std::string& path) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw HostsError("hostfile " + path + " is not valid JSON: " + e.what());
  }
  HostPlan plan;
  const json* hosts = &j;
  if (j.is_object()) {
    if (!j.contains("hosts") || !j["hosts"].is_array()) {
      throw HostsError("hostfile " + path + ": no \"hosts\" array");
    }
    hosts = &j["hosts"];
    if (j.contains("backend")) {
      const json& b = j["backend"];
      const std::string backend = b.is_string() ? b.get<std::string>() : "?";
      if (backend == "jaccl-ring") {
        plan.ring = true;
      } else if (!backend.empty() && backend != "jaccl") {
        throw HostsError("hostfile " + path + ": backend '" + backend +
                         "' is not one jaccl-run starts (jaccl, jaccl-ring)");
      }
    }
    if (j.contains("envs")) {
      if (!j["envs"].is_array()) {
        throw HostsError("hostfile " + path + ": \"envs\" is not an array");
      }
      for (const json& e : j["envs"]) {
        std::string kv = e.is_string() ? e.get<std::string>() : "";
        size_t eq = kv.find('=');
        if (eq == std::string::npos || eq == 0 || !is_name(kv.substr(0, eq))) {
          throw HostsError("hostfile " + path + ": env '" + e.dump() +
                           "' is not K=V");
        }
        plan.envs.push_back(kv);
      }
    }
  } else if (!j.is_array()) {
    throw HostsError("hostfile " + path +
                     ": expected an object with \"hosts\" or an array");
  }
  bool any_rdma = false;
  for (size_t i = 0; i < hosts->size(); ++i) {
    const json& h = (*hosts)[i];
    const std::string where =
        "hostfile " + path + ", host " + std::to_string(i);
    if (!h.is_object() || !h.contains("ssh") || !h["ssh"].is_string()) {
      throw HostsError(where + ": needs \"ssh\": \"hostname\"");
    }
    Host host;
    host.ssh = h["ssh"].get<std::string>();
    check_name(host.ssh, where);
    if (h.contains("ips")) {
      if (!h["ips"].is_array()) {
        throw HostsError(where + ": \"ips\" is not an array");
      }
      for (const json& ip : h["ips"]) {
        if (!ip.is_string()) {
          throw HostsError(where + ": \"ips\" holds " + ip.dump());
        }
        host.ips.push_back(ip.get<std::string>());
      }
    }
    if (h.contains("slots")) {
      if (!h["slots"].is_number_integer() || h["slots"].get<int64_t>() < 1 ||
          h["slots"].get<int64_t>() > 1 << 20) {
        throw HostsError(where +
                         ": \"slots\" must be an integer in 1..1048576");
      }
      host.slots = h["slots"].get<int>();
    }
    any_rdma = any_rdma || (h.contains("rdma") && !h["rdma"].empty());
    plan.hosts.push_back(host);
  }
  if (plan.hosts.empty()) {
    throw HostsError("hostfile " + path + " lists no hosts");
  }
  if (any_rdma) {
    // mlx.launch: each host is one rank and its "rdma" its row of the
    // device matrix (null towards itself).
    json matrix = json::array();
    for (size_t i = 0; i < hosts->size(); ++i) {
      const json& h = (*hosts)[i];
      const std::string where =
          "hostfile " + path + ", host " + std::to_string(i);
      if (!h.contains("rdma") || !h["rdma"].is_array() ||
          h["rdma"].size() != hosts->size()) {
        throw HostsError(where + ": \"rdma\" must list one entry per host (" +
                         std::to_string(hosts->size()) + ")");
      }
      if (!h["rdma"][i].is_null()) {
        throw HostsError(where + ": \"rdma\" entry " + std::to_string(i) +
                         " (itself) must be null");
      }
      if (plan.hosts[i].slots != 1) {
        throw HostsError(where + ": \"slots\" cannot go with \"rdma\"");
      }
      matrix.push_back(h["rdma"]);
    }
    plan.devices = matrix.dump();
  }
  return plan;
}

HostPlan parse_text(const std::string& text, const std::string& path) {
  HostPlan plan;
  std::istringstream in(text);
  int lineno = 0;
  for (std::string line; std::getline(in, line);) {
    ++lineno;
    line = line.substr(0, line.find('#'));
    std::istringstream words(line);
    std::string name;
    if (!(words >> name)) {
      continue;
    }
    const std::string where = path + ":" + std::to_string(lineno);
    Host host;
    host.ssh = name;
    check_name(host.ssh, where);
    for (std::string w; words >> w;) {
      size_t eq = w.find('=');
      std::string key = w.substr(0, eq);
      if (eq == std::string::npos) {
        throw HostsError(where + ": '" + w + "' is not KEY=VALUE (slots=N)");
      }
      if (key == "slots") {
        host.slots = parse_slots(w.substr(eq + 1), where);
      } else if (key != "max_slots" && key != "max-slots") {
        throw HostsError(where + ": unknown field '" + key +
                         "' (expected slots=N)");
      }
    }
    plan.hosts.push_back(host);
  }
  if (plan.hosts.empty()) {
    throw HostsError("hostfile " + path + " lists no hosts");
  }
  return plan;
}

}  // namespace

std::string host_name(const std::string& ssh) {
  size_t at = ssh.rfind('@');
  return at == std::string::npos ? ssh : ssh.substr(at + 1);
}

HostPlan parse_host_list(const std::string& list) {
  HostPlan plan;
  std::istringstream in(list);
  for (std::string item; std::getline(in, item, ',');) {
    const std::string where = "--hosts '" + list + "'";
    Host host;
    size_t colon = item.rfind(':');
    if (colon != std::string::npos &&
        item.find(':') == colon) {  // one colon: name:slots
      host.slots = parse_slots(item.substr(colon + 1), where);
      item = item.substr(0, colon);
    }
    host.ssh = item;
    check_name(host.ssh, where);
    plan.hosts.push_back(host);
  }
  if (plan.hosts.empty()) {
    throw HostsError("--hosts: no hosts given");
  }
  return plan;
}

HostPlan parse_hostfile(const std::string& path) {
  std::ifstream f(path);
  if (!f) {
    throw HostsError("cannot read the hostfile " + path);
  }
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string text = ss.str();
  size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos &&
      (text[first] == '{' || text[first] == '[')) {
    return parse_json(text, path);
  }
  return parse_text(text, path);
}

std::vector<int> place_ranks(const HostPlan& plan, int n) {
  int total = 0;
  std::string slots;
  for (const Host& h : plan.hosts) {
    total += h.slots;
    slots +=
        (slots.empty() ? "" : ", ") + h.ssh + ":" + std::to_string(h.slots);
  }
  if (n == 0) {
    n = total;
  }
  if (n > total) {
    throw HostsError("-n " + std::to_string(n) + " is more ranks than the " +
                     std::to_string(total) + " slots of the hosts (" + slots +
                     ")");
  }
  if (!plan.devices.empty() && n != static_cast<int>(plan.hosts.size())) {
    throw HostsError("the hostfile's device matrix (\"rdma\") is for " +
                     std::to_string(plan.hosts.size()) +
                     " ranks, but the job has " + std::to_string(n));
  }
  std::vector<int> host_of;
  for (size_t h = 0; h < plan.hosts.size(); ++h) {
    for (int s = 0;
         s < plan.hosts[h].slots && static_cast<int>(host_of.size()) < n; ++s) {
      host_of.push_back(static_cast<int>(h));
    }
  }
  return host_of;
}

std::string coordinator_address(const HostPlan& plan,
                                const std::vector<int>& host_of, int port) {
  const Host& first = plan.hosts[static_cast<size_t>(host_of[0])];
  const std::string name = host_name(first.ssh);
  std::string addr;
  std::string how;
  if (!first.ips.empty()) {
    addr = first.ips[0];
    how = "its first \"ips\" entry";
  } else if (is_ip(name)) {
    addr = name;
  } else {
    std::string err;
    addr = resolve(name, err);
    if (addr.empty()) {
      throw HostsError("cannot resolve the first host '" + name +
                       "' for the coordinator (" + err +
                       "): give its address in the hostfile's \"ips\" or "
                       "--coordinator HOST:PORT");
    }
    how = "resolved here";
  }
  bool others = std::any_of(host_of.begin(), host_of.end(), [&](int h) {
    return host_name(plan.hosts[static_cast<size_t>(h)].ssh) != name;
  });
  if (others && is_loopback(addr)) {
    throw HostsError("the first host '" + name + "' has the loopback address " +
                     addr + (how.empty() ? "" : " (" + how + ")") +
                     ", which the other hosts cannot reach: give its address "
                     "in the hostfile's \"ips\" or --coordinator HOST:PORT");
  }
  if (addr.find(':') != std::string::npos) {
    addr = "[" + addr + "]";
  }
  return addr + ":" + std::to_string(port);
}

}  // namespace jaccl::run
