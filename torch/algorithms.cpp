// Copyright 2026 the jaccl authors.
#include "algorithms.h"

#include <string>
#include <utility>

#include "common/copy.h"
#include "jaccl/error.h"

namespace jaccl_torch {

void all_to_all_blocks(jaccl::Group& g, const std::vector<PeerBlock>& blocks) {
  const int size = g.size();
  if (static_cast<int>(blocks.size()) != size) {
    // A local usage error: no peer involved, and the rank a torch caller
    // knows is the process group's, so the message names none.
    jaccl::ErrorInfo info;
    info.detail = "all_to_all: " + std::to_string(blocks.size()) +
                  " blocks for a group of size " + std::to_string(size);
    throw jaccl::UsageError(std::move(info));
  }
  std::vector<size_t> send(blocks.size()), recv(blocks.size());
  size_t send_total = 0, recv_total = 0;
  for (size_t r = 0; r < blocks.size(); ++r) {
    send[r] = blocks[r].send_bytes;
    recv[r] = blocks[r].recv_bytes;
    send_total += send[r];
    recv_total += recv[r];
  }
  std::vector<char> in(send_total), out(recv_total);
  size_t at = 0;
  for (const PeerBlock& b : blocks) {
    jaccl::detail::copy_bytes(in.data() + at, b.send, b.send_bytes);
    at += b.send_bytes;
  }
  g.all_to_allv(in.data(), send, out.data(), recv);
  at = 0;
  for (const PeerBlock& b : blocks) {
    jaccl::detail::copy_bytes(b.recv, out.data() + at, b.recv_bytes);
    at += b.recv_bytes;
  }
}

}  // namespace jaccl_torch
