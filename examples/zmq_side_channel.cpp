// Copyright 2026 the jaccl authors.
// A user-defined side channel over ZeroMQ, plugged in through
// Config::set_all_gather_factory (like the example in MLX PR 3899, written
// for jaccl): rank 0 binds a ROUTER socket, every other rank connects a
// DEALER. For each all-gather, ranks 1.. send their input to rank 0, which
// assembles size * n bytes in rank order and sends them back to each.
//
//   export ZMQ_SIDE_CHANNEL=tcp://127.0.0.1:5555
//   JACCL_RANK=r JACCL_SIZE=n zmq_side_channel [--side-channel-only]
//
// Default: jaccl::init with the factory, then an all_sum. With
// --side-channel-only the program checks the all-gather alone (rank order,
// sizes, repeated calls) without building a group.
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "jaccl/jaccl.h"

namespace {

// Message from rank r for call seq: [header][payload].
struct Header {
  uint64_t seq;
  int32_t rank;
  int32_t pad;
  uint64_t n_bytes;
};

class ZmqAllGather {
 public:
  ZmqAllGather(int rank, int size, const std::string& endpoint,
               std::chrono::milliseconds timeout)
      : rank_(rank),
        size_(size),
        timeout_(timeout),
        sock_(ctx_,
              rank == 0 ? zmq::socket_type::router : zmq::socket_type::dealer) {
    sock_.set(zmq::sockopt::rcvtimeo, static_cast<int>(timeout.count()));
    sock_.set(zmq::sockopt::linger, 5000);  // let the last replies out
    if (rank == 0) {
      sock_.bind(endpoint);
    } else {
      sock_.connect(endpoint);
    }
  }

  void operator()(const char* src, char* dst, size_t n) {
    if (rank_ == 0) {
      gather_at_root(src, dst, n);
    } else {
      Header h{seq_, rank_, 0, n};
      sock_.send(zmq::buffer(&h, sizeof(h)), zmq::send_flags::sndmore);
      sock_.send(zmq::buffer(src, n), zmq::send_flags::none);
      zmq::message_t reply;
      if (!sock_.recv(reply, zmq::recv_flags::none)) {
        throw jaccl::TimeoutError("zmq side channel: rank " +
                                  std::to_string(rank_) +
                                  " got no reply from rank 0 within " +
                                  std::to_string(timeout_.count()) + " ms");
      }
      if (reply.size() != n * static_cast<size_t>(size_)) {
        throw jaccl::ProtocolError("zmq side channel: reply of wrong size");
      }
      std::memcpy(dst, reply.data(), reply.size());
    }
    ++seq_;
  }

 private:
  void gather_at_root(const char* src, char* dst, size_t n) {
    std::memcpy(dst, src, n);
    std::vector<zmq::message_t> who(static_cast<size_t>(size_));
    int missing = size_ - 1;
    auto deadline = std::chrono::steady_clock::now() + timeout_;
    while (missing > 0) {
      zmq::message_t id, head, body;
      if (!sock_.recv(id, zmq::recv_flags::none) ||
          std::chrono::steady_clock::now() > deadline) {
        std::string names;
        for (int r = 1; r < size_; ++r) {
          if (who[r].size() == 0)
            names += (names.empty() ? "" : ", ") + std::to_string(r);
        }
        throw jaccl::TimeoutError(
            "zmq side channel: timed out waiting for "
            "ranks " +
            names);
      }
      (void)sock_.recv(head, zmq::recv_flags::none);
      (void)sock_.recv(body, zmq::recv_flags::none);
      Header h{};
      if (head.size() != sizeof(h)) {
        throw jaccl::ProtocolError("zmq side channel: bad header");
      }
      std::memcpy(&h, head.data(), sizeof(h));
      if (h.rank <= 0 || h.rank >= size_ || h.seq != seq_ || h.n_bytes != n ||
          body.size() != n || who[h.rank].size() != 0) {
        throw jaccl::ProtocolError(
            "zmq side channel: unexpected message from rank " +
            std::to_string(h.rank) + " (call " + std::to_string(h.seq) + ", " +
            std::to_string(h.n_bytes) + " bytes)");
      }
      std::memcpy(dst + static_cast<size_t>(h.rank) * n, body.data(), n);
      who[h.rank] = std::move(id);
      --missing;
    }
    for (int r = 1; r < size_; ++r) {
      sock_.send(who[r], zmq::send_flags::sndmore);
      sock_.send(zmq::buffer(dst, n * static_cast<size_t>(size_)),
                 zmq::send_flags::none);
    }
  }

  int rank_;
  int size_;
  std::chrono::milliseconds timeout_;
  uint64_t seq_ = 0;
  zmq::context_t ctx_;
  zmq::socket_t sock_;
};

int env_int(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr) {
    std::cerr << "zmq_side_channel: set " << name << "\n";
    std::exit(2);
  }
  return std::atoi(v);
}

// Checks the all-gather alone: rank order, a few sizes, repeated calls.
bool check_side_channel(jaccl::AllGatherFn& f, int rank, int size) {
  for (size_t n :
       {size_t(0), size_t(1), size_t(4), size_t(300), size_t(70000)}) {
    for (int k = 0; k < 3; ++k) {
      std::vector<char> in(n), out(n * static_cast<size_t>(size));
      for (size_t i = 0; i < n; ++i)
        in[i] = static_cast<char>(rank * 31 + i + k);
      f(in.data(), out.data(), n);
      for (int r = 0; r < size; ++r) {
        for (size_t i = 0; i < n; ++i) {
          if (out[r * n + i] != static_cast<char>(r * 31 + i + k)) {
            std::cerr << "rank " << rank << ": slot " << r << " is wrong\n";
            return false;
          }
        }
      }
    }
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  const bool side_channel_only =
      argc > 1 && std::string(argv[1]) == "--side-channel-only";
  const int rank = env_int("JACCL_RANK");
  const int size = env_int("JACCL_SIZE");
  const char* ep = std::getenv("ZMQ_SIDE_CHANNEL");
  const std::string endpoint = ep ? ep : "tcp://127.0.0.1:5555";

  // Called once per init with (rank, size).
  jaccl::AllGatherFactory factory = [endpoint](int r, int s) {
    auto impl = std::make_shared<ZmqAllGather>(r, s, endpoint,
                                               std::chrono::seconds(30));
    return jaccl::AllGatherFn(
        [impl](const char* src, char* dst, size_t n) { (*impl)(src, dst, n); });
  };

  try {
    if (side_channel_only) {
      auto f = factory(rank, size);
      if (!check_side_channel(f, rank, size)) {
        return 1;
      }
      std::cout << "rank " << rank << ": side channel ok" << std::endl;
      return 0;
    }
    auto cfg = jaccl::Config::from_env().set_all_gather_factory(factory);
    auto group = jaccl::init(cfg, /*strict=*/true);
    std::vector<float> x(4, static_cast<float>(rank + 1)), y(4);
    group->all_sum(x.data(), y.data(), x.size() * sizeof(float),
                   jaccl::Float32);
    const float want = static_cast<float>(size * (size + 1) / 2);
    if (y[0] != want) {
      std::cerr << "rank " << rank << ": all_sum gave " << y[0] << ", want "
                << want << "\n";
      return 1;
    }
    std::cout << "rank " << rank << ": all_sum ok (" << y[0] << ") via "
              << group->backend_name() << std::endl;
    return 0;
  } catch (const jaccl::Error& e) {
    std::cerr << "rank " << rank << ": " << jaccl::to_string(e.kind())
              << " error: " << e.what() << "\n";
    return 1;
  }
}
