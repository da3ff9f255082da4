// Copyright 2026 the jaccl authors.
#include "collectives/net_group.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <string>

#include "collectives/all_to_all.h"
#include "collectives/exchange.h"
#include "collectives/mesh.h"
#include "collectives/op_runner.h"
#include "collectives/ring.h"
#include "collectives/ring_math.h"
#include "common/affinity.h"
#include "common/copy.h"
#include "common/error.h"
#include "common/reduce.h"

namespace jaccl::detail {

namespace {

// all_to_all's largest block for Bruck's rounds (bruck_max_block_): past
// it, sending each block up to log2(n) times costs more than the messages
// saved (BENCHMARKS.md, History).
constexpr size_t kBruckMaxBlock = size_t(4) << 10;
// Oversubscribed ranks yield (yield_plan) in ops of at most this many bytes
// a block (the ring: a rank's share): past it the ops are bound by the
// kernel's copies, and yielding ranks compete with its softirq threads (4
// ranks on 2 CPUs, all_to_all blocks of 256 / 512 KiB: 0.64-0.75x the time
// sleeping took; 1 / 2 MiB: 1.10-1.21x; ring all_sum of 128 / 512 KiB:
// 0.66 / 0.78x, 2 MiB level).
constexpr size_t kYieldMaxBlock = size_t(512) << 10;

// Ranks that outnumber their host's CPUs (as the cards told; unknown: no)
// wait by yielding while the gate allows, each going back to a CPU of its
// own share (the kernel stacks them otherwise): consecutive ranks share a
// CPU, as jaccl-run's shares do, so that half a ring's hops stay on one.
YieldPlan yield_plan(const Network& net) {
  YieldPlan p;
  if (net.host_cpus <= 0 || net.host_cpus >= net.host_ranks) {
    return p;
  }
  p.ranks = net.host_ranks;
  p.home_cpu = share_cpu(net.host_index, net.host_ranks);
  return p;
}

class NetGroup final : public Group {
 public:
  NetGroup(bool prefer_ring, Network net, bool p2p_only)
      : net_(std::move(net)),
        prefer_ring_(prefer_ring),
        p2p_only_(p2p_only),
        ops_(net_.rank, net_.size, who(net_.rank), net_.state, net_.op_timeout,
             net_.op_lock) {
    name_ = net_.transport + (prefer_ring_ ? "-ring" : "-mesh");
    if (net_.spin_us >= 0) {
      spin_us_ = net_.spin_us;
    }
    const int n = net_.size;
    links_.rank = net_.rank;
    links_.size = n;
    links_.state = net_.state.get();
    links_.local_send_completion = net_.local_send_completion;
    links_.wires.resize(n);
    links_.send_seq.assign(n, 0);
    links_.recv_seq.assign(n, 0);
    if (n < 1 || net_.rank < 0 || net_.rank >= n) {
      raise(ErrorKind::Internal, "network group: bad rank/size " +
                                     std::to_string(net_.rank) + "/" +
                                     std::to_string(n));
    }
    for (int p = 0; p < n; ++p) {
      if (p == net_.rank) {
        continue;
      }
      if (static_cast<int>(net_.links.size()) != n ||
          (net_.links[p].empty() && !p2p_only_)) {
        raise(ErrorKind::Internal, "network group: no link to a peer",
              {.rank = who(net_.rank), .peer = who(p)});
      }
      for (const auto& link : net_.links[p]) {
        links_.wires[p].push_back(link.get());
      }
      streams_ = std::max(streams_, links_.wires[p].size());
    }
    if (n > 1 && !p2p_only_) {
      ring_ = std::make_unique<RingEngine>(links_);
    }
  }

  int rank() override { return links_.rank; }
  int size() override { return links_.size; }

  const char* backend_name() const override {
    return links_.size == 1 ? "single" : name_.c_str();
  }

