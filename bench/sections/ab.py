# One build against another (an A/B in one alternating run): the same
# jaccl-bench sweeps from this tree and a base revision (JACCL_AB_BASE), so
# that a restructuring can show it made no figure worse. The base is checked
# out with `git worktree` under build-ab/ and built in Release like
# bench/compare's own build. JACCL_AB_PLANES (default "tcp,shm") and
# JACCL_AB_OPS (default "all_sum,all_gather,all_to_all") choose the sweeps.
import os
import statistics
from math import comb
import subprocess

TITLE = "Before and after a restructuring (A/B of two builds, one alternating run)"
# bench/compare itself (human, free_port, json_lines, loadavg, ...), set
# on the module by load_sections before it runs.
compare = globals()["compare"]

# 6953d06: main just before issue 27 (one shape for every group) and the
# elastic work built on it.
BASE = os.environ.get("JACCL_AB_BASE", "6953d06")
PLANES = os.environ.get("JACCL_AB_PLANES", "tcp,shm").split(",")
OPS = os.environ.get("JACCL_AB_OPS", "all_sum,all_gather,all_to_all").split(",")
RANKS = (2, 4)
# (first size, last size, step factor, warm-up, iterations). Large sizes
# warm up past jaccl's shm tuner trials (compare.TUNER_WARM), which must
# not land in the timed calls.
GROUPS = [("8", "8", 8, 2000, 20000),
          ("64K", "1M", 16, compare.TUNER_WARM, 200),
          ("16M", "16M", 4, compare.TUNER_WARM, 20)]
QUICK_GROUPS = [("8", "8", 8, 20, 200),
                ("1M", "1M", 4, compare.TUNER_WARM, 20)]


def _base_build(ctx):
    root = ctx["root"]
    src = os.path.join(root, "build-ab", "src-" + BASE)
    bdir = os.path.join(root, "build-ab", "build-" + BASE)
    if not os.path.isdir(src):
        os.makedirs(os.path.dirname(src), exist_ok=True)
        ctx["run"](["git", "-C", root, "worktree", "add", "--detach", src,
                    BASE], timeout=300)
    ctx["run"](["cmake", "-S", src, "-B", bdir, "-G", "Ninja",
                "-DCMAKE_BUILD_TYPE=Release"], timeout=900)
    ctx["run"](["cmake", "--build", bdir, "-j2", "--target", "jaccl-run",
                "jaccl-bench"], timeout=1800)
    return {"run": os.path.join(bdir, "tools", "jaccl-run"),
            "bench": os.path.join(bdir, "tools", "jaccl-bench")}


def _sweep(ctx, exe, plane, op, n, g):
    lo, hi, f, w, it = g
    cmd = [exe["run"], "-n", str(n), "--no-prefix",
           "--env", "JACCL_IFNAME=127.0.0.1", "--env",
           f"JACCL_TRANSPORT={plane}",
           "--", exe["bench"], "-q", "-d", "float32", "-t", plane,
           "-o", op, "-b", lo, "-e", hi, "-f", str(f), "-w", str(w),
           "-n", str(it), "--json"]
    out, _, _ = ctx["run"](cmd, timeout=900)
    return {r["bytes"]: r["avg_us"] for r in compare.json_lines(out)
            if "bytes" in r and "avg_us" in r}


def run(ctx):
    base = _base_build(ctx)
    new = ctx["exe"]
    reps = 2 if ctx["quick"] else max(3, ctx["reps"])
    groups = QUICK_GROUPS if ctx["quick"] else GROUPS
    res = {"base": BASE, "head": subprocess.run(
        ["git", "-C", ctx["root"], "rev-parse", "--short", "HEAD"],
        capture_output=True, text=True).stdout.strip(),
        "load_before": float(compare.loadavg()[0]), "rows": []}
    for plane in PLANES:
        for op in OPS:
            for n in RANKS:
                samples = {"before": {}, "after": {}}
                for rep in range(reps):
                    # Alternate which build goes first, so neither always
                    # follows a warm (or a disturbed) run.
                    order = [("before", base), ("after", new)]
                    if rep % 2:
                        order.reverse()
                    for g in groups:
                        for name, exe in order:
                            ctx["log"](f"ab {plane} {op} n={n} rep {rep} "
                                       f"{name} {g[0]}-{g[1]}")
                            for size, us in _sweep(ctx, exe, plane, op, n,
                                                   g).items():
                                samples[name].setdefault(str(size),
                                                         []).append(us)
                res["rows"].append({"plane": plane, "op": op, "n": n,
                                    "samples": samples})
    res["load_after"] = float(compare.loadavg()[0])
    return res


def render(res):
    rows = res.get("rows", [])
    sizes = sorted({int(s) for r in rows for s in r["samples"]["after"]})
    L = [f"Base `{res['base']}` against `{res['head']}`, both Release, "
         "`jaccl-bench -d float32` over each plane (`-t`), builds alternated "
         "inside each repetition. Each cell: the median of the repetitions' "
         "mean times after / before (below 1.00 the new build is faster), "
         "then the two medians in µs; **bold**: the new build's fastest "
         "repetition is slower than the base's slowest (outside this "
         "run's noise). Load average "
         f"{res['load_before']:.1f} before, {res['load_after']:.1f} after "
         "(2 cores). The memcpy and loopback ceilings of the machine are in "
         "the core tables above.\n"]
    L.append("| op | plane | ranks | " +
             " | ".join(compare.human(s) for s in sizes) + " |")
    L.append("|---|---|---:|" + "---:|" * len(sizes))
    for r in rows:
        cells = []
        for s in sizes:
            b = r["samples"]["before"].get(str(s))
            a = r["samples"]["after"].get(str(s))
            if not a or not b:
                cells.append("–")
                continue
            mb, ma = statistics.median(b), statistics.median(a)
            txt = f"{ma / mb:.2f} ({mb:.1f} → {ma:.1f})"
            cells.append(f"**{txt}**" if min(a) > max(b) else txt)
        L.append(f"| {r['op']} | {r['plane']} | {r['n']} | " +
                 " | ".join(cells) + " |")
    L.append("")
    reps = min((len(v) for r in rows for v in r["samples"]["after"].values()),
               default=0)
    if reps:
        # Two builds that do not differ at all still give a bold cell when
        # every "after" repetition happens to be the slower: 1 in C(2r, r).
        chance = 1 / comb(2 * reps, reps)
        cells = sum(len(r["samples"]["after"]) for r in rows)
        L.append(f"With {reps} repetitions of each build, two identical builds "
                 f"give a bold cell {chance:.0%} of the time by chance alone: "
                 f"about {chance * cells:.1f} of these {cells} cells.\n")
    L.append("The 4-rank runs put four processes on the two cores.\n")
    return L
