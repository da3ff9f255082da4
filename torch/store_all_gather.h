// Copyright 2026 the jaccl authors.
// jaccl's side channel over torch's c10d::Store (TCPStore, FileStore,
// PrefixStore ...): the store init_process_group / new_group / torchrun hand
// to the backend, so jaccl needs no coordinator and opens no bootstrap port.
#pragma once

#include <chrono>

#include <torch/csrc/distributed/c10d/Store.hpp>

#include "jaccl/side_channel.h"

namespace jaccl_torch {

// An all-gather factory over `store`: the store rendezvous of jaccl's file
// and Redis side channels (src/bootstrap/store_channel.h: epoch, nonces,
// headers, clean-up) with the c10d store as its key-value namespace, under
// "jaccl/" within whatever prefix the store already has (torch gives each
// process group a PrefixStore named after the group). Each call is bounded
// by 4/5 of `timeout`, so that its error, which names the missing ranks,
// comes before jaccl's own bootstrap timeout.
jaccl::AllGatherFactory store_all_gather_factory(
    c10::intrusive_ptr<c10d::Store> store, std::chrono::milliseconds timeout);

}  // namespace jaccl_torch
