"""bench/compare section: speed under load.

2-rank float32 all_sum at 8 B, 64 KiB and 1 MiB for every plane's default
(jaccl shm and jaccl TCP under jaccl-run's default binding, Open MPI's
default (shared memory) and Open MPI forced to TCP, each with its own
launcher's default binding), under four conditions in the same run:

- none: the machine as it is;
- busy1 / busy2: one or two busy-looping processes (`sh -c 'while :; do :;
  done'`, unbound, their own session) started just before the job and
  killed (by process group) after it;
- thread: rank 0's own process runs a computing thread beside it
  (`--busy-thread 0` of jaccl-bench / mpi_bench), which inherits the rank's
  binding as a framework's thread pool would.

Every (condition, library, size) triple is one job, alternated inside every
repetition (order rotated per repetition); each cell is the median of the
repetitions of the ranks' mean time per call. Targets (issue 26): under
every load, jaccl's default no slower than Open MPI's under the same load,
and never more than 2x slower than itself unloaded where Open MPI manages
that.

Roofline under load (bench/README.md): this section's ceilings, measured
unloaded before the jobs, give roofline.py's time for the op; it is
divided by the CPU share the busiest rank can have under the load when
every rank is bound to a CPU (SHARE), from 64 KiB (no model of a wake-up's
latency under load).
"""
import os
import signal
import statistics
import subprocess
import time

TITLE = "Speed under load: all_sum beside busy processes and threads"
compare = globals()["compare"]
PAIRS = [("shm", "jaccl-shm", "mpi-sm"), ("TCP", "jaccl-tcp", "mpi-tcp")]
LIBS = ["jaccl-shm", "mpi-sm", "jaccl-tcp", "mpi-tcp"]
LOADS = ["none", "busy1", "busy2", "thread"]
LOAD_TITLE = {"none": "unloaded", "busy1": "1 busy process",
              "busy2": "2 busy processes",
              "thread": "compute thread in rank 0"}
# (size, warm-up, calibrating iterations): every job is timed for at least
# MIN_MS (--min-ms: a calibrating pass sets the count), many scheduler
# slices, so a short run cannot fit between two preemptions; the tuned
# sizes warm up past jaccl's shm tuner trials.
SIZES = [("8", 200, 200), ("64K", compare.TUNER_WARM, 20),
         ("1M", compare.TUNER_WARM, 10)]
QUICK_SIZES = [("8", 50, 50), ("1M", 5, 5)]
MIN_MS, QUICK_MIN_MS = 300, 100
RANKS = 2
# The CPU share the busiest rank can have under each load, ranks bound to a
# CPU each: half beside a compute thread in its process (the kernel's fair
# share) or two busy processes; two thirds beside one (three tasks on two
# CPUs, the busy one moved between them).
SHARE = {"none": 1.0, "busy1": 2 / 3, "busy2": 0.5, "thread": 0.5}
ROOF_MIN = 64 << 10


class Busy:
    """k busy-looping shells in their own sessions, killed by group."""

    def __init__(self, k):
        self.ps = [subprocess.Popen(["sh", "-c", "while :; do :; done"],
                                    start_new_session=True)
                   for _ in range(k)]
        if k:
            time.sleep(0.05)  # running before the job starts

    def stop(self):
        for p in self.ps:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()


def run(ctx):
    log, runner, exe = ctx["log"], ctx["run"], ctx["exe"]
    sizes = QUICK_SIZES if ctx["quick"] else SIZES
    reps = max(1, ctx["reps"])
    res = {"load_before": compare.loadavg(), "errors": [], "raw": [],
           "ranks": RANKS, "quick": ctx["quick"], "reps": reps,
           "min_ms": QUICK_MIN_MS if ctx["quick"] else MIN_MS}
    res["ceilings"] = compare.ceilings(exe, ctx["quick"])
    combos = [(ld, lib, s) for ld in LOADS for lib in LIBS for s in sizes]
    for rep in range(reps):
        k = (rep * 7) % len(combos)
        for ld, lib, (size, w, it) in combos[k:] + combos[:k]:
            g = (size, size, 2, w, it)
            # Never under --rt's SCHED_FIFO: the load must be able to
            # take the cores from the job.
            cmd = compare._lib_cmd(exe, lib, RANKS, "all_sum", g,
                                   ctx["tmpdir"])
            if cmd is None:
                continue
            cmd += ["--min-ms", str(QUICK_MIN_MS if ctx["quick"] else MIN_MS)]
            if ld == "thread":
                cmd += ["--busy-thread", "0"]
            busy = Busy({"busy1": 1, "busy2": 2}.get(ld, 0))
            try:
                out, _, _ = runner(cmd, timeout=120, record=(rep == 0))
            except RuntimeError as e:
                res["errors"].append(f"{lib} {ld} {size}: "
                                     f"{str(e).splitlines()[0]}")
                log("   FAILED " + res["errors"][-1])
                continue
            finally:
                busy.stop()
            for j in compare.json_lines(out):
                if "bytes" in j and "avg_us" in j:
                    res["raw"].append({"load": ld, "lib": lib, "rep": rep,
                                       "bytes": j["bytes"],
                                       "avg_us": j["avg_us"]})
        log(f"   load rep {rep + 1}/{reps}")
    res["load_after"] = compare.loadavg()
    res["date"] = compare.now()
    res["commit"] = compare.commit()
    return res


