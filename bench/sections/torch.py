"""bench/compare section: torch.distributed on the "jaccl" backend vs gloo.

all_reduce of float32 tensors, 8 B .. 64 MiB, on 2 and 4 ranks, with jaccl
(shared memory, the default on one host), jaccl over TCP and gloo (TCP)
alternated in one job (torch/bench_rank.py); then one DDP step.
Ceiling: memcpy bandwidth (memcpy_bench) measured in the same run.
"""
import json
import os
import subprocess
import sys

TITLE = "PyTorch: torch.distributed all_reduce, jaccl vs gloo"
# bench/compare itself (human, free_port, json_lines, loadavg, ...), set
# on the module by load_sections before it runs.
compare = globals()["compare"]
HERE = os.path.dirname(os.path.abspath(__file__))
RANK = os.path.join(os.path.dirname(os.path.dirname(HERE)), "torch",
                    "bench_rank.py")
PY = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable


def _job(n, module_dir, quick, reps, log):
    port = compare.free_port()
    procs = []
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("JACCL_", "MLX_"))}
    for r in range(n):
        env = dict(base, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                   RANK=str(r), WORLD_SIZE=str(n), OMP_NUM_THREADS="1",
                   PYTHONPATH=module_dir, JT_QUICK="1" if quick else "0",
                   JT_REPS=str(reps))
        procs.append(subprocess.Popen([PY, RANK], env=env,
                                      stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True,
                                      start_new_session=True))
    outs = []
    for p in procs:
        try:
            out, err = p.communicate(timeout=1800)
        except subprocess.TimeoutExpired:
            for q in procs:
                if q.poll() is None:
                    os.killpg(q.pid, 9)
            raise RuntimeError(f"torch section: {n} ranks timed out")
        if p.returncode != 0:
            raise RuntimeError(f"torch section: a rank exited "
                               f"{p.returncode}:\n{err[-3000:]}")
        outs.append(out)
    lines = [json.loads(l) for l in outs[0].splitlines()
             if l.startswith("{")]
    log(f"   torch {n} ranks: {len(lines)} rows")
    return lines


def run(ctx):
    log, runner = ctx["log"], ctx["run"]
    bdir = os.path.dirname(os.path.dirname(ctx["exe"]["run"]))
    runner(["cmake", "--build", bdir, "-j2", "--target", "jaccl_torch"],
           timeout=3600)
    module_dir = os.path.join(bdir, "torch")
    res = {"load_before": compare.loadavg(), "jobs": {}}
    mb = ctx["exe"].get("memcpy_bench")
    if mb and os.path.exists(mb):
        out, _, _ = runner([mb, "64", "10" if ctx["quick"] else "30"])
        line = [l for l in out.splitlines() if l.strip().startswith("{")]
        res["memcpy"] = json.loads(line[0]) if line else None
    reps = max(1, min(ctx["reps"], 5))
    for n in (2, 4):
        log(f"== torch section: {n} ranks")
        res["jobs"][str(n)] = _job(n, module_dir, ctx["quick"], reps, log)
    res["load_after"] = compare.loadavg()
    res["quick"] = ctx["quick"]
    res["reps"] = reps
    return res


def _us(s):
    return f"{s * 1e6:.0f}" if s >= 1e-4 else f"{s * 1e6:.1f}"


def _gbps(nbytes, s):
    return nbytes / s / 1e9


def render(res):
    L = []
    mc = res.get("memcpy") or {}
    ceiling = mc.get("memcpy_median_gbps")
    L.append("`torch.distributed.all_reduce` (float32, SUM) through the "
             "`jaccl_torch` backend against torch 1.13's gloo, in the same "
             "job: three process groups of the same ranks (jaccl with its "
             "default data plane — shared memory on one host —, jaccl with "
             "`JACCL_TRANSPORT=tcp`, gloo) alternated size by size and "
             f"repetition by repetition (median of {res.get('reps')} "
             "repetitions, each a timed loop after a warm-up). Times are "
             "rank 0's per call, in µs; bus bandwidth = 2(n-1)/n × bytes / "
             "time. Load average before/after: "
             f"{' '.join(res.get('load_before', []))} / "
             f"{' '.join(res.get('load_after', []))} (2 cores)."
             + (f" Ceiling: memcpy {ceiling:.2f} GB/s (memcpy_bench, this "
                "run)." if ceiling else "")
             + (" **Quick run.**" if res.get("quick") else ""))
    L.append("")
    for n, rows in sorted(res["jobs"].items()):
        nn = int(n)
        planes = next((r["planes"] for r in rows if "planes" in r), {})
        L.append(f"### {n} ranks (jaccl data planes: "
                 + ", ".join(f"{k} = `{v}`" for k, v in planes.items())
                 + ")")
        L.append("")
        L.append("| bytes | jaccl µs | jaccl TCP µs | gloo µs | jaccl busbw "
                 "GB/s | jaccl / gloo speed-up | jaccl TCP / gloo |")
        L.append("|---:|---:|---:|---:|---:|---:|---:|")
        for r in rows:
            if r.get("op") != "all_reduce":
                continue
            b = r["bytes"]
            bus = _gbps(b, r["jaccl"]) * 2 * (nn - 1) / nn
            L.append(f"| {compare.human(b)} | {_us(r['jaccl'])} | "
                     f"{_us(r['jaccl-tcp'])} | {_us(r['gloo'])} | "
                     f"{bus:.2f} | {r['gloo'] / r['jaccl']:.1f}x | "
                     f"{r['gloo'] / r['jaccl-tcp']:.1f}x |")
        ddp = {r["lib"]: r for r in rows if r.get("op") == "ddp_step"}
        if ddp:
            p = ddp["jaccl"]["params"]
            L.append("")
            L.append(f"DDP step (MLP 512-1024-1024-512, {p / 1e6:.1f} M "
                     f"parameters = {p * 4 / 2**20:.0f} MiB of gradients, "
                     "batch 32, forward + backward + SGD, median of the "
                     f"steps): jaccl {ddp['jaccl']['seconds'] * 1e3:.1f} ms, "
                     f"gloo {ddp['gloo']['seconds'] * 1e3:.1f} ms.")
        L.append("")
    # The goal of issue 14.
    verdicts = []
    for n, rows in sorted(res["jobs"].items()):
        ar = [r for r in rows if r.get("op") == "all_reduce"]
        big = [r["gloo"] / r["jaccl"] for r in ar if r["bytes"] >= 1 << 20]
        allr = [r["gloo"] / r["jaccl"] for r in ar]
        if big and allr:
            verdicts.append(
                f"{n} ranks: jaccl / gloo at >= 1 MiB min {min(big):.1f}x "
                f"(goal >= 3x: {'met' if min(big) >= 3 else 'NOT met'}); "
                f"over all sizes min {min(allr):.1f}x (goal never slower: "
                f"{'met' if min(allr) >= 1 else 'NOT met'})")
    if verdicts:
        L.append("Goals (jaccl >= 3x gloo at 1 MiB and above, never slower): "
                 + "; ".join(verdicts) + ".")
        L.append("")
    L.append("Reproduce: `bench/compare --section torch` (builds "
             "`jaccl_torch` in the bench build directory).")
    return L
