"""One rank of the benchmark of bench/sections/torch.py (kept out of
bench/sections, where torch.py would shadow the torch package).

torch.distributed.all_reduce (float32, SUM) on three process groups of the
same ranks, alternated size by size and repetition by repetition so load
changes hit them alike: "jaccl" (auto: shared memory on one host), "jaccl"
with JACCL_TRANSPORT=tcp, and "gloo". Then one DDP step of a small MLP on
jaccl and on gloo. Rank 0 prints one JSON line per measurement.
"""
import gc
import json
import os
import statistics
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist

import jaccl_torch  # noqa: F401  (registers "jaccl")

QUICK = os.environ.get("JT_QUICK") == "1"
REPS = int(os.environ.get("JT_REPS", "5"))


def emit(**kw):
    if dist.get_rank() == 0:
        print(json.dumps(kw), flush=True)


def sizes():
    k, m = 1 << 10, 1 << 20
    out = [8, 64, 512, 4 * k, 32 * k, 256 * k, m, 4 * m, 16 * m, 64 * m]
    return [s for s in out if not QUICK or s <= 4 * m]


def iters_for(nbytes):
    if nbytes <= 64 << 10:
        return 10 if QUICK else 50
    if nbytes <= 4 << 20:
        return 4 if QUICK else 10
    return 2 if QUICK else 3


def time_allreduce(t, group, iters):
    dist.all_reduce(t, group=group)  # warm-up / sync
    t0 = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(t, group=group)
    return (time.perf_counter() - t0) / iters


def ddp_step_time(group, steps):
    from torch.nn.parallel import DistributedDataParallel as DDP
    torch.manual_seed(0)
    net = DDP(torch.nn.Sequential(
        torch.nn.Linear(512, 1024), torch.nn.ReLU(),
        torch.nn.Linear(1024, 1024), torch.nn.ReLU(),
        torch.nn.Linear(1024, 512)), process_group=group)
    opt = torch.optim.SGD(net.parameters(), lr=1e-3)
    x = torch.randn(32, 512)
    times = []
    for i in range(steps + 2):
        dist.barrier(group=group)
        t0 = time.perf_counter()
        opt.zero_grad()
        net(x).pow(2).mean().backward()
        opt.step()
        if i >= 2:
            times.append(time.perf_counter() - t0)
    params = sum(p.numel() for p in net.parameters())
    return statistics.median(times), params


def main():
    dist.init_process_group("jaccl", timeout=timedelta(seconds=120))
    os.environ["JACCL_TRANSPORT"] = "tcp"  # read when the next group is made
    groups = {"jaccl": dist.group.WORLD,
              "jaccl-tcp": dist.new_group(backend="jaccl"),
              "gloo": dist.new_group(backend="gloo")}
    emit(planes={k: jaccl_torch.data_plane(g) for k, g in groups.items()
                 if k != "gloo"})
    for nbytes in sizes():
        t = torch.ones(max(1, nbytes // 4), dtype=torch.float32)
        runs = {k: [] for k in groups}
        for _ in range(REPS):
            for name, g in groups.items():
                runs[name].append(time_allreduce(t, g, iters_for(nbytes)))
        emit(op="all_reduce", bytes=nbytes,
             **{k: statistics.median(v) for k, v in runs.items()})
    steps = 3 if QUICK else 10
    for name in ("jaccl", "gloo"):
        sec, params = ddp_step_time(groups[name], steps)
        emit(op="ddp_step", lib=name, seconds=sec, params=params)
    gc.collect()  # DDP's cycles hold the groups (see torch/tests/rank_main.py)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
