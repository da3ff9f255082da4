// Copyright 2026 the jaccl authors.
// Fixtures shared by test suites: temporary directories, PATH look-ups and a
// real redis-server on loopback (JACCL_TEST_REDIS=host:port, or one started
// for the test process).
#pragma once

#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "bootstrap/redis_channel.h"

namespace jaccl::test {

// A temporary directory removed at the end of the test.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const {
    return path_ + "/" + name;
  }

 private:
  std::string path_;
};

// base-<pid>-<counter>: unique within this machine.
std::string unique_job(const std::string& base);
bool on_path(const std::string& prog);

class Job;

// A redis-server child of this process (SIGKILLed with it).
struct OwnRedis {
  std::unique_ptr<Job> job;
  TempDir dir;
  int port = 0;
  ~OwnRedis();
};

// Starts a redis-server on a free loopback port; "" on success, else why.
std::string start_redis(OwnRedis* r);

struct RedisServer {
  std::string host;
  int port = 0;
  std::string error;  // why there is none
};

// The server named by JACCL_TEST_REDIS, else one started for this process
// (lives until exit). No redis-server installed is an error, not a skip.
const RedisServer& shared_redis();
std::string redis_uri(const std::string& prefix = "jaccl-test");

}  // namespace jaccl::test

#define REQUIRE_REDIS()                                                  \
  ASSERT_TRUE(::jaccl::detail::redis_channel_built())                    \
      << "this build has no Redis side channel: install libhiredis-dev " \
         "(scripts/setup.sh) and reconfigure";                           \
  ASSERT_EQ(::jaccl::test::shared_redis().error, "")                     \
      << ::jaccl::test::shared_redis().error