  void all_sum(const void* in, void* out, size_t n, int dtype) override {
    all_reduce(ReduceOp::Sum, OpKind::AllSum, in, out, n, dtype);
  }
  void all_max(const void* in, void* out, size_t n, int dtype) override {
    all_reduce(ReduceOp::Max, OpKind::AllMax, in, out, n, dtype);
  }
  void all_min(const void* in, void* out, size_t n, int dtype) override {
    all_reduce(ReduceOp::Min, OpKind::AllMin, in, out, n, dtype);
  }
  void all_reduce(const void* in, void* out, size_t n, int dtype,
                  ReduceOp op) override {
    all_reduce(op, all_reduce_kind(op), in, out, n, dtype);
  }

  void all_gather(const void* in, void* out, size_t n) override {
    ops_.run(call::all_gather(in, out, n), [&](const Deadline& dl) {
      const size_t total = n * links_.size;
      if (links_.size == 1) {
        move_bytes(out, in, n);
        return;
      }
      const bool use_ring =
          prefer_ring_ || (links_.size > kMeshGatherMaxRanks &&
                           total > mesh_max_bytes(links_.size));
      OpContext ctx = make_ctx(OpKind::AllGather, -1, n, use_ring, dl);
      ctx.desc.streams = static_cast<uint8_t>(streams_);
      if (use_ring) {
        ring_->run(ring::Mode::AllGather, ctx, ReduceOp::Sum, -1, in, out, n);
      } else {
        mesh::all_gather(links_, ctx, in, out, n);
      }
    });
  }

  void sum_scatter(const void* in, void* out, size_t n, int dtype) override {
    ops_.run(call::sum_scatter(in, out, n, dtype), [&](const Deadline& dl) {
      const size_t total = n * links_.size;
      if (links_.size == 1) {
        move_bytes(out, in, n);
        return;
      }
      const bool use_ring = prefer_ring_ || total > mesh_max_bytes(links_.size);
      OpContext ctx = make_ctx(OpKind::SumScatter, dtype, n, use_ring, dl);
      if (!use_ring) {
        mesh::sum_scatter(links_, ctx, dtype, in, out, n);
        return;
      }
      // The ring writes out while it still reads in: go through scratch
      // if they overlap.
      const bool overlap = overlaps(in, total, out, n);
      if (overlap && tmp_.size() < n) {
        tmp_.resize(n);
      }
      void* dst = overlap ? tmp_.data() : out;
      ring_->run(ring::Mode::ReduceScatter, ctx, ReduceOp::Sum, dtype, in, dst,
                 n);
      if (overlap) {
        copy_bytes(out, dst, n);
      }
    });
  }

  void send(const void* in, size_t n, int dst) override {
    ops_.run(call::send(in, n, dst), [&](const Deadline& dl) {
      check_link("send", dst);
      OpContext ctx = make_ctx(OpKind::SendRecv, -1, n, false, dl);
      mesh::send(links_, ctx, in, n, dst);
    });
  }

  void recv(void* out, size_t n, int src) override {
    ops_.run(call::recv(out, n, src), [&](const Deadline& dl) {
      check_link("recv", src);
      OpContext ctx = make_ctx(OpKind::SendRecv, -1, n, false, dl);
      mesh::recv(links_, ctx, out, n, src);
    });
  }

  void barrier() override {
    ops_.run(call::barrier(), [&](const Deadline& dl) {
      if (links_.size == 1) {
        return;
      }
      OpContext ctx = make_ctx(OpKind::Barrier, -1, 0, false, dl);
      mesh::barrier(links_, ctx);
    });
  }

  void broadcast(void* buf, size_t n, int root) override {
    ops_.run(call::broadcast(buf, n, root), [&](const Deadline& dl) {
      if (links_.size == 1) {
        return;
      }
      OpContext ctx = make_ctx(OpKind::Broadcast, -1, n, false, dl);
      ctx.desc.aux = static_cast<uint32_t>(root);
      mesh::broadcast(links_, ctx, buf, n, root);
    });
  }

  void all_to_all(const void* in, void* out, size_t n) override {
    ops_.run(call::all_to_all(in, out, n), [&](const Deadline& dl) {
      if (links_.size == 1) {
        copy_bytes(out, in, n);
        return;
      }
      OpContext ctx = make_ctx(OpKind::AllToAll, -1, n, false, dl);
      ctx.desc.streams = static_cast<uint8_t>(streams_);
      if (n <= bruck_max_block_) {
        ctx.desc.algo = Algo::Bruck;
        a2a::all_to_all_bruck(links_, ctx, static_cast<const char*>(in),
                              static_cast<char*>(out), n, tmp_);
        return;
      }
      a2a::all_to_all(links_, ctx, static_cast<const char*>(in),
                      static_cast<char*>(out), n);
    });
  }

