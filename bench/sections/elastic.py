# Elastic groups (issue 28): the time from a SIGKILL to a working shrunk
# group, beside a fresh init of the same size through jaccl-run, in one
# alternating run. bench/shrink_bench under `jaccl-run --elastic`: the last
# rank prints the time and SIGKILLs itself; the survivors' all_sum fails
# (detection), they revoke, shrink and run one all_sum on the new group
# (ready). The fresh init is `jaccl-run -n N -- first_allreduce`: the whole
# launch to a first all_sum (wall), and inside the ranks (init_ms of rank 0).
# Target: ready <= detection + 100 ms at 64 ranks, and below a fresh init at
# every size.
import statistics

TITLE = "Elastic groups: from a SIGKILL to a working shrunk group"
compare = globals()["compare"]

PLANES = (("shm", "auto"), ("tcp", "tcp"))
NS = (4, 16, 64)
QUICK_NS = (4, 8)


def _med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def _kill(ctx, n, transport, record):
    exe = ctx["exe"]
    out, _, _ = ctx["run"](
        [exe["run"], "-n", str(n), "--elastic", "--no-prefix",
         "--env", "JACCL_TRANSPORT=" + transport, "--",
         exe["shrink_bench"]], timeout=300, record=record, check=False)
    kill_at = None
    for line in out.splitlines():
        if line.startswith("KILL_AT "):
            kill_at = float(line.split()[1])
    js = [j for j in compare.json_lines(out) if "ready_at" in j]
    if kill_at is None or not js:
        return None
    j = js[0]
    if j.get("size", n - 1) != n - 1:
        ctx["log"](f"   elastic n={n}: the shrunk group has {j['size']} "
                   f"ranks, not {n - 1} (a survivor was declared failed)")
    return {"detect_ms": j["error_at"] - kill_at,
            "ready_ms": j["ready_at"] - kill_at,
            "shrink_ms": j["shrink_ms"], "backend": j["backend"]}


def _init(ctx, n, transport, record):
    exe = ctx["exe"]
    out, _, wall = ctx["run"](
        [exe["run"], "-n", str(n), "--no-prefix",
         "--env", "JACCL_TRANSPORT=" + transport, "--",
         exe["first_allreduce"]], timeout=300, record=record)
    js = [j for j in compare.json_lines(out) if "init_ms" in j]
    return {"wall_ms": wall * 1e3,
            "init_ms": js[0]["init_ms"] if js else None}


def run(ctx):
    if not ctx["exe"].get("shrink_bench"):
        return {"skipped": "bench/shrink_bench not built"}
    ns = QUICK_NS if ctx["quick"] else NS
    reps = 1 if ctx["quick"] else max(3, min(ctx["reps"], 5))
    res = {"reps": reps, "load_before": compare.loadavg(), "rows": [],
           "notes": []}
    for plane, transport in PLANES:
        for n in ns:
            kills, inits = [], []
            for rep in range(reps):
                # Alternate which goes first, so drift hits both alike.
                order = (_kill, _init) if rep % 2 == 0 else (_init, _kill)
                for f in order:
                    try:
                        r = f(ctx, n, transport, rep == 0)
                    except RuntimeError as e:
                        res["notes"].append(
                            f"{plane} n={n}: {str(e).splitlines()[0]}")
                        r = None
                    (kills if f is _kill else inits).append(r)
            ok = [k for k in kills if k]
            if len(ok) < len(kills):
                res["notes"].append(f"{plane} n={n}: {len(kills) - len(ok)}"
                                    f" of {len(kills)} kill runs gave no "
                                    f"result")
            row = {"plane": plane, "n": n,
                   "backend": ok[0]["backend"] if ok else None}
            for k in ("detect_ms", "shrink_ms", "ready_ms"):
                row[k] = _med([x[k] for x in ok])
            for k in ("wall_ms", "init_ms"):
                row["fresh_" + k] = _med([x[k] for x in inits if x])
            res["rows"].append(row)
            ctx["log"](f"   elastic {plane} n={n}: {row}")
    res["load_after"] = compare.loadavg()
    return res


def _fmt(v):
    return "-" if v is None else f"{v:.0f}"


def render(res):
    if "skipped" in res:
        return [res["skipped"]]
    L = ["Time from a SIGKILL of the last rank to a working shrunk group "
         "(`bench/shrink_bench` under `jaccl-run --elastic`: detection is "
         "when the slowest survivor's all_sum failed, ready when the slowest "
         "survivor's first all_sum on the shrunk group returned; shrink is "
         "the slowest survivor's error-to-ready time), beside a fresh "
         "`jaccl-run -n N -- first_allreduce` in the same alternating run "
         f"(medians of {res['reps']}; ms; load average "
         f"{' '.join(res['load_before'])} before, "
         f"{' '.join(res.get('load_after', []))} after).", "",
         "| plane | ranks | detection | shrink | SIGKILL to ready | "
         "fresh init (jaccl-run, wall) | fresh init (in the ranks) | "
         "ready <= detection + 100 ms | ready < fresh init |",
         "|---|---|---|---|---|---|---|---|---|"]
    for r in res["rows"]:
        ready, det = r["ready_ms"], r["detect_ms"]
        fresh = r["fresh_wall_ms"]
        t1 = ("-" if ready is None or det is None
              else "met" if ready <= det + 100 else "not met")
        t2 = ("-" if ready is None or fresh is None
              else "met" if ready < fresh else "not met")
        L.append(f"| {r['plane']} | {r['n']} | {_fmt(det)} | "
                 f"{_fmt(r['shrink_ms'])} | {_fmt(ready)} | {_fmt(fresh)} | "
                 f"{_fmt(r['fresh_init_ms'])} | {t1} | {t2} |")
    for note in res["notes"]:
        L.append("")
        L.append("- " + note)
    L.append("")
    L.append("The target (issue 28) is judged at 64 ranks for the first "
             "column and at every size for the second. A fresh init "
             "includes starting N processes; the shrunk group reuses the "
             "survivors, gathers its set-up over their control connections "
             "(through the first survivor) and then takes those connections "
             "over; on shared memory it plans from the old group's cards "
             "and sets up a new segment from one message of its creator "
             "(the survivors open its memfd through /proc), over TCP it "
             "takes the survivors' data connections over (each end drops "
             "what is left of the failed operation) and dials only wires "
             "the new plan adds.")
    return L
