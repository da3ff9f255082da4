// Copyright 2026 the jaccl authors.
#include "transport/interfaces.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <vector>

#include "common/error.h"
#include "common/net.h"

namespace jaccl::detail {

bool is_ip_literal(const std::string& s) {
  in_addr a4{};
  in6_addr a6{};
  return ::inet_pton(AF_INET, s.c_str(), &a4) == 1 ||
         ::inet_pton(AF_INET6, s.c_str(), &a6) == 1;
}

bool is_loopback_address(const std::string& host) {
  in_addr a4{};
  if (::inet_pton(AF_INET, host.c_str(), &a4) == 1) {
    return (ntohl(a4.s_addr) >> 24) == 127;
  }
  in6_addr a6{};
  if (::inet_pton(AF_INET6, host.c_str(), &a6) == 1) {
    return IN6_IS_ADDR_LOOPBACK(&a6);
  }
  return host == "localhost";
}

std::string interface_of_ipv4(const std::string& host) {
  in_addr want{};
  if (::inet_pton(AF_INET, host.c_str(), &want) != 1) {
    return "";
  }
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) {
    return "";
  }
  std::string name;
  for (ifaddrs* p = list; p != nullptr && name.empty(); p = p->ifa_next) {
    if (p->ifa_name != nullptr && p->ifa_addr != nullptr &&
        p->ifa_addr->sa_family == AF_INET &&
        reinterpret_cast<const sockaddr_in*>(p->ifa_addr)->sin_addr.s_addr ==
            want.s_addr) {
      name = p->ifa_name;
    }
  }
  ::freeifaddrs(list);
  return name;
}

std::optional<std::string> interface_ipv4(const std::string& ifname, int rank) {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) {
    raise(ErrorKind::Io, "getifaddrs() failed",
          {.rank = rank, .sys_errno = errno});
  }
  bool found = false;
  std::optional<std::string> addr;
  std::vector<std::string> names;
  for (ifaddrs* p = list; p != nullptr; p = p->ifa_next) {
    if (p->ifa_name == nullptr) {
      continue;
    }
    if (std::find(names.begin(), names.end(), p->ifa_name) == names.end()) {
      names.emplace_back(p->ifa_name);
    }
    if (ifname != p->ifa_name) {
      continue;
    }
    found = true;
    if (!addr && p->ifa_addr != nullptr && p->ifa_addr->sa_family == AF_INET) {
      char buf[INET_ADDRSTRLEN] = {0};
      ::inet_ntop(AF_INET,
                  &reinterpret_cast<const sockaddr_in*>(p->ifa_addr)->sin_addr,
                  buf, sizeof(buf));
      addr = buf;
    }
  }
  ::freeifaddrs(list);
  if (!found) {
    std::string have;
    for (size_t i = 0; i < names.size(); ++i) {
      have += (i ? ", " : "") + names[i];
    }
    raise(ErrorKind::Config,
          "JACCL_IFNAME='" + ifname +
              "': no such network interface and not an IP address (this "
              "host has: " +
              have + ")",
          {.rank = rank});
  }
  return addr;
}

std::string route_source_address(const std::string& host, int rank) {
  SockAddr to = resolve(HostPort{host, 9}, rank);
  Fd fd(::socket(to.ss.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) {
    raise(ErrorKind::Io, "socket(SOCK_DGRAM) failed",
          {.rank = rank, .sys_errno = errno});
  }
  // connect() on a UDP socket only selects the route; nothing is sent.
  if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&to.ss), to.len) !=
      0) {
    raise(ErrorKind::Io,
          "no route to the coordinator host to pick a listen address from "
          "(set JACCL_IFNAME)",
          {.rank = rank, .address = host, .sys_errno = errno});
  }
  return host_of(local_address(fd.get()));
}

ListenAddress choose_listen_address(const Config& cfg) {
  const int rank = cfg.get_rank();
  const std::string& iface = cfg.get_interface();
  if (!iface.empty()) {
    if (is_ip_literal(iface)) {
      return {iface, "JACCL_IFNAME=" + iface + " (an address)"};
    }
    auto addr = interface_ipv4(iface, rank);
    if (!addr) {
      raise(ErrorKind::Config,
            "JACCL_IFNAME='" + iface +
                "': the interface has no IPv4 address (give an address "
                "instead)",
            {.rank = rank});
    }
    return {*addr, "JACCL_IFNAME=" + iface};
  }
  if (!cfg.get_coordinator().empty()) {
    HostPort hp = parse_host_port(cfg.get_coordinator(), "coordinator");
    return {route_source_address(hp.host, rank),
            "route toward the coordinator " + hp.host};
  }
  return {"127.0.0.1", "loopback (no JACCL_IFNAME, no coordinator)"};
}

}  // namespace jaccl::detail
