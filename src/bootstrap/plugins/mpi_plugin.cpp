// Copyright 2026 the jaccl authors.
// libjaccl-mpi.so's entry (bootstrap/channel_plugin.h): mpi_channel.cpp,
// built with MPI, behind one exported C function.
#include "bootstrap/channel_plugin.h"
#include "bootstrap/mpi_channel.h"

extern "C" __attribute__((visibility("default")))
const jaccl::detail::ChannelPlugin*
jaccl_mpi_plugin() {
  static const jaccl::detail::ChannelPlugin table = [] {
    jaccl::detail::ChannelPlugin t;
    t.mpi_rank_size = &jaccl::detail::mpi_rank_size;
    t.make_mpi_channel = &jaccl::detail::make_mpi_channel;
    return t;
  }();
  return &table;
}
