// Copyright 2026 the jaccl authors.
// Everything in the PyTorch backend that depends on the torch version, in
// one place. Written and tested against torch 1.13 (Debian 12), where a
// backend is a c10d::ProcessGroup subclass and init_process_group calls the
// registered function(store, rank, world_size, timeout) for it.
//
// A port to torch >= 2.0 (docs/pytorch.md): there a backend derives from
// c10d::Backend (Backend.hpp; same virtuals: allreduce, _allgather_base,
// alltoall_base, ...) and torch wraps it in a ProcessGroup itself; the
// creator must return the Backend, and Backend.register_backend takes
// `devices=["cpu"]` (2.1+). Only the alias below and the creator's return
// type in module.cpp change.
#pragma once

#include <torch/version.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#if TORCH_VERSION_MAJOR >= 2
#include <torch/csrc/distributed/c10d/Backend.hpp>
#endif

namespace jaccl_torch {

#if TORCH_VERSION_MAJOR >= 2
using BackendBase = c10d::Backend;
#else
using BackendBase = c10d::ProcessGroup;
#endif

}  // namespace jaccl_torch
