// Copyright 2026 the jaccl authors.
// libjaccl-redis.so's entry (bootstrap/channel_plugin.h): redis_channel.cpp,
// built with hiredis, behind one exported C function.
#include "bootstrap/channel_plugin.h"
#include "bootstrap/redis_channel.h"

extern "C" __attribute__((visibility("default")))
const jaccl::detail::ChannelPlugin*
jaccl_redis_plugin() {
  static const jaccl::detail::ChannelPlugin table = [] {
    jaccl::detail::ChannelPlugin t;
    t.make_redis_store = &jaccl::detail::make_redis_store;
    return t;
  }();
  return &table;
}
