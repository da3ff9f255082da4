// Copyright 2026 the jaccl authors.
// The entry points of mpi://, pmix:// and redis:// in a libjaccl whose
// channels are plugins (channel_plugin.h): each forwards to the plugin,
// opened on first use. A static libjaccl compiles the channels themselves
// instead, and this file to nothing.
#include "bootstrap/channel_plugin.h"
#include "bootstrap/mpi_channel.h"
#include "bootstrap/pmix_channel.h"
#include "bootstrap/redis_channel.h"

#if JACCL_CHANNEL_PLUGINS

#include "common/env.h"
#include "common/error.h"

namespace jaccl::detail {

namespace {

// The plugin, or a ConfigError that says how to get it.
const ChannelPlugin& need(const std::string& name, bool built,
                          const char* package, const ErrorContext& ctx) {
  if (!built) {
    raise(ErrorKind::Config,
          "this build has no " + name + ":// side channel: install " + package +
              " (or run scripts/setup.sh) and reconfigure",
          ctx);
  }
  std::string why;
  const ChannelPlugin* p = channel_plugin(name, &why);
  if (p == nullptr) {
    raise(ErrorKind::Config, name + ":// side channel: " + why, ctx);
  }
  return *p;
}

// Whether configure found each library (and so built its plugin).
#if JACCL_HAVE_MPI
constexpr bool kMpi = true;
#else
constexpr bool kMpi = false;
#endif
#if JACCL_HAVE_PMIX
constexpr bool kPmix = true;
#else
constexpr bool kPmix = false;
#endif
#if JACCL_HAVE_REDIS
constexpr bool kRedis = true;
#else
constexpr bool kRedis = false;
#endif

}  // namespace

bool mpi_channel_built() {
  return kMpi && channel_plugin("mpi", nullptr) != nullptr;
}

bool mpi_rank_size(int* rank, int* size) {
  return mpi_channel_built() &&
         channel_plugin("mpi", nullptr)->mpi_rank_size(rank, size);
}

AllGatherFn make_mpi_channel(int rank, int size) {
  return need("mpi", kMpi, "libopenmpi-dev and openmpi-bin",
              {.rank = rank, .address = "mpi://"})
      .make_mpi_channel(rank, size);
}

bool pmix_launcher_present() {
  return env_get(EnvVar::PmixNamespace) != nullptr;
}

bool pmix_channel_built() {
  return kPmix && channel_plugin("pmix", nullptr) != nullptr;
}

bool pmix_rank_size(int* rank, int* size) {
  return pmix_launcher_present() && pmix_channel_built() &&
         channel_plugin("pmix", nullptr)->pmix_rank_size(rank, size);
}

AllGatherFn make_pmix_channel(int rank, int size, Millis timeout) {
  return need("pmix", kPmix, "libpmix-dev",
              {.rank = rank, .address = "pmix://"})
      .make_pmix_channel(rank, size, timeout);
}

bool redis_channel_built() {
  return kRedis && channel_plugin("redis", nullptr) != nullptr;
}

std::shared_ptr<RendezvousStore> make_redis_store(const RedisOptions& o) {
  return need(
             "redis", kRedis, "libhiredis-dev",
             {.rank = o.rank, .address = o.host + ":" + std::to_string(o.port)})
      .make_redis_store(o);
}

AllGatherFn make_redis_channel(const RedisOptions& o) {
  return make_store_all_gather(make_redis_store(o), o.rank, o.size, o.timeout,
                               "redis side channel");
}

}  // namespace jaccl::detail

#endif  // JACCL_CHANNEL_PLUGINS
