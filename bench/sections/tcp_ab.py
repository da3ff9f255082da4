# TCP before and after the fabric refactor (issue 12): the same float32
# all_sum sweep over JACCL_TRANSPORT=tcp from two builds, this tree and a
# base revision (JACCL_AB_BASE, default 2186b56: main just before the
# endpoint layer was merged), alternated inside every repetition so both see
# the same machine. The base is checked out with `git worktree` under
# build-ab/ and built in Release like bench/compare's own build.
import os
import statistics
import subprocess

TITLE = "TCP before and after the endpoint layer (A/B, one alternating run)"
# bench/compare itself (human, free_port, json_lines, loadavg, ...), set
# on the module by load_sections before it runs.
compare = globals()["compare"]

BASE = os.environ.get("JACCL_AB_BASE", "2186b56")
RANKS = (2, 4)
GROUPS = [("8", "4K", 8, 50, 500), ("16K", "1M", 4, 10, 100),
          ("4M", "64M", 4, 3, 10)]
QUICK_GROUPS = [("8", "8", 8, 20, 200), ("1M", "1M", 4, 3, 20)]


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


def _sweep(ctx, exe, n, g):
    lo, hi, f, w, it = g
    cmd = [exe["run"], "-n", str(n), "--no-prefix",
           "--env", "JACCL_IFNAME=127.0.0.1", "--env", "JACCL_TRANSPORT=tcp",
           "--", exe["bench"], "-q", "-d", "float32", "-t", "tcp",
           "-o", "all_sum", "-b", lo, "-e", hi, "-f", str(f), "-w", str(w),
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
        "load_before": float(compare.loadavg()[0]), "ranks": {}}
    for n in RANKS:
        samples = {"before": {}, "after": {}}
        for rep in range(reps):
            # Alternate which build goes first, so neither always follows a
            # warm (or a disturbed) run.
            order = [("before", base), ("after", new)]
            if rep % 2:
                order.reverse()
            for g in groups:
                for name, exe in order:
                    ctx["log"](f"tcp_ab n={n} rep {rep} {name} {g[0]}-{g[1]}")
                    for size, us in _sweep(ctx, exe, n, g).items():
                        samples[name].setdefault(str(size), []).append(us)
        res["ranks"][str(n)] = samples
    res["load_after"] = float(compare.loadavg()[0])
    return res


def render(res):
    L = [f"Base `{res['base']}` (before the endpoint layer) against "
         f"`{res['head']}`, both Release, `jaccl-bench -t tcp -o all_sum` "
         "float32 over loopback, builds alternated inside each repetition; "
         "median of the repetitions' mean times. Load average "
         f"{res['load_before']:.1f} before, {res['load_after']:.1f} after "
         "(2 cores). The loopback stream and memcpy ceilings of the same "
         "machine are in the tables above (bench/compare's core run).\n"]
    for n, s in res["ranks"].items():
        L.append(f"**{n} ranks**\n")
        L.append("| size | before (us), median [range] | after (us), median "
                 "[range] | after / before time |")
        L.append("|---|---|---|---|")
        sizes = sorted(set(s["before"]) & set(s["after"]), key=int)

        def cell(xs):
            return (f"{statistics.median(xs):.1f} [{min(xs):.0f}-"
                    f"{max(xs):.0f}]")
        for size in sizes:
            b = statistics.median(s["before"][size])
            a = statistics.median(s["after"][size])
            L.append(f"| {compare.human(int(size))} | {cell(s['before'][size])} | "
                     f"{cell(s['after'][size])} | {a / b:.2f} |")
        L.append("")
    L.append("Below 1.00: the new code is faster. A ratio whose two ranges "
             "overlap is within this VM's noise. The 4-rank runs put four "
             "processes on the two cores, which is why the load rises "
             "during the run.\n")
    return L
