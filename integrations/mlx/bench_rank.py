"""One rank of the benchmark of bench/sections/mlx.py.

Started by Open MPI's mpirun (MLX's backend="mpi" needs it): the rank comes
from OMPI_COMM_WORLD_RANK, jaccl finds its rank and size there too and its
coordinator in JACCL_COORDINATOR, MLX's ring backend its peers in
MLX_HOSTFILE. Every backend named in JM_BACKENDS (of "jaccl", "ring", "mpi")
is initialised in this process, and the backends are alternated inside every
repetition and every size (rotating which goes first), so load changes hit
them alike. MLX caches one group per backend name, so jaccl's data plane is
the one JACCL_TRANSPORT chose for this job (bench/sections/mlx.py runs one
job on the default plane and one with JACCL_TRANSPORT=tcp).

1. mx.distributed.all_sum of float32 arrays, 8 B .. 64 MiB: per repetition
   and backend, a small all_sum as a barrier, warm-up calls, then timed
   calls (each mx.eval'd, timed one by one); the repetition's figure is
   the median call. The first repetition warms each size up with
   JM_FIRST_WARM calls (bench/compare's TUNER_WARM): jaccl's shared-memory group times its first calls of
   a size class to pick how it copies (2 untimed calls and three rounds of
   trials, up to 26 calls), which must not be the timed ones. Rank 0
   prints one JSON line per size.
2. (JM_DECODE=1, 2 ranks) one tensor-parallel decode step of a Llama-shaped
   block from random weights: RMSNorm, q/k/v AllToShardedLinear, RoPE,
   attention over a KV cache, o ShardedToAllLinear, RMSNorm, gate/up
   AllToShardedLinear, SiLU, down ShardedToAllLinear; the same weights for
   every backend. Rank 0 prints one JSON line per backend.

Environment: JM_BACKENDS, JM_QUICK=1, JM_REPS, JM_DECODE, JM_FIRST_WARM,
JM_HIDDEN, JM_INTER, JM_DTYPE (float32|float16), JM_CTX (KV-cache length).
"""
import json
import math
import os
import statistics
import sys
import time

# Before mlx is imported: MLX's ring backend reads MLX_RANK.
if "MLX_RANK" not in os.environ and "OMPI_COMM_WORLD_RANK" in os.environ:
    os.environ["MLX_RANK"] = os.environ["OMPI_COMM_WORLD_RANK"]

import mlx.core as mx
import mlx.nn as nn
from mlx.nn.layers.distributed import AllToShardedLinear, ShardedToAllLinear

QUICK = os.environ.get("JM_QUICK") == "1"
REPS = int(os.environ.get("JM_REPS", "3"))
BACKENDS = [b for b in os.environ.get("JM_BACKENDS",
                                      "jaccl,ring,mpi").split(",") if b]
RANK = int(os.environ.get("MLX_RANK", "0"))


def emit(**kw):
    if RANK == 0:
        print(json.dumps(kw), flush=True)


def sizes():
    k, m = 1 << 10, 1 << 20
    out = [8, 64, 512, 4 * k, 32 * k, 256 * k, m, 4 * m, 16 * m, 64 * m]
    return [s for s in out if not QUICK or s in (8, 4 * k, m, 4 * m)]


FIRST_WARM = int(os.environ.get("JM_FIRST_WARM", "100"))


def iters_for(nbytes):
    """Timed calls per repetition (the same at every rank)."""
    if nbytes <= 64 << 10:
        return 20 if QUICK else 50
    if nbytes <= 1 << 20:
        return 5 if QUICK else 20
    if nbytes <= 4 << 20:
        return 3 if QUICK else 8
    return 2 if QUICK else 4


def barrier(g):
    mx.eval(mx.distributed.all_sum(mx.zeros((1,)), group=g))


def time_all_sum(x, g, iters, warm):
    barrier(g)
    for _ in range(warm):
        mx.eval(mx.distributed.all_sum(x, group=g))
    ts = []
    for _ in range(iters):
        t0 = time.perf_counter()
        y = mx.distributed.all_sum(x, group=g)
        mx.eval(y)
        ts.append(time.perf_counter() - t0)
    return ts, y


