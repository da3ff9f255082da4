// Copyright 2026 the jaccl authors.
#include "support/group_kinds.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>

#include "collectives/hier_group.h"
#include "collectives/net_group.h"
#include "collectives/shm_group.h"
#include "common/affinity.h"
#include "common/net.h"
#include "transport/tcp_endpoint.h"

namespace jaccl::test {

using namespace detail;

namespace {

void check(bool ok, const char* call) {
  if (!ok) {
    throw std::runtime_error(std::string(call) +
                             " failed: " + std::strerror(errno));
  }
}

// A connected pair of non-blocking stream sockets.
std::pair<Fd, Fd> socket_pair(bool tcp) {
  int sv[2];
  if (!tcp) {
    check(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0,
          "socketpair");
  } else {
    Fd lis(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    check(::bind(lis.get(), reinterpret_cast<sockaddr*>(&a), len) == 0, "bind");
    check(::listen(lis.get(), 1) == 0, "listen");
    check(::getsockname(lis.get(), reinterpret_cast<sockaddr*>(&a), &len) == 0,
          "getsockname");
    sv[0] = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    check(::connect(sv[0], reinterpret_cast<sockaddr*>(&a), len) == 0,
          "connect");
    sv[1] = ::accept4(lis.get(), nullptr, nullptr, SOCK_CLOEXEC);
    check(sv[1] >= 0, "accept4");
    set_nodelay(sv[0]);
    set_nodelay(sv[1]);
  }
  set_nonblocking(sv[0]);
  set_nonblocking(sv[1]);
  return {Fd(sv[0]), Fd(sv[1])};
}

}  // namespace

std::vector<ControlBlock> socket_blocks(
    int n, const SocketOptions& o,
    const std::function<bool(int, int)>& linked) {
  std::vector<ControlBlock> conns(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    auto& c = conns[static_cast<size_t>(r)];
    c.rank = r;
    c.size = n;
    c.wires.resize(static_cast<size_t>(n));
    c.op_timeout = o.op_timeout;
  }
  for (int a = 0; a < n; ++a) {
    for (int b = a + 1; b < n; ++b) {
      for (int w = 0; linked(a, b) && w < o.wires; ++w) {
        auto [x, y] = socket_pair(o.tcp);
        conns[static_cast<size_t>(a)].wires[static_cast<size_t>(b)].push_back(
            std::move(x));
        conns[static_cast<size_t>(b)].wires[static_cast<size_t>(a)].push_back(
            std::move(y));
      }
    }
  }
  return conns;
}

Groups shm_groups(int n, std::vector<int> names,
                  std::vector<std::shared_ptr<FailureState>> states) {
  static std::atomic<int> serial{0};
  const std::string name = "/jaccl-test-coll-" + std::to_string(::getpid()) +
                           "-" + std::to_string(serial++);
  const ShmLayout layout = ShmLayout::for_budget(n, size_t(4) << 20);
  ShmSegment owner = ShmSegment::create(name, layout.total(), 0);
  ShmChannel::init_segment(owner.data(), layout, 0,
                           ShmGroup::default_chunk_bytes());
  Groups groups;
  for (int r = 0; r < n; ++r) {
    auto state = states.empty() ? std::make_shared<FailureState>()
                                : states[static_cast<size_t>(r)];
    groups.push_back(std::make_shared<ShmGroup>(
        ShmChannel(r, n, names, ShmSegment::open(name, layout.total(), r),
                   layout, allowed_cpu_count(), std::move(state), nullptr),
        Millis(30000)));
  }
  owner.unlink();
  return groups;
}

Groups hier_groups(const std::vector<int>& host_of) {
  const int n = static_cast<int>(host_of.size());
  const HostMap map = HostMap::from_host_ids(host_of);
  std::vector<std::shared_ptr<FailureState>> states;
  for (int r = 0; r < n; ++r) {
    states.push_back(std::make_shared<FailureState>());
  }
  Groups local(static_cast<size_t>(n)), leaders(static_cast<size_t>(n));
  for (const std::vector<int>& members : map.hosts) {
    if (members.size() < 2) {
      continue;
    }
    std::vector<std::shared_ptr<FailureState>> st;
    for (int m : members) {
      st.push_back(states[static_cast<size_t>(m)]);
    }
    Groups g = shm_groups(static_cast<int>(members.size()), members, st);
    for (size_t i = 0; i < members.size(); ++i) {
      local[static_cast<size_t>(members[i])] = g[i];
    }
  }
  const std::vector<int> heads = map.leaders();
  const SocketOptions o{.wires = 2, .tcp = true};
  std::vector<ControlBlock> lc =
      socket_blocks(static_cast<int>(heads.size()), o);
  for (size_t h = 0; h < heads.size(); ++h) {
    lc[h].names = heads;
    lc[h].state = states[static_cast<size_t>(heads[h])];
    leaders[static_cast<size_t>(heads[h])] =
        make_net_group(Config(), make_tcp_network(std::move(lc[h])));
  }
  auto is_head = [&](int r) {
    return map.index_of[static_cast<size_t>(r)] == 0;
  };
  std::vector<ControlBlock> pc = socket_blocks(n, o, [&](int a, int b) {
    return map.host_of[static_cast<size_t>(a)] !=
               map.host_of[static_cast<size_t>(b)] &&
           !(is_head(a) && is_head(b));
  });
  Groups groups;
  for (int r = 0; r < n; ++r) {
    const auto ur = static_cast<size_t>(r);
    pc[ur].state = states[ur];
    auto p2p = make_net_group(Config(), make_tcp_network(std::move(pc[ur])),
                              /*p2p_only=*/true);
    groups.push_back(std::make_shared<HierGroup>(r, map, local[ur], leaders[ur],
                                                 p2p, states[ur]));
  }
  return groups;
}

Config::DeviceMatrix loopback_devices(int n) {
  Config::DeviceMatrix m(
      static_cast<size_t>(n),
      std::vector<std::vector<std::string>>(static_cast<size_t>(n)));
  for (int r = 0; r < n; ++r) {
    for (int p = 0; p < n; ++p) {
      if (p != r) {
        m[static_cast<size_t>(r)][static_cast<size_t>(p)] = {"lo"};
      }
    }
  }
  return m;
}

}  // namespace jaccl::test
