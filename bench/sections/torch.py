"""bench/compare section: torch.distributed on the "jaccl" backend vs gloo.

all_reduce of float32 tensors, 8 B .. 64 MiB, on 2 and 4 ranks, in a steady
loop (torch/bench_rank.py: warm-up per size, timed loops of ~0.2 s,
repetitions alternated between jaccl (shm; synchronous and async_op=True +
wait()), jaccl over TCP, gloo and, up to 32 KiB, torch's floor: a backend
that does nothing, bench/torch_floor.cpp); then one DDP step. Beside them,
measured in the same run: jaccl's C++ API (jaccl-bench, in place, shm) and the
Python module (jaccl.all_sum, python/bench_rank.py), each run before and
after the torch job, so the front ends' per-call cost reads off the table;
and memcpy at 1, 4, 16, 64 MiB (memcpy_bench), the ceiling bus bandwidth is
judged against. Every process runs under compare's --rt prefix when given.
"""
import glob
import json
import os
import subprocess
import sys

TITLE = "PyTorch: torch.distributed all_reduce, jaccl vs gloo"
# bench/compare itself (human, free_port, json_lines, loadavg, ...), set
# on the module by load_sections before it runs.
compare = globals()["compare"]
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
RANK = os.path.join(ROOT, "torch", "bench_rank.py")
PY_RANK = os.path.join(ROOT, "python", "bench_rank.py")
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
                   JT_REPS=str(reps), JT_RT="1" if compare.RT else "0",
                   JT_WARM_CALLS=str(compare.TUNER_WARM))
        # Not under compare.RT's chrt: the rank sets SCHED_FIFO itself, for
        # the measurements only (torch/bench_rank.py says why).
        procs.append(subprocess.Popen([PY, RANK], env=env,
                                      stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True,
                                      start_new_session=True))
    outs = []
    for p in procs:
        try:
            out, err = p.communicate(timeout=3600)
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


def _floors(ctx, n, bdir, quick, reps):
    """jaccl's C++ API (jaccl-bench, shm, in place) and the Python module at
    the torch job's sizes, ranks unbound like the torch job's."""
    runner, exe = ctx["run"], ctx["exe"]
    launch = [exe["run"], "-n", str(n), "--no-prefix", "--bind-to", "none"]
    cpp = []
    for lo, hi, f, w, it in ([("8", "256K", 8, 100, 200 if quick else 2000),
                              ("1M", "4M" if quick else "64M", 4, 20,
                               5 if quick else 20)]):
        out, _, _ = runner(compare.RT + launch + [
            "--env", "JACCL_TRANSPORT=shm", "--", exe["bench"], "-q", "-i",
            "-t", "shm", "-d", "float32", "-o", "all_sum", "-b", lo, "-e", hi,
            "-f", str(f), "-w", str(w), "-n", str(it), "--json"], timeout=900)
        cpp += compare.json_lines(out)
    env = dict(os.environ, PYTHONPATH=os.path.join(bdir, "python"),
               JP_REPS=str(reps), JP_CALLS="1000" if quick else "5000")
    out, _, _ = runner(compare.RT + launch + ["--", PY, PY_RANK],
                       timeout=900, env=env)
    return {"cpp": {str(r["bytes"]): r["avg_us"] * 1e-6 for r in cpp},
            "python": {str(r["bytes"]): r["median"]
                       for r in compare.json_lines(out)}}


def _build_type(bdir):
    try:
        with open(os.path.join(bdir, "CMakeCache.txt")) as f:
            for line in f:
                if line.startswith("CMAKE_BUILD_TYPE:"):
                    return line.split("=", 1)[1].strip()
    except OSError:
        pass
    return None


def run(ctx):
    log, runner = ctx["log"], ctx["run"]
    bdir = os.path.dirname(os.path.dirname(ctx["exe"]["run"]))
    module_dir = os.path.join(bdir, "torch")
    if ctx.get("no_build"):
        # Built already or not at all: a build here would relink libjaccl
        # under the sections that follow.
        if not glob.glob(os.path.join(module_dir, "jaccl_torch*.so")):
            raise RuntimeError(f"--no-build: no jaccl_torch in {module_dir}")
    else:
        runner(["cmake", "--build", bdir, "-j2", "--target", "jaccl_torch",
                "--target", "torch_floor", "--target", "jaccl_python"],
               timeout=3600)
    res = {"load_before": compare.loadavg(), "jobs": {}, "floors": {},
           "rt": bool(compare.RT), "build_type": _build_type(bdir)}
    mb = ctx["exe"].get("memcpy_bench")
    if mb and os.path.exists(mb):
        res["memcpy_at"] = {}
        for arg, b in compare.MEMCPY_SIZES:
            out, _, _ = runner(compare.RT + [mb, arg, "10" if ctx["quick"]
                                             else "30"])
            line = compare.json_lines(out)
            if line:
                res["memcpy_at"][str(b)] = line[0]
    reps = max(3, min(ctx["reps"], 7))
    for n in (2, 4):
        log(f"== torch section: {n} ranks")
        before = _floors(ctx, n, bdir, ctx["quick"], reps)
        res["jobs"][str(n)] = _job(n, module_dir, ctx["quick"], reps, log)
        after = _floors(ctx, n, bdir, ctx["quick"], reps)
        res["floors"][str(n)] = [before, after]
    res["load_after"] = compare.loadavg()
    res["date"] = compare.now()
    res["commit"] = compare.commit()
    res["quick"] = ctx["quick"]
    res["reps"] = reps
    return res


