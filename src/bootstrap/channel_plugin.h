// Copyright 2026 the jaccl authors.
// The side channels with large libraries -- mpi:// (Open MPI and its
// stack), pmix:// (libpmix) and redis:// (hiredis) -- are plugins of the
// shared libjaccl: libjaccl-mpi.so, libjaccl-pmix.so and libjaccl-redis.so,
// installed beside it and opened with dlopen the first time the channel is
// asked for (as libfabric is for the ofi transport). Linked in, those
// libraries made every process that loads libjaccl pay their relocations
// at start-up, used or not: most of a rank's start-up CPU, paid a thousand
// times in a row when a thousand ranks start on a few cores.
//
// A static libjaccl links the channels in instead (no plugins). Each
// plugin exports one C function, jaccl_<name>_plugin(), returning this
// table (the entries of the other channels null).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "bootstrap/redis_channel.h"
#include "bootstrap/store_channel.h"
#include "common/deadline.h"
#include "jaccl/side_channel.h"

namespace jaccl::detail {

// Bumped whenever this table or what it passes changes shape.
inline constexpr uint32_t kChannelPluginAbi = 1;

struct ChannelPlugin {
  uint32_t abi = kChannelPluginAbi;
  uint32_t bytes = sizeof(ChannelPlugin);
  bool (*mpi_rank_size)(int* rank, int* size) = nullptr;
  AllGatherFn (*make_mpi_channel)(int rank, int size) = nullptr;
  bool (*pmix_rank_size)(int* rank, int* size) = nullptr;
  AllGatherFn (*make_pmix_channel)(int rank, int size,
                                   Millis timeout) = nullptr;
  std::shared_ptr<RendezvousStore> (*make_redis_store)(
      const RedisOptions& options) = nullptr;
};

// The plugin `name` ("mpi", "pmix", "redis"), opened once (later calls
// return the same table or the same failure); nullptr with *why (the file
// tried and dlerror's text) when it cannot be opened or is of another ABI.
const ChannelPlugin* channel_plugin(const std::string& name, std::string* why);

}  // namespace jaccl::detail
