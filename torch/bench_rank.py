"""One rank of the benchmark of bench/sections/torch.py (kept out of
bench/sections, where torch.py would shadow the torch package).

torch.distributed.all_reduce (float32, SUM) in a steady loop on three
process groups of the same ranks: "jaccl" (auto: shared memory on one host;
timed as a synchronous call and as async_op=True + wait()), "jaccl" with
JACCL_TRANSPORT=tcp, and "gloo"; up to FLOOR_MAX bytes also "floor"
(bench/torch_floor.cpp: a backend whose all_reduce does nothing, so its
time is torch's own per call), when the module was built. Per size:

- warm-up: each series runs until it has made JT_WARM_CALLS calls and spent
  JT_WARM_SECONDS (jaccl's shm group times its first calls of a size class
  to pick how it copies, so the warm-up covers that too);
- the warm-up's per-call time sizes each series' timed loop to about
  JT_REP_SECONDS (at least 3 calls); ranks agree on the counts (the max);
- JT_REPS repetitions, the series alternated inside each repetition in a
  rotating order so that load changes hit them alike; a barrier on the gloo
  group before each timed loop.

With JT_RT=1 (bench/compare --rt) every thread of the rank runs under
SCHED_FIFO while it measures, set once the groups exist and undone before
they are torn down: the c10d TCPStore's client thread busy-polls once rank
0 (its server) has exited, which under SCHED_FIFO starves the rank's own
exit on a 2-core machine.

Rank 0 prints one JSON line per size: for each series the per-call time of
every repetition (seconds; the mean of its timed loop on the slowest rank)
and their median.
Then one DDP step of a small MLP on jaccl and on gloo.
"""
import gc
import json
import os
import statistics
import time
from datetime import timedelta

import torch
import torch.distributed as dist

import jaccl_torch  # noqa: F401  (registers "jaccl")

try:
    import torch_floor  # noqa: F401  (registers "floor")
except ImportError:
    torch_floor = None

QUICK = os.environ.get("JT_QUICK") == "1"
REPS = int(os.environ.get("JT_REPS", "5"))
REP_SECONDS = float(os.environ.get("JT_REP_SECONDS", "0.05" if QUICK else "0.2"))
WARM_CALLS = int(os.environ.get("JT_WARM_CALLS", "100"))
WARM_SECONDS = float(os.environ.get("JT_WARM_SECONDS", "0.05" if QUICK else "0.2"))
MAX_CALLS = 100000
FLOOR_MAX = 32 << 10  # the floor does not depend on the size


def emit(**kw):
    if dist.get_rank() == 0:
        print(json.dumps(kw), flush=True)


def sizes():
    k, m = 1 << 10, 1 << 20
    out = [8, 64, 512, 4 * k, 32 * k, 256 * k, m, 4 * m, 16 * m, 64 * m]
    return [s for s in out if not QUICK or s <= 4 * m]


def caller(t, group, asynchronous):
    if asynchronous:
        return lambda: dist.all_reduce(t, group=group, async_op=True).wait()
    return lambda: dist.all_reduce(t, group=group)


def set_fifo(on):
    """SCHED_FIFO priority 10 (on) or SCHED_OTHER for every thread."""
    policy = os.SCHED_FIFO if on else os.SCHED_OTHER
    param = os.sched_param(10 if on else 0)
    for tid in os.listdir("/proc/self/task"):
        try:
            os.sched_setscheduler(int(tid), policy, param)
        except (ProcessLookupError, PermissionError):
            pass


def agree(values, group, dtype=torch.int64):
    """The element-wise max over the ranks: every rank must make the same
    number of calls; and of timings, the slowest rank's."""
    t = torch.tensor(values, dtype=dtype)
    dist.all_reduce(t, op=dist.ReduceOp.MAX, group=group)
    return t.tolist()


def warm_up(call, gloo):
    """WARM_CALLS calls, then as many more as fill WARM_SECONDS (the same
    count on every rank); returns the per-call seconds of the later calls
    (the first calls of a size pay for allocation and jaccl's choice of
    how to copy)."""
    half = max(1, WARM_CALLS // 2)
    t0 = time.perf_counter()
    for _ in range(half):
        call()
    t1 = time.perf_counter()
    for _ in range(WARM_CALLS - half):
        call()
    t2 = time.perf_counter()
    per = (t2 - t1) / max(1, WARM_CALLS - half)
    left = WARM_SECONDS - (t2 - t0)
    extra = agree([int(left / per) if left > 0 else 0], gloo)[0]
    extra = min(extra, MAX_CALLS)
    if extra > 0:
        per = timed(call, extra)
    return per


def timed(call, calls):
    t0 = time.perf_counter()
    for _ in range(calls):
        call()
    return (time.perf_counter() - t0) / calls


def main():
    dist.init_process_group("jaccl", timeout=timedelta(seconds=300))
    os.environ["JACCL_TRANSPORT"] = "tcp"  # read when the next group is made
    jtcp = dist.new_group(backend="jaccl")
    gloo = dist.new_group(backend="gloo")
    floor = dist.new_group(backend="floor") if torch_floor else None
    world = dist.group.WORLD
    # (name, group, async_op)
    every = [("jaccl", world, False), ("jaccl-async", world, True),
             ("jaccl-tcp", jtcp, False), ("gloo", gloo, False)]
    emit(planes={"jaccl": jaccl_torch.data_plane(world),
                 "jaccl-tcp": jaccl_torch.data_plane(jtcp)},
         inline_bytes=jaccl_torch.inline_bytes(),
         method={"reps": REPS, "rep_seconds": REP_SECONDS,
                 "warm_calls": WARM_CALLS, "warm_seconds": WARM_SECONDS})
    rt = os.environ.get("JT_RT") == "1"
    dist.barrier(group=gloo)
    if rt:
        set_fifo(True)
    for nbytes in sizes():
        t = torch.ones(max(1, nbytes // 4), dtype=torch.float32)
        series = every + ([("floor", floor, False)]
                          if floor is not None and nbytes <= FLOOR_MAX else [])
        calls = {}
        for name, g, a in series:
            dist.barrier(group=gloo)
            per = warm_up(caller(t, g, a), gloo)
            calls[name] = int(min(MAX_CALLS, max(3, REP_SECONDS / per)))
        agreed = agree([calls[s[0]] for s in series], gloo)
        calls = {s[0]: c for s, c in zip(series, agreed)}
        runs = {s[0]: [] for s in series}
        for rep in range(REPS):
            k = rep % len(series)
            order = series[k:] + series[:k]
            mine = []
            for name, g, a in order:
                dist.barrier(group=gloo)
                mine.append(timed(caller(t, g, a), calls[name]))
            # The slowest rank's time: a collective's ranks wait for each
            # other, so that is the job's; the floor's ranks run apart, and
            # its figure for a job of n ranks is the slowest of theirs.
            slowest = agree(mine, gloo, torch.float64)
            for (name, _, _), sec in zip(order, slowest):
                runs[name].append(sec)
        emit(op="all_reduce", bytes=nbytes, calls=calls, reps=runs,
             **{k: statistics.median(v) for k, v in runs.items()})
    steps = 3 if QUICK else 10
    for name, g in (("jaccl", world), ("gloo", gloo)):
        sec, params = ddp_step_time(g, steps)
        emit(op="ddp_step", lib=name, seconds=sec, params=params)
    if rt:
        set_fifo(False)
    emit(rt=rt)
    gc.collect()  # DDP's cycles hold the groups (see torch/tests/rank_main.py)
    dist.destroy_process_group()


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


if __name__ == "__main__":
    main()