def cells(res):
    """(load, lib, bytes) -> (median us, [all reps], {rep: us})."""
    acc = {}
    for r in res.get("raw", []):
        acc.setdefault((r["load"], r["lib"], r["bytes"]), []).append(r)
    return {k: (statistics.median(x["avg_us"] for x in v),
                [x["avg_us"] for x in v], {x["rep"]: x["avg_us"] for x in v})
            for k, v in acc.items()}


def _per(a, b):
    """a's time / b's, paired over the repetitions (summary.paired)."""
    import summary
    x = summary.paired(b[2], a[2])
    return x if x is not None else a[0] / b[0]


def loaded_roof_us(res, plane, ld, b):
    """The least time (us) of a call under load `ld` (SHARE), or None
    (small sizes, no ceilings in the results)."""
    import roofline
    c = res.get("ceilings")
    if not c or b < ROOF_MIN:
        return None
    t = roofline.seconds("shm" if plane == "shm" else "tcp", "all_sum",
                         res.get("ranks", RANKS), b, c)
    return t / SHARE[ld] * 1e6 if t else None


def verdicts(res):
    """[(plane, load, {bytes: (j, m, j0, m0)}, ok_vs_mpi, ok_vs_self,
    notes, beyond)] for every loaded condition; beyond: every failure of
    the second target is beyond the roofline under that load."""
    cl = cells(res)
    sizes = sorted({k[2] for k in cl})
    out = []
    for plane, jl, ml in PAIRS:
        for ld in LOADS[1:]:
            fig, ok1, ok2, notes, beyond = {}, True, True, [], True
            for b in sizes:
                j, m = cl.get((ld, jl, b)), cl.get((ld, ml, b))
                j0, m0 = cl.get(("none", jl, b)), cl.get(("none", ml, b))
                if not (j and m and j0 and m0):
                    continue
                fig[b] = (j[0], m[0], j0[0], m0[0])
                jm, jj, mm = _per(j, m), _per(j, j0), _per(m, m0)
                if jm > 1:
                    ok1 = False
                    notes.append(f"{compare.human(b)}: {jm:.2f}x "
                                 "Open MPI's time")
                if jj > 2 and mm <= 2:
                    ok2 = False
                    note = (f"{compare.human(b)}: {_x(jj)} itself unloaded "
                            f"(Open MPI {_x(mm)})")
                    roof = loaded_roof_us(res, plane, ld, b)
                    if roof and 2 * j0[0] < roof:
                        note += (", beyond the roofline under this load: "
                                 f"2x itself would be {roof / (2 * j0[0]):.0%}"
                                 f" of it; jaccl is at {roof / j[0]:.0%}")
                    else:
                        beyond = False
                    notes.append(note)
            if fig:
                out.append((plane, ld, fig, ok1, ok2, notes, beyond))
    return out


def _us(v):
    return f"{v:.0f}" if v >= 100 else (f"{v:.1f}" if v >= 1 else f"{v:.2f}")


def _x(v):
    return f"{v:.1f}x" if v >= 0.1 else f"{v:.2f}x"


def summary_table(res):
    """Rows for the summary that opens BENCHMARKS.md."""
    L = ["| plane (defaults) | load | 8 B: jaccl / Open MPI µs | 64 KiB | "
         "1 MiB | no slower than Open MPI | <= 2x itself unloaded (where "
         "Open MPI is) |", "|---|---|---|---|---|---|---|"]
    for plane, ld, fig, ok1, ok2, _, beyond in verdicts(res):
        row = [plane, LOAD_TITLE[ld]]
        for b in (8, 64 << 10, 1 << 20):
            f = fig.get(b)
            row.append(f"{_us(f[0])} / {_us(f[1])}" if f else "–")
        row += ["**pass**" if ok1 else "**FAIL**",
                "**pass**" if ok2 else
                ("**FAIL** (beyond the roofline under this load)" if beyond
                 else "**FAIL**")]
        L.append("| " + " | ".join(row) + " |")
    return L


