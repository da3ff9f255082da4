// Copyright 2026 the jaccl authors.
#include "support/fixtures.h"

#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <thread>

#include "jaccl/error.h"
#include "support/proc.h"

namespace jaccl::test {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

// A temporary directory removed at the end of the test.
TempDir::TempDir() {
  std::string tmpl = (fs::temp_directory_path() / "jaccl-sc-XXXXXX").string();
  if (::mkdtemp(tmpl.data()) == nullptr)
    throw std::runtime_error("mkdtemp failed");
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

std::string unique_job(const std::string& base) {
  static std::atomic<int> counter{0};
  return base + "-" + std::to_string(::getpid()) + "-" +
         std::to_string(counter++);
}

bool on_path(const std::string& prog) {
  const char* p = std::getenv("PATH");
  std::string path = p ? p : "";
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find(':', start);
    if (end == std::string::npos)
      end = path.size();
    std::string dir = path.substr(start, end - start);
    if (!dir.empty() && ::access((dir + "/" + prog).c_str(), X_OK) == 0)
      return true;
    start = end + 1;
  }
  return false;
}

// ---- a real redis-server ------------------------------------------------

namespace {

bool redis_ping(const std::string& host, int port) {
  try {
    detail::RedisOptions o;
    o.host = host;
    o.port = port;
    o.job = "ping";
    o.timeout = 2000ms;
    detail::make_redis_store(o)->get({"x"});
    return true;
  } catch (const Error&) {
    return false;
  }
}

}  // namespace

// Our own redis-server child (SIGKILLed with the test process).

// Starts a redis-server on a free loopback port; "" on success, else why.
OwnRedis::~OwnRedis() = default;

std::string start_redis(OwnRedis* r) {
  if (!on_path("redis-server")) {
    return "redis-server is not installed: run scripts/setup.sh (or set "
           "JACCL_TEST_REDIS=host:port)";
  }
  for (int attempt = 0; attempt < 5; ++attempt) {
    r->port = free_loopback_port();
    r->job = std::make_unique<Job>(
        Job::start("redis-server",
                   {"--port", std::to_string(r->port), "--bind", "127.0.0.1",
                    "--save", "", "--appendonly", "no", "--dir", r->dir.path()},
                   1, {}));
    for (int i = 0; i < 200 && !r->job->finished(0); ++i) {
      if (redis_ping("127.0.0.1", r->port))
        return "";
      std::this_thread::sleep_for(25ms);
    }
    r->job.reset();
  }
  return "could not start redis-server";
}

const RedisServer& shared_redis() {
  static OwnRedis* own = nullptr;  // leaked on purpose: lives to exit
  static RedisServer server = [] {
    RedisServer s;
    if (const char* env = std::getenv("JACCL_TEST_REDIS"); env && *env) {
      std::string v = env;
      size_t colon = v.rfind(':');
      s.host = v.substr(0, colon);
      s.port =
          colon == std::string::npos ? 6379 : std::stoi(v.substr(colon + 1));
      if (!redis_ping(s.host, s.port))
        s.error = "JACCL_TEST_REDIS=" + v + " does not answer";
      return s;
    }
    own = new OwnRedis;
    s.error = start_redis(own);
    s.host = "127.0.0.1";
    s.port = own->port;
    return s;
  }();
  return server;
}

std::string redis_uri(const std::string& prefix) {
  return "redis://" + shared_redis().host + ":" +
         std::to_string(shared_redis().port) + "/" + prefix;
}

}  // namespace jaccl::test
