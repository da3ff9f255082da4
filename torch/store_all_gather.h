// Copyright 2026 the jaccl authors.
// jaccl's side channel over torch's c10d::Store (TCPStore, FileStore,
// PrefixStore ...): the store init_process_group / new_group / torchrun hand
// to the backend, so jaccl needs no coordinator and opens no bootstrap port.
#pragma once

#include <chrono>

#include <torch/csrc/distributed/c10d/Store.hpp>

#include "jaccl/side_channel.h"

namespace jaccl_torch {

// An all-gather factory over `store`. Keys, under whatever prefix the store
// already has (torch gives each process group a PrefixStore named after the
// group):
//
//   jaccl/instances      a counter every rank of a new group adds 1 to once;
//                        (value - 1) / size numbers this group instance, so a
//                        group re-created on the same store (destroy, then
//                        init again) never reads the keys of an earlier one
//   jaccl/<i>/<k>/<r>    rank r's input to call k of instance i
//
// A call sets its own key, polls for the others' (bounded by `timeout`; a
// timeout names the ranks whose keys are missing) and reads them. Rank r
// deletes its key of call k-1 once call k completes: every rank writes call k
// only after it has read all of call k-1.
jaccl::AllGatherFactory store_all_gather_factory(
    c10::intrusive_ptr<c10d::Store> store, std::chrono::milliseconds timeout);

}  // namespace jaccl_torch
