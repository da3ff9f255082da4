// Copyright 2026 the jaccl authors.
#include "bootstrap/redis_channel.h"

#include <algorithm>
#include <string_view>
#include <vector>

#include "common/error.h"

#if JACCL_HAVE_REDIS
#include <hiredis/hiredis.h>
#endif

namespace jaccl::detail {

#if JACCL_HAVE_REDIS

namespace {

timeval to_timeval(Millis d) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(d.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((d.count() % 1000) * 1000);
  return tv;
}

// "a*b" -> "a\*b" for SCAN MATCH.
std::string glob_escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\') {
      out += '\\';
    }
    out += c;
  }
  return out;
}

struct ReplyDeleter {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using Reply = std::unique_ptr<redisReply, ReplyDeleter>;

class RedisStore final : public RendezvousStore {
 public:
  explicit RedisStore(const RedisOptions& o)
      : server_(o.host + ":" + std::to_string(o.port)),
        prefix_(o.prefix.empty() ? o.job + "/" : o.prefix + "/" + o.job + "/"),
        rank_(o.rank) {
    where_ = "Redis server " + server_ + " (keys " + prefix_ + "*)";
    const Millis io = o.timeout.count() > 0 ? o.timeout : Millis(60000);
    ttl_s_ =
        o.timeout.count() > 0
            ? std::max<long long>(3 * ((o.timeout.count() + 999) / 1000), 60)
            : 86400;
    ctx_ = redisConnectWithTimeout(o.host.c_str(), o.port, to_timeval(io));
    if (ctx_ == nullptr || ctx_->err) {
      std::string why = ctx_ ? ctx_->errstr : "out of memory";
      raise(ErrorKind::Io,
            "redis side channel: cannot connect to the Redis server: " + why,
            {.rank = rank_, .address = server_});
    }
    redisSetTimeout(ctx_, to_timeval(io));
    if (!o.password.empty()) {
      std::vector<std::string> args{"AUTH"};
      if (!o.user.empty())
        args.push_back(o.user);
      args.push_back(o.password);
      command(args);
    }
  }

  ~RedisStore() override {
    if (ctx_ != nullptr) {
      redisFree(ctx_);
    }
  }

  const std::string& where() const override { return where_; }
  const std::string& address() const override { return server_; }

  void put(const std::string& key, std::string_view value) override {
    command({"SET", prefix_ + key, std::string(value), "EX",
             std::to_string(ttl_s_)});
  }

  std::vector<std::optional<std::string>> get(
      const std::vector<std::string>& keys) override {
    std::vector<std::optional<std::string>> out(keys.size());
    if (keys.empty()) {
      return out;
    }
    std::vector<std::string> args{"MGET"};
    for (const auto& k : keys) {
      args.push_back(prefix_ + k);
    }
    Reply r = command(args);
    if (r->type != REDIS_REPLY_ARRAY || r->elements != keys.size()) {
      fail("MGET returned an unexpected reply");
    }
    for (size_t i = 0; i < keys.size(); ++i) {
      const redisReply* e = r->element[i];
      if (e->type == REDIS_REPLY_STRING) {
        out[i] = std::string(e->str, e->len);
      }
    }
    return out;
  }

  void remove(const std::vector<std::string>& keys) noexcept override {
    if (keys.empty() || broken_) {
      return;
    }
    try {
      std::vector<std::string> args{"DEL"};
      for (const auto& k : keys) {
        args.push_back(prefix_ + k);
      }
      command(args);
    } catch (...) {
      // best effort: the keys expire anyway
    }
  }

  std::vector<std::string> list() override {
    std::vector<std::string> keys;
    std::string cursor = "0";
    const std::string match = glob_escape(prefix_) + "*";
    do {
      Reply r = command({"SCAN", cursor, "MATCH", match, "COUNT", "1000"});
      if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
          r->element[0]->type != REDIS_REPLY_STRING ||
          r->element[1]->type != REDIS_REPLY_ARRAY) {
        fail("SCAN returned an unexpected reply");
      }
      cursor.assign(r->element[0]->str, r->element[0]->len);
      const redisReply* arr = r->element[1];
      for (size_t i = 0; i < arr->elements; ++i) {
        std::string k(arr->element[i]->str, arr->element[i]->len);
        if (k.rfind(prefix_, 0) == 0) {
          keys.push_back(k.substr(prefix_.size()));
        }
      }
    } while (cursor != "0");
    std::sort(keys.begin(), keys.end());
    keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
    return keys;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    raise(ErrorKind::Io, "redis side channel: " + what,
          {.rank = rank_, .address = server_});
  }

  Reply command(const std::vector<std::string>& args) {
    if (broken_) {
      fail("the connection to the Redis server was lost earlier");
    }
    std::vector<const char*> argv;
    std::vector<size_t> lens;
    for (const auto& a : args) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    Reply r(static_cast<redisReply*>(redisCommandArgv(
        ctx_, static_cast<int>(argv.size()), argv.data(), lens.data())));
    if (!r) {
      broken_ = true;
      fail("lost the connection to the Redis server during " + args[0] + ": " +
           (ctx_->errstr[0] ? ctx_->errstr : "unknown error"));
    }
    if (r->type == REDIS_REPLY_ERROR) {
      fail("the Redis server refused " + args[0] + ": " +
           std::string(r->str, r->len));
    }
    return r;
  }

  std::string server_;
  std::string prefix_;
  std::string where_;
  int rank_;
  long long ttl_s_ = 60;
  redisContext* ctx_ = nullptr;
  bool broken_ = false;
};

}  // namespace

bool redis_channel_built() {
  return true;
}

std::shared_ptr<RendezvousStore> make_redis_store(const RedisOptions& o) {
  if (o.job.empty() || o.port <= 0 || o.port > 65535 || o.host.empty()) {
    raise(ErrorKind::Config,
          "redis side channel: need a host, a port in 1..65535 and a job id",
          {.rank = o.rank, .address = o.host + ":" + std::to_string(o.port)});
  }
  return std::make_shared<RedisStore>(o);
}

#else  // !JACCL_HAVE_REDIS

bool redis_channel_built() {
  return false;
}

std::shared_ptr<RendezvousStore> make_redis_store(const RedisOptions& o) {
  raise(ErrorKind::Config,
        "this build has no Redis side channel: install libhiredis-dev (or run "
        "scripts/setup.sh) and reconfigure",
        {.rank = o.rank, .address = o.host + ":" + std::to_string(o.port)});
}

#endif

AllGatherFn make_redis_channel(const RedisOptions& o) {
  return make_store_all_gather(make_redis_store(o), o.rank, o.size, o.timeout,
                               "redis side channel");
}

}  // namespace jaccl::detail
