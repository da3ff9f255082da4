// Copyright 2026 the jaccl authors.
// redis:// side channel: the rendezvous protocol of store_channel.h over a
// Redis server (hiredis), keys <prefix>/<job>/<key>.
//
// Every record is SET with an expiry (EX: three times the timeout, at least
// a minute; a day without a timeout), so records of a crashed run vanish by
// themselves; records are also deleted once read, as in the file channel.
// Waits poll with MGET and backoff (1 ms doubling to 100 ms), bounded by the
// timeout. A lost connection is an IoError naming the server; the server's
// replies are bounded by the same timeout.
//
// Built only when hiredis was found at configure time (JACCL_HAVE_REDIS);
// otherwise every entry point raises a ConfigError saying how to enable it.
#pragma once

#include <memory>
#include <string>

#include "bootstrap/store_channel.h"
#include "common/deadline.h"
#include "jaccl/side_channel.h"

namespace jaccl::detail {

struct RedisOptions {
  std::string host = "127.0.0.1";
  int port = 6379;
  std::string password;  // AUTH when not empty (never logged)
  std::string user;      // AUTH user password (Redis 6 ACL) when not empty
  std::string prefix = "jaccl";
  std::string job;  // job id (uri.h job_id())
  int rank = -1;
  int size = 0;
  Millis timeout{60000};
};

// Whether this build has the Redis channel.
bool redis_channel_built();

// The job namespace <prefix>/<job>/ on the server (connects now: an
// unreachable server is an IoError naming it).
std::shared_ptr<RendezvousStore> make_redis_store(const RedisOptions& options);

AllGatherFn make_redis_channel(const RedisOptions& options);

}  // namespace jaccl::detail
