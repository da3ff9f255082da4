// Copyright 2026 the jaccl authors.
#include "transport/tcp_card.h"

#include <unistd.h>

#include <climits>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "common/affinity.h"
#include "common/error.h"
#include "common/net.h"
#include "transport/interfaces.h"

namespace jaccl::detail {

namespace {

constexpr int kCardVersion = 1;

// nlohmann's get<int> converts a float or an out-of-range integer with a C++
// cast, which is undefined for 2e19 (the fuzzer found it); read integers
// only when they are integers that fit.
int int_field(const nlohmann::json& j, const char* key) {
  const nlohmann::json& v = j.at(key);
  if (v.is_number_unsigned() && v.get<uint64_t>() <= INT_MAX) {
    return static_cast<int>(v.get<uint64_t>());
  }
  if (v.is_number_integer() && !v.is_number_unsigned() &&
      v.get<int64_t>() >= INT_MIN && v.get<int64_t>() <= INT_MAX) {
    return static_cast<int>(v.get<int64_t>());
  }
  throw std::invalid_argument(std::string("\"") + key + "\" is " + v.dump() +
                              ", not an integer in int's range");
}

std::string read_first_line(const char* path) {
  std::ifstream f(path);
  std::string line;
  std::getline(f, line);
  return line;
}

std::string read_link(const char* path) {
  char buf[256];
  ssize_t n = ::readlink(path, buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

}  // namespace

std::string TcpCard::describe() const {
  std::string s = "rank " + std::to_string(rank) + " (" +
                  (hostname.empty() ? "?" : hostname) + ", ";
  if (listens()) {
    s += HostPort{addresses.front(), port}.str();
  } else {
    s += "not listening";
  }
  return s + ")";
}

TcpCard local_card(int rank, int wires, bool wires_set) {
  TcpCard c;
  c.rank = rank;
  c.wires = wires;
  c.wires_set = wires_set;
  char host[HOST_NAME_MAX + 1] = {0};
  if (::gethostname(host, sizeof(host) - 1) == 0) {
    c.hostname = host;
  }
  c.boot_id = read_first_line("/proc/sys/kernel/random/boot_id");
  c.ipc_ns = read_link("/proc/self/ns/ipc");
  c.net_ns = read_link("/proc/self/ns/net");
  c.pid = static_cast<int>(::getpid());
  c.cpus = allowed_cpu_count();
  return c;
}

std::string encode_card(const TcpCard& c) {
  nlohmann::json j = {
      {"v", kCardVersion}, {"rank", c.rank},     {"addrs", c.addresses},
      {"port", c.port},    {"wires", c.wires},   {"host", c.hostname},
      {"boot", c.boot_id}, {"ipc_ns", c.ipc_ns}, {"net_ns", c.net_ns},
      {"pid", c.pid},      {"cpus", c.cpus},     {"wires_set", c.wires_set},
  };
  if (!c.ofi.empty()) {
    j["ofi"] = c.ofi;
  }
  return j.dump();
}

TcpCard decode_card(std::string_view bytes, int from, int me) {
  auto bad = [&](const Detail& why) -> TcpCard {
    raise(ErrorKind::Protocol,
          rank_ref(from) + " published a malformed TCP card (" + why + ")",
          {.rank = me, .peer = from});
  };
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(bytes);
  } catch (const nlohmann::json::exception& e) {
    return bad(std::string("not JSON: ") + e.what());
  }
  TcpCard c;
  try {
    if (!j.is_object()) {
      return bad("not a JSON object");
    }
    if (int_field(j, "v") != kCardVersion) {
      return bad("card version " + j.at("v").dump() + ", expected " +
                 std::to_string(kCardVersion));
    }
    c.rank = int_field(j, "rank");
    c.addresses = j.at("addrs").get<std::vector<std::string>>();
    int port = int_field(j, "port");
    if (port < 0 || port > 65535) {
      return bad("port " + std::to_string(port) + " out of range");
    }
    c.port = static_cast<uint16_t>(port);
    c.wires = int_field(j, "wires");
    c.hostname = j.at("host").get<std::string>();
    c.boot_id = j.at("boot").get<std::string>();
    c.ipc_ns = j.at("ipc_ns").get<std::string>();
    c.net_ns = j.at("net_ns").get<std::string>();
    c.pid = int_field(j, "pid");
    if (j.contains("cpus")) {
      c.cpus = int_field(j, "cpus");
    }
    if (j.contains("wires_set")) {
      c.wires_set = j.at("wires_set").get<bool>();
    }
    if (j.contains("ofi")) {
      c.ofi = j.at("ofi").get<std::vector<std::string>>();
    }
  } catch (const nlohmann::json::exception& e) {
    return bad(e.what());
  } catch (const std::invalid_argument& e) {
    return bad(e.what());
  }
  if (c.rank != from) {
    return bad("it claims to be " + rank_ref(c.rank));
  }
  if (c.wires < 1 || c.wires > 64) {
    return bad("wires " + std::to_string(c.wires) + " out of range 1..64");
  }
  if (c.cpus < 0 || c.cpus > (1 << 20)) {
    return bad("cpus " + std::to_string(c.cpus) + " out of range");
  }
  if ((c.port == 0) != c.addresses.empty()) {
    return bad("a port without an address or an address without a port");
  }
  for (const auto& a : c.addresses) {
    if (!is_ip_literal(a)) {
      return bad("'" + a + "' is not a numeric IP address");
    }
  }
  return c;
}

std::vector<TcpCard> exchange_cards(SideChannel& sc, const TcpCard& mine) {
  auto raw = sc.all_gather_bytes(encode_card(mine));
  std::vector<TcpCard> cards;
  cards.reserve(raw.size());
  for (size_t r = 0; r < raw.size(); ++r) {
    cards.push_back(decode_card(raw[r], static_cast<int>(r), sc.rank()));
    if (cards.back().wires != mine.wires) {
      raise(ErrorKind::Config,
            rank_ref(static_cast<int>(r)) + " uses " +
                std::to_string(cards.back().wires) +
                " wires per peer (JACCL_WIRES) but this rank uses " +
                std::to_string(mine.wires),
            {.rank = sc.rank(), .peer = static_cast<int>(r)});
    }
  }
  return cards;
}

}  // namespace jaccl::detail
