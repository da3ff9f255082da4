// Copyright 2026 the jaccl authors.
// Which local address the TCP data plane listens on.
//
// The rule, in order:
//   1. JACCL_IFNAME (Config::set_interface) when set:
//        - an interface name ("eth0", "ens5"): its first IPv4 address
//          (getifaddrs); an interface that does not exist, or has no IPv4
//          address, is a ConfigError naming it;
//        - otherwise a literal IPv4 or IPv6 address, used as given (binding
//          fails with an IoError naming it if it is not local).
//   2. Else, when a coordinator is configured (JACCL_COORDINATOR): the source
//      address the kernel's routing table picks toward the coordinator host
//      (a UDP connect() to it reveals that address without sending anything).
//      A coordinator on 127.0.0.1 therefore gives 127.0.0.1.
//   3. Else (a user side channel and no coordinator): loopback, 127.0.0.1.
//      Multi-host jobs with their own side channel must set JACCL_IFNAME; a
//      peer in another network namespace that is handed a loopback address
//      is told so in a ConfigError instead of timing out.
// The port is always ephemeral (bound to port 0, published in the card).
// A rank with JACCL_LISTEN=0 opens no listening socket at all.
#pragma once

#include <optional>
#include <string>

#include "jaccl/jaccl.h"

namespace jaccl::detail {

struct ListenAddress {
  std::string host;  // numeric IPv4/IPv6 address
  std::string why;   // how it was chosen, for logs ("JACCL_IFNAME=eth0")
};

// Applies the rule above. Throws ConfigError for an unknown interface, Io
// when the coordinator cannot be resolved or routed to.
ListenAddress choose_listen_address(const Config& cfg);

// First IPv4 address of a local interface; nullopt if it has none. Throws
// ConfigError naming ifname if no such interface exists.
std::optional<std::string> interface_ipv4(const std::string& ifname,
                                          int rank = -1);

// The name of the local interface holding IPv4 address host ("" if none).
std::string interface_of_ipv4(const std::string& host);

// True if s is a numeric IPv4 or IPv6 address.
bool is_ip_literal(const std::string& s);

// True for 127.0.0.0/8 and ::1.
bool is_loopback_address(const std::string& host);

// The local source address the routing table picks toward host (numeric or a
// name). Sends nothing.
std::string route_source_address(const std::string& host, int rank = -1);

}  // namespace jaccl::detail