  void all_to_allv(const void* in, std::span<const size_t> send, void* out,
                   std::span<const size_t> recv) override {
    ops_.run(call::all_to_allv(in, send, out, recv), [&](const Deadline& dl) {
      all_to_allv_body(static_cast<const char*>(in), send,
                       static_cast<char*>(out), recv, dl);
    });
  }

  // The hierarchical group's cross-host pairs (net_exchange).
  void exchange(OpKind kind, uint64_t n_bytes,
                std::span<const a2a::Block> blocks) {
    const OpCall c{.kind = kind, .name = op_kind_name(kind), .internal = true};
    ops_.run(c, [&](const Deadline& dl) {
      for (const a2a::Block& b : blocks) {
        check_peer_rank(links_.rank, links_.size, c.name, b.peer, "peer",
                        who(links_.rank));
        check_link(c.name, b.peer);
      }
      OpContext ctx = make_ctx(kind, -1, n_bytes, false, dl, /*internal=*/true);
      ctx.desc.streams = static_cast<uint8_t>(streams_);
      a2a::exchange(links_, ctx, blocks);
    });
  }

 private:
  void all_reduce(ReduceOp op, OpKind kind, const void* in, void* out, size_t n,
                  int dtype) {
    ops_.run(
        call::all_reduce(kind, in, out, n, dtype), [&](const Deadline& dl) {
          if (links_.size == 1) {
            copy_bytes(out, in, n);
            return;
          }
          const bool use_ring = prefer_ring_ || n > mesh_max_bytes(links_.size);
          OpContext ctx = make_ctx(kind, dtype, n, use_ring, dl);
          if (use_ring) {
            ring_->run(ring::Mode::AllReduce, ctx, op, dtype, in, out, n);
          } else {
            mesh::all_reduce(links_, ctx, op, dtype, in, out, n);
          }
        });
  }

  void all_to_allv_body(const char* src, std::span<const size_t> send,
                        char* dst, std::span<const size_t> recv,
                        const Deadline& dl) {
    const int r = links_.rank;
    const auto ur = static_cast<size_t>(r);
    // Headers carry the size of a row of the counts matrix (the same on
    // every rank).
    OpContext ctx = make_ctx(OpKind::AllToAllv, -1,
                             2 * links_.size * sizeof(uint64_t), false, dl);
    ctx.desc.streams = static_cast<uint8_t>(streams_);
    const size_t sent = std::accumulate(send.begin(), send.end(), size_t{0});
    if (sent / static_cast<size_t>(links_.size) > kYieldMaxBlock) {
      ctx.yield = {};  // judged by this rank's mean block (make_ctx's rule)
    }
    // Bruck's rounds under all_to_all's rule, judged by the previous
    // call's mean block (its matrix, kept in v_; none before the first
    // call): every rank holds the same matrix after a call, so every rank
    // decides alike (a rank's own counts would not).
    const auto cells =
        static_cast<uint64_t>(links_.size) * static_cast<uint64_t>(links_.size);
    const bool bruck =
        bruck_max_block_ != 0 && !v_.counts.empty() &&
        a2a::Counts{v_.counts.data(), links_.size}.total() / cells <=
            bruck_max_block_;
    ctx.desc.algo = bruck ? Algo::Bruck : Algo::Mesh;
    const a2a::Counts c =
        bruck ? a2a::all_to_allv_bruck(links_, ctx, src, send, dst, recv, v_)
              : a2a::all_to_allv(links_, ctx, src, send, dst, recv, v_);
    ops_.agreed([&] {
      a2a::check_matrix(c, who(r), [this](int m) { return who(m); });
    });
    copy_bytes(dst + v_.roff[ur], src + v_.soff[ur], send[ur]);
  }

