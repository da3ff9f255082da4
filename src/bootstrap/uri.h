// Copyright 2026 the jaccl authors.
// Side channels named by a URI (Config::set_side_channel / JACCL_SIDE_CHANNEL):
//
//   tcp://host:port                 TCP star rooted at rank 0 (tcp_star.h)
//   file:///path/to/shared/dir      shared directory (file_channel.h)
//   redis://[[user]:pass@]host[:port][/prefix]
//                                   Redis server (redis_channel.h); port 6379,
//                                   prefix "jaccl" by default
//   mpi://                          MPI_Allgather (mpi_channel.h)
//   pmix://                         PMIx put/commit/fence/get under srun
//                                   --mpi=pmix or mpirun (pmix_channel.h)
//
// file:// and redis:// keep each job in its own namespace named by the job
// id (job_id()). Without JACCL_JOB and without a token every job is
// "default": two jobs that run at the same time against the same directory
// or Redis prefix would then collide (overwrite each other's records, fail,
// or worse, admit each other's ranks). A warning is logged in that case.
// Reusing a job id after the previous job ended (even by crashing) is safe.
#pragma once

#include <string>
#include <string_view>

#include "bootstrap/side_channel.h"
#include "common/deadline.h"
#include "jaccl/side_channel.h"

namespace jaccl::detail {

struct SideChannelSpec {
  std::string uri;
  int rank = -1;      // mpi://, pmix:// only: -1 = take MPI's / PMIx's
  int size = 0;       // mpi://, pmix:// only: 0 = take MPI's / PMIx's
  std::string job;    // JACCL_JOB ("" = derive, see job_id())
  std::string token;  // job token ("" = none)
  Millis timeout{60000};
};

enum class SideChannelScheme { Tcp, File, Redis, Mpi, Pmix };

// A parsed URI (no connection made). Errors are ConfigErrors naming the URI.
struct ParsedSideChannelUri {
  SideChannelScheme scheme = SideChannelScheme::Tcp;
  std::string host;      // tcp, redis
  int port = 0;          // tcp, redis
  std::string path;      // file: the shared directory
  std::string prefix;    // redis: key prefix (default "jaccl")
  std::string user;      // redis: AUTH user
  std::string password;  // redis: AUTH password
};
ParsedSideChannelUri parse_side_channel_uri(std::string_view uri);

struct RedisOptions;
// A redis:// URI's server, credentials and prefix with the job's namespace,
// this rank and the deadline (size 0: a store, no all-gather).
RedisOptions redis_options(const ParsedSideChannelUri& p, std::string job,
                           int rank, Millis timeout, int size = 0);

// The URI with any password replaced by "***", for logs and errors.
std::string redact_uri(std::string_view uri);

// job_env if not empty (it must be [A-Za-z0-9_.-], not starting with '.';
// ConfigError naming JACCL_JOB otherwise), else "t" + 16 hex digits of a
// SHA-256 of the token, else "default".
std::string job_id(std::string_view job_env, std::string_view token);

// Builds the channel. rank/size must be valid except for mpi:// and pmix://.
AllGatherFn make_side_channel_from_uri(const SideChannelSpec& spec);
// The same, with the channel's view where it has one (tcp://: the star's,
// so that a SideChannel reads its frames in place as with the default
// coordinator).
GatherFns make_side_channel_fns_from_uri(const SideChannelSpec& spec);

}  // namespace jaccl::detail
