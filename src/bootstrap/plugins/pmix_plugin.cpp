// Copyright 2026 the jaccl authors.
// libjaccl-pmix.so's entry (bootstrap/channel_plugin.h): pmix_channel.cpp,
// built with libpmix, behind one exported C function.
#include "bootstrap/channel_plugin.h"
#include "bootstrap/pmix_channel.h"

extern "C" __attribute__((visibility("default")))
const jaccl::detail::ChannelPlugin*
jaccl_pmix_plugin() {
  static const jaccl::detail::ChannelPlugin table = [] {
    jaccl::detail::ChannelPlugin t;
    t.pmix_rank_size = &jaccl::detail::pmix_rank_size;
    t.make_pmix_channel = &jaccl::detail::make_pmix_channel;
    return t;
  }();
  return &table;
}