  OpContext make_ctx(OpKind kind, int dtype, size_t n, bool use_ring,
                     const Deadline& dl, bool internal = false) const {
    if (p2p_only_ && kind != OpKind::SendRecv && !internal) {
      raise(ErrorKind::Internal,
            std::string(op_kind_name(kind)) + " on a send/recv-only group",
            {.rank = who(links_.rank)});
    }
    OpContext ctx;
    ctx.rank = who(links_.rank);
    ctx.names = &net_.names;
    ctx.name = op_kind_name(kind);
    ctx.desc.kind = kind;
    ctx.desc.dtype = dtype;
    ctx.desc.n_bytes = n;
    ctx.desc.algo = use_ring ? Algo::Ring : Algo::Mesh;
    ctx.desc.streams =
        use_ring ? static_cast<uint8_t>(ring_->wires()) : uint8_t{1};
    ctx.deadline = dl;
    ctx.state = net_.state.get();
    ctx.spin_us = use_ring ? 0 : spin_us_;  // wire threads never spin
    // The ring moves a rank's share of the buffer at a time.
    if ((use_ring ? n / static_cast<size_t>(net_.size) : n) <= kYieldMaxBlock) {
      ctx.yield = yield_;
    }
    return ctx;
  }

  int who(int member) const {
    return net_.names.empty() ? member
                              : net_.names[static_cast<size_t>(member)];
  }

  // A send/recv-only group has no wires to some peers.
  void check_link(const char* op, int peer) const {
    if (links_.wires[static_cast<size_t>(peer)].empty()) {
      raise(ErrorKind::Internal,
            std::string(op) + ": no " + net_.transport + " link to " +
                rank_ref(who(peer)),
            {.rank = who(links_.rank), .peer = who(peer)});
    }
  }

  Network net_;
  std::string name_;
  bool prefer_ring_ = false;
  bool p2p_only_ = false;
  // Small ops poll briefly before sleeping, unless this host's members
  // outnumber the CPUs they may use between them (then spinning steals a
  // peer's); unknown, the whole group against this rank's CPUs.
  int spin_us_ = (net_.host_cpus > 0 ? net_.host_cpus >= net_.host_ranks
                                     : allowed_cpu_count() >= net_.size)
                     ? 20
                     : 0;
  // Ranks that outnumber the CPUs wait by yielding to each other while
  // nothing else wants the CPUs (YieldGate): 4 ranks on 2 CPUs that slept
  // in poll left a quarter of the CPU time idle, as a woken rank queued
  // behind its waker (BENCHMARKS.md, History).
  YieldPlan yield_ = yield_plan(net_);
  // all_to_all blocks up to this size go in Bruck's rounds: when every
  // member is on this host (so every member decides alike) and they
  // outnumber its CPUs, the job is bound by the kernel work of each
  // loopback message on shared cores, and fewer messages win (4 ranks on 2
  // CPUs: 8 per call instead of 12; 3 ranks send 2 either way). 0: never.
  size_t bruck_max_block_ = net_.size >= 4 && net_.host_ranks == net_.size &&
                                    net_.host_cpus > 0 &&
                                    net_.host_cpus < net_.host_ranks
                                ? kBruckMaxBlock
                                : 0;
  OpRunner ops_;  // every op's lock, checks, deadline and failure rule
  Links links_;
  std::vector<char> tmp_;
  size_t streams_ = 1;                // wires per pair (all_to_all headers)
  a2a::VState v_;                     // all_to_allv's counts and scratch
  std::unique_ptr<RingEngine> ring_;  // last: its threads stop first
};

}  // namespace

void net_exchange(Group& g, OpKind kind, uint64_t n_bytes,
                  std::span<const a2a::Block> blocks) {
  auto* net = dynamic_cast<NetGroup*>(&g);
  if (net == nullptr) {
    raise(ErrorKind::Internal,
          std::string("net_exchange on a ") + g.backend_name() + " group");
  }
  net->exchange(kind, n_bytes, blocks);
}

std::shared_ptr<Group> make_net_group(const Config& cfg, Network net,
                                      bool p2p_only) {
  return std::make_shared<NetGroup>(cfg.get_prefer_ring(), std::move(net),
                                    p2p_only);
}

}  // namespace jaccl::detail