def _when(res):
    if not res.get("date"):
        return ""
    return f"Run {res['date']} at {res.get('commit')}. "


def render(res):
    import roofline
    L = []
    L.append(f"float32 all_sum on {res.get('ranks', 2)} ranks, each plane's "
             "default: jaccl shm and jaccl TCP as `jaccl-run` starts them "
             "(its default binding), Open MPI's default (shared memory) and "
             "Open MPI forced to TCP as `mpirun` starts them (its default "
             "binding: a core per rank). Loads: one or two busy-looping "
             "processes (`sh -c 'while :; do :; done'`, unbound) started "
             "before each job and killed after it, or a computing thread in "
             "rank 0's own process (`--busy-thread 0`). Every (load, "
             "library, size) job alternates inside every repetition and is "
             f"timed for at least {res.get('min_ms', MIN_MS)} ms (a "
             "calibrating pass sets the call count, so no run fits between "
             "two preemptions); median "
             f"of {res.get('reps')} of the ranks' mean time per call (µs); "
             "*x unloaded*: the loaded time over the same library's unloaded "
             "time in this run. Ratios (*x unloaded*, *jaccl / Open MPI "
             "time*, the targets) are medians over the repetitions of the "
             "ratio within each repetition. The machine has 2 cores: two busy processes "
             "and two ranks make four runnable tasks. *Roofline under the "
             "load*: the op's roofline (model in the summary, this "
             "section's ceilings, measured unloaded before the jobs) over "
             "the CPU share the busiest rank can have under the load when "
             "each rank is bound to a CPU: 1/2 beside a compute thread or "
             "two busy processes, 2/3 beside one (three tasks on two CPUs); "
             "64 KiB and up (no model of a wake-up's latency under load). "
             + _when(res) + "Load average "
             f"before/after: {' '.join(res.get('load_before', []))} / "
             f"{' '.join(res.get('load_after', []))}."
             + (f" Ceilings: {roofline.ceilings_line(res['ceilings'])}."
                if res.get("ceilings") else "")
             + (" **Quick run.**" if res.get("quick") else ""))
    L.append("")
    cl = cells(res)
    sizes = sorted({k[2] for k in cl})
    for plane, jl, ml in PAIRS:
        L.append(f"### {plane}")
        L.append("")
        L.append("| load | size | jaccl µs [range] | x unloaded | Open MPI "
                 "µs [range] | x unloaded | jaccl / Open MPI time | "
                 "roofline µs under the load | % roof: jaccl / Open MPI |")
        L.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        for ld in LOADS:
            for b in sizes:
                j, m = cl.get((ld, jl, b)), cl.get((ld, ml, b))
                j0, m0 = cl.get(("none", jl, b)), cl.get(("none", ml, b))

                def cell(x):
                    return (f"{_us(x[0])} [{_us(min(x[1]))}-{_us(max(x[1]))}]"
                            if x else "–")
                roof = loaded_roof_us(res, plane, ld, b)

                def pct(x):
                    return f"{roof / x[0]:.0%}" if x and roof else "–"
                L.append(
                    f"| {LOAD_TITLE[ld]} | {compare.human(b)} | {cell(j)} | "
                    + (_x(_per(j, j0)) if j and j0 else "–") + " | "
                    + cell(m) + " | "
                    + (_x(_per(m, m0)) if m and m0 else "–") + " | "
                    + (f"{_per(j, m):.2f}x" if j and m else "–") + " | "
                    + (_us(roof) if roof else "–") + f" | {pct(j)} / "
                    + f"{pct(m)} |")
        L.append("")
    v = verdicts(res)
    if v:
        L.append("Targets (issue 26: no slower than Open MPI under the same "
                 "load; never more than 2x slower than itself unloaded where "
                 "Open MPI manages that):")
        L.append("")
        for plane, ld, _, ok1, ok2, notes, _ in v:
            L.append(f"- {plane}, {LOAD_TITLE[ld]}: "
                     f"{'met' if ok1 and ok2 else '**not met**'}"
                     + (f" ({'; '.join(notes)})" if notes else ""))
        L.append("")
    for e in res.get("errors", []):
        L.append(f"- failed: {e}")
    L.append("Reproduce: `bench/compare --section load`.")
    return L
