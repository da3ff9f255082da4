// Copyright 2026 the jaccl authors.
// The mesh (latency) algorithms: every rank talks to every peer directly on
// wire 0 (point-to-point and broadcast use all wires of the pair). Reductions
// combine the contributions locally in rank order, so every rank computes
// bit-identical results.
#pragma once

#include <cstddef>

#include "collectives/exchange.h"
#include "common/reduce.h"

namespace jaccl::detail::mesh {

void all_reduce(Links& l, const OpContext& ctx, ReduceOp op, int dtype,
                const void* in, void* out, size_t n_bytes);
void all_gather(Links& l, const OpContext& ctx, const void* in, void* out,
                size_t n_bytes);
// out receives the sum of chunk l.rank over ranks; out may overlap in.
void sum_scatter(Links& l, const OpContext& ctx, int dtype, const void* in,
                 void* out, size_t n_bytes);
void barrier(Links& l, const OpContext& ctx);
void broadcast(Links& l, const OpContext& ctx, void* buf, size_t n_bytes,
               int root);
void send(Links& l, const OpContext& ctx, const void* in, size_t n_bytes,
          int dst);
void recv(Links& l, const OpContext& ctx, void* out, size_t n_bytes, int src);

}  // namespace jaccl::detail::mesh