def init_groups():
    groups, errors = {}, {}
    for b in BACKENDS:
        t0 = time.perf_counter()
        try:
            groups[b] = mx.distributed.init(strict=True, backend=b)
        except Exception as e:  # reported, not fatal: the others still run
            errors[b] = f"{type(e).__name__}: {e}"
            continue
        emit(op="init", lib=b, seconds=time.perf_counter() - t0,
             size=groups[b].size(), rank=groups[b].rank())
    for b, e in errors.items():
        emit(op="init", lib=b, error=e)
    n = {g.size() for g in groups.values()}
    if len(n) != 1:
        raise SystemExit(f"rank {RANK}: groups of different sizes {n}")
    for b, g in groups.items():
        if g.rank() != RANK:
            raise SystemExit(f"rank {RANK}: {b} says rank {g.rank()}")
    return groups


def sweep(groups):
    libs = list(groups)
    n = next(iter(groups.values())).size()
    res = {(s, b): [] for s in sizes() for b in libs}
    for rep in range(REPS):
        for i, s in enumerate(sizes()):
            x = mx.ones((s // 4,), dtype=mx.float32)
            mx.eval(x)
            k = (rep + i) % len(libs)
            for b in libs[k:] + libs[:k]:
                warm = 3 if s <= 1 << 20 else 1
                ts, y = time_all_sum(x, groups[b], iters_for(s),
                                     warm=FIRST_WARM if rep == 0 else warm)
                if rep == 0 and not (y[0].item() == n and y[-1].item() == n):
                    raise SystemExit(f"rank {RANK}: {b} all_sum of {s} B "
                                     f"gave {y[0].item()}, want {n}")
                res[(s, b)].append(statistics.median(ts))
    for s in sizes():
        row = {"op": "all_sum", "bytes": s, "iters": iters_for(s)}
        for b in libs:
            row[b] = statistics.median(res[(s, b)])
            row[b + "_reps"] = res[(s, b)]
        emit(**row)


class Block(nn.Module):
    """A Llama decoder block, tensor-parallel over group (heads and the MLP's
    intermediate dimension split across ranks)."""

    def __init__(self, hidden, inter, heads, group):
        super().__init__()
        n = group.size()
        self.hd = hidden // heads
        self.local_heads = heads // n
        self.attn_norm = nn.RMSNorm(hidden)
        self.mlp_norm = nn.RMSNorm(hidden)
        self.q_proj = AllToShardedLinear(hidden, hidden, bias=False,
                                         group=group)
        self.k_proj = AllToShardedLinear(hidden, hidden, bias=False,
                                         group=group)
        self.v_proj = AllToShardedLinear(hidden, hidden, bias=False,
                                         group=group)
        self.o_proj = ShardedToAllLinear(hidden, hidden, bias=False,
                                         group=group)
        self.gate_proj = AllToShardedLinear(hidden, inter, bias=False,
                                            group=group)
        self.up_proj = AllToShardedLinear(hidden, inter, bias=False,
                                          group=group)
        self.down_proj = ShardedToAllLinear(inter, hidden, bias=False,
                                            group=group)

    def __call__(self, x, kcache, vcache):
        B, L, _ = x.shape
        off = kcache.shape[2]
        h = self.attn_norm(x)
        q, k, v = self.q_proj(h), self.k_proj(h), self.v_proj(h)
        shape = (B, L, self.local_heads, self.hd)
        q = q.reshape(shape).transpose(0, 2, 1, 3)
        k = k.reshape(shape).transpose(0, 2, 1, 3)
        v = v.reshape(shape).transpose(0, 2, 1, 3)
        q = mx.fast.rope(q, self.hd, traditional=False, base=10000.0,
                         scale=1.0, offset=off)
        k = mx.fast.rope(k, self.hd, traditional=False, base=10000.0,
                         scale=1.0, offset=off)
        k = mx.concatenate([kcache, k], axis=2)
        v = mx.concatenate([vcache, v], axis=2)
        a = mx.fast.scaled_dot_product_attention(
            q, k, v, scale=1.0 / math.sqrt(self.hd))
        a = a.transpose(0, 2, 1, 3).reshape(B, L, -1)
        x = x + self.o_proj(a)
        h = self.mlp_norm(x)
        return x + self.down_proj(nn.silu(self.gate_proj(h))
                                  * self.up_proj(h))


def decode(groups):
    hidden = int(os.environ.get("JM_HIDDEN", "4096"))
    inter = int(os.environ.get("JM_INTER", "11008"))
    ctx = int(os.environ.get("JM_CTX", "512"))
    dt = getattr(mx, os.environ.get("JM_DTYPE", "float32"))
    heads = hidden // 128
    # Many short rounds, the backends alternated round by round (rotating
    # which goes first), so a burst of other work on the machine lands on
    # every backend alike; the figure is the median of all timed steps.
    steps = 3
    rounds = 2 if QUICK else max(8, 3 * REPS)
    libs = list(groups)
    blocks = {b: Block(hidden, inter, heads, groups[b]) for b in libs}
    # One set of random weights (this rank's shards), shared by every
    # backend's block: the lazily drawn initial weights are never computed.
    first = blocks[libs[0]]
    key = mx.random.key(1234 + RANK)
    shared = {}
    for name, w in first.parameters().items():
        if not name.endswith("norm"):
            key, sub = mx.random.split(key)
            shared[name] = {"weight": (mx.random.normal(
                w["weight"].shape, key=sub) * 0.02).astype(dt)}
        else:
            shared[name] = {"weight": mx.ones((hidden,), dtype=dt)}
    mx.eval(shared)
    for blk in blocks.values():
        blk.update(shared)
    nh = heads // next(iter(groups.values())).size()
    kc = (mx.random.normal((1, nh, ctx, 128), key=mx.random.key(7)) *
          0.5).astype(dt)
    vc = (mx.random.normal((1, nh, ctx, 128), key=mx.random.key(8))).astype(dt)
    x = (mx.random.normal((1, 1, hidden), key=mx.random.key(9))).astype(dt)
    mx.eval(kc, vc, x)
    params = sum(v["weight"].size for v in shared.values())
    times = {b: [] for b in libs}
    outs = {}
    for b in libs:  # warm-up
        barrier(groups[b])
        for _ in range(2):
            mx.eval(blocks[b](x, kc, vc))
    for rnd in range(rounds):
        k = rnd % len(libs)
        for b in libs[k:] + libs[:k]:
            blk = blocks[b]
            barrier(groups[b])
            mx.eval(blk(x, kc, vc))
            for _ in range(steps):
                t0 = time.perf_counter()
                y = blk(x, kc, vc)
                mx.eval(y)
                times[b].append(time.perf_counter() - t0)
            outs[b] = y
    ref = outs[libs[0]]
    for b in libs:
        diff = mx.max(mx.abs(outs[b].astype(mx.float32)
                             - ref.astype(mx.float32))).item()
        emit(op="decode_step", lib=b, seconds=statistics.median(times[b]),
             min=min(times[b]), steps_all=times[b], steps=steps,
             rounds=rounds, hidden=hidden, inter=inter,
             heads=heads, ctx=ctx, dtype=str(dt).split(".")[-1],
             params_per_rank=params,
             bytes_per_rank=params * (2 if dt == mx.float16 else 4),
             all_sums_per_step=2, all_sum_bytes=hidden * (
                 2 if dt == mx.float16 else 4),
             max_abs_diff_vs_first=diff)


def main():
    groups = init_groups()
    # MLX's buffer cache limit, as shipped (not changed here): results
    # larger than it are freshly allocated (and page-faulted) every call.
    cache_limit = mx.set_cache_limit(1 << 40)
    mx.set_cache_limit(cache_limit)
    emit(op="config", libs=list(groups), ranks=next(iter(
        groups.values())).size(), reps=REPS, quick=QUICK,
        transport=os.environ.get("JACCL_TRANSPORT", "auto"),
        cache_limit=cache_limit)
    sweep(groups)
    if os.environ.get("JM_DECODE") == "1":
        decode(groups)
    emit(op="done")


if __name__ == "__main__":
    main()