def _us(s):
    if s is None:
        return "–"
    return f"{s * 1e6:.0f}" if s >= 1e-4 else f"{s * 1e6:.1f}"


def _floor(res, n, kind, b):
    """The better of the runs before and after the torch job."""
    v = [f[kind].get(str(b)) for f in res.get("floors", {}).get(n, [])]
    v = [x for x in v if x is not None]
    return min(v) if v else None


def _mem_at(res, b):
    at = res.get("memcpy_at") or {}
    if not at:
        return None
    return compare.mem_at({"memcpy_at": at}, b)


def render(res):
    L = []
    method = next((r.get("method") for rows in res["jobs"].values()
                   for r in rows if "method" in r), {}) or {}
    inline = next((r.get("inline_bytes") for rows in res["jobs"].values()
                   for r in rows if "inline_bytes" in r), None)
    at = res.get("memcpy_at") or {}
    mem = ", ".join(f"{compare.human(int(b))} {v['memcpy_median_gbps']:.2f}"
                    for b, v in sorted(at.items(), key=lambda x: int(x[0])))
    L.append(
        "`torch.distributed.all_reduce` (float32, SUM, in place) through the "
        "`jaccl_torch` backend against torch 1.13's gloo, in one job of "
        "unbound ranks: three process groups of the same ranks — jaccl with "
        "its default data plane (shared memory on one host), timed as a "
        "synchronous call and as `async_op=True` + `wait()`; jaccl with "
        "`JACCL_TRANSPORT=tcp`; gloo; and up to 32 KiB *torch floor*, a "
        "backend whose all_reduce does nothing and returns a completed "
        "`Work` (`bench/torch_floor.cpp`): what torch's own layers (the "
        "Python checks of `dist.all_reduce`, pybind, the GIL, the `Work`) "
        "cost per call, the least any backend's small op can take through "
        "torch on this machine. **Method** (`torch/bench_rank.py`): per "
        f"size a warm-up of each series (>= {method.get('warm_calls', 10)} "
        f"calls and >= {method.get('warm_seconds', 0.2)} s), then "
        f"{res.get('reps')} repetitions, each a timed loop of back-to-back "
        f"calls sized to ~{method.get('rep_seconds', 0.2)} s from the "
        "warm-up (the same count on every rank), the series alternated in a "
        "rotating order inside each repetition, a gloo barrier before each "
        "loop. **Statistic**: the slowest rank's mean per call of a loop "
        "(a collective's ranks wait for each other, so that is the job's "
        "time; the floor's ranks run apart, and a job can go no faster than "
        "its slowest rank's floor), median over the repetitions (every "
        "repetition is in "
        "`bench/results/torch.json`). Beside them, measured in the same run "
        "just before and after each torch job (the better of the two): "
        "jaccl's C++ API (`jaccl-bench -i`, shm, ranks unbound) and the "
        "Python module (`jaccl.all_sum`, `python/bench_rank.py`, up to 32 "
        "KiB). Bus bandwidth = 2(n-1)/n × bytes / time; `% memcpy` divides it "
        "by single-core memcpy at the same size (the 1 MiB figure below 1 "
        "MiB), this section's ceiling. "
        f"jaccl_torch ran ops of up to {compare.human(inline or 0)} on the "
        "calling thread, and larger ones there too after two waited for at "
        "once (both series here wait at once; see docs/pytorch.md). "
        f"Load average before/after: {' '.join(res.get('load_before', []))}"
        f" / {' '.join(res.get('load_after', []))} (2 cores)"
        + ("; every process under SCHED_FIFO (`bench/compare --rt`)."
           if res.get("rt") else "; SCHED_OTHER (no `--rt`).")
        + (f" Ceiling: memcpy {mem} GB/s (memcpy_bench, this run)."
           if mem else "")
        + (f" Build: {res['build_type']}." if res.get("build_type") else "")
        + (" **Quick run.**" if res.get("quick") else ""))
    L.append("")
    # What each front end adds to the library per call, at 8 B.
    for n, rows in sorted(res["jobs"].items()):
        r8 = next((r for r in rows if r.get("op") == "all_reduce"
                   and r["bytes"] == 8), None)
        cpp, py = _floor(res, n, "cpp", 8), _floor(res, n, "python", 8)
        if r8 and cpp and py:
            L.append(f"Per-call cost at 8 B, {n} ranks: C++ API {_us(cpp)} "
                     f"µs; Python module {_us(py)} µs (+{_us(py - cpp)}); "
                     f"torch {_us(r8['jaccl'])} µs synchronous, "
                     f"{_us(r8['jaccl-async'])} µs async + wait "
                     f"(+{_us(r8['jaccl'] - cpp)} over the C++ API)"
                     + (f"; torch's floor {_us(r8['floor'])} µs, so torch "
                        f"with jaccl can take no less than "
                        f"{_us(r8['floor'] + cpp)} µs here (floor + C++ API)"
                        if r8.get("floor") else "") + ".")
            L.append("")
    for n, rows in sorted(res["jobs"].items()):
        nn = int(n)
        planes = next((r["planes"] for r in rows if "planes" in r), {})
        L.append(f"### {n} ranks (jaccl data planes: "
                 + ", ".join(f"{k} = `{v}`" for k, v in planes.items())
                 + ")")
        L.append("")
        L.append("| bytes | jaccl µs | jaccl async µs | jaccl TCP µs | "
                 "gloo µs | torch floor µs | C++ API µs | Python module µs | "
                 "jaccl / gloo | jaccl TCP / gloo | jaccl busbw GB/s | "
                 "% memcpy |")
        L.append("|---:" * 12 + "|")
        for r in rows:
            if r.get("op") != "all_reduce":
                continue
            b = r["bytes"]
            bus = b / r["jaccl"] / 1e9 * 2 * (nn - 1) / nn
            m = _mem_at(res, b)
            L.append(f"| {compare.human(b)} | {_us(r['jaccl'])} | "
                     f"{_us(r['jaccl-async'])} | {_us(r['jaccl-tcp'])} | "
                     f"{_us(r['gloo'])} | {_us(r.get('floor'))} | "
                     f"{_us(_floor(res, n, 'cpp', b))} | "
                     f"{_us(_floor(res, n, 'python', b))} | "
                     f"{r['gloo'] / r['jaccl']:.1f}x | "
                     f"{r['gloo'] / r['jaccl-tcp']:.1f}x | {bus:.2f} | "
                     + (f"{100 * bus / m:.0f}%" if m else "–") + " |")
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
    # The goals of issue 26 for the torch front end.
    verdicts = []
    for n, rows in sorted(res["jobs"].items()):
        ar = [r for r in rows if r.get("op") == "all_reduce"]
        big = [r["gloo"] / r["jaccl"] for r in ar if r["bytes"] >= 1 << 20]
        allr = [min(r["gloo"] / r["jaccl"], r["gloo"] / r["jaccl-async"])
                for r in ar]
        small = next((r for r in ar if r["bytes"] == 8), None)
        v = []
        if small and n == "2":
            worst = max(small["jaccl"], small["jaccl-async"])
            v.append(f"8 B sync {_us(small['jaccl'])} µs, async + wait "
                     f"{_us(small['jaccl-async'])} µs (goal <= 5 µs: "
                     f"{'met' if worst <= 5e-6 else 'NOT met'}"
                     + (f"; torch's floor {_us(small['floor'])} µs"
                        if small.get("floor") else "") + ")")
        if big:
            v.append(f"jaccl / gloo from 1 MiB min {min(big):.1f}x (goal "
                     f">= 3x: {'met' if min(big) >= 3 else 'NOT met'})")
        if allr:
            v.append(f"over all sizes min {min(allr):.1f}x (goal never "
                     f"slower: {'met' if min(allr) >= 1 else 'NOT met'})")
        if v:
            verdicts.append(f"{n} ranks: " + "; ".join(v))
    if verdicts:
        L.append("Goals (issue 26): " + ". ".join(verdicts) + ".")
        L.append("")
    L.append("Reproduce: `bench/compare --section torch` (builds "
             "`jaccl_torch` and `jaccl` in the bench build directory unless "
             "`--no-build`; add `--rt` on a shared machine).")
    return L
