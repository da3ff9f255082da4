"""bench/compare section: all_to_all and all_to_allv, jaccl vs Open MPI's
MPI_Alltoall and MPI_Alltoallv.

float32 on 2 and 4 ranks, 1 KiB .. 16 MiB of input per rank (the whole
buffer), over jaccl shm, jaccl TCP, Open MPI default (shared memory) and
Open MPI forced to TCP: all_to_all, and all_to_allv with two patterns of
counts (tools/bench_pattern.h): `moe` (every rank sends all its input,
split over the ranks in Zipf(1) proportions, rank 0 hottest: the uneven
traffic of mixture-of-experts routing) and `uniform` (all_to_all's counts
through the v interface). Every (op, library) pair is alternated inside
every repetition, the order rotated per repetition, exactly like the core
sweeps (jaccl-bench / mpi_bench -o all_to_all | all_to_allv -p PATTERN).
Ceilings measured in the same run via compare's ceilings(); rooflines from
bench/roofline.py.
"""
import statistics

TITLE = "all_to_all and all_to_allv: jaccl vs Open MPI"
# bench/compare itself (human, free_port, json_lines, loadavg, ...), set
# on the module by load_sections before it runs.
compare = globals()["compare"]
LIBS = ["jaccl-shm", "mpi-sm", "jaccl-tcp", "mpi-tcp"]
# (op, pattern) in the order of the tables.
OPS = [("all_to_all", None), ("all_to_allv", "moe"),
       ("all_to_allv", "uniform")]


def _groups(quick):
    # (min, max, factor, warmup, iters). The large groups warm up past
    # jaccl's shm tuner trials (compare.TUNER_WARM). Each job
    # times at least ~30 ms at its smallest size, many scheduler slices: at
    # 20 calls of 4 MiB (~16 ms over TCP) one preemption moved a row by
    # 10 %, and 4 MiB over TCP changed sides between runs. The largest
    # group measures the steady state: the first calls after the tuner's
    # trials settle slowly (2-rank shm all_to_allv of 4 MiB, 2026-12-06:
    # 360-630 us a call over 60 calls after 30 warm-up calls, 263-294
    # over 300), so it warms up 30 calls longer and times 300. From 4 KiB
    # the smallest group is tuned too.
    w = compare.TUNER_WARM
    if quick:
        return [("4K", "4K", 4, w, 200), ("1M", "1M", 4, w, 20)]
    return [("1K", "16K", 4, w, 1000), ("64K", "1M", 4, w, 300),
            ("4M", "16M", 4, w + 30, 300)]


def _cmd(exe, lib, n, op, pattern, g, tmpdir):
    cmd = compare.lib_cmd(exe, lib, n, op, g, tmpdir)
    if cmd is not None:
        cmd += ["-c"]  # one checked call per size, before the timed ones
        if pattern:
            cmd += ["-p", pattern]
    return cmd


def run(ctx):
    log, runner, exe = ctx["log"], ctx["run"], ctx["exe"]
    res = {"load_before": compare.loadavg(), "rows": [], "errors": []}
    res["ceilings"] = compare.ceilings(exe, ctx["quick"])
    reps = max(1, ctx["reps"])
    raw = []
    combos = [(op, pat, lib) for op, pat in OPS for lib in LIBS]
    for rep in range(reps):
        for n in (2, 4):
            for gi, g in enumerate(_groups(ctx["quick"])):
                k = (rep * 5 + gi + n) % len(combos)
                for op, pat, lib in combos[k:] + combos[:k]:
                    cmd = _cmd(exe, lib, n, op, pat, g, ctx["tmpdir"])
                    if cmd is None:
                        continue
                    try:
                        out, err, _ = runner(cmd, timeout=300)
                    except RuntimeError as e:
                        res["errors"].append(
                            f"{lib} {op}{' ' + pat if pat else ''} {n} ranks "
                            f"{g[0]}..{g[1]}: {str(e).splitlines()[0]}")
                        log("   FAILED " + res["errors"][-1])
                        continue
                    for j in compare.timed_rows(out, err, lib, op, n):
                        j["lib"], j["rep"] = lib, rep
                        j["op"], j["pattern"] = op, pat
                        raw.append(j)
                log(f"   all_to_all(v) rep {rep + 1}/{reps} {n} ranks "
                    f"{g[0]}..{g[1]}")
    # Median over repetitions of each rank-average.
    cells = {}
    for j in raw:
        cells.setdefault((j["op"], j["pattern"] or "", j["ranks"], j["lib"],
                          j["bytes"]), []).append(j)
    for (op, pat, n, lib, b), js in sorted(cells.items()):
        ways = {}
        for x in js:
            compare.count_way(ways, x.get("way"))
        res["rows"].append({
            "op": op, "pattern": pat or None, "ranks": n, "lib": lib,
            "bytes": b,
            "avg_us": statistics.median(x["avg_us"] for x in js),
            "busbw_gbps": statistics.median(x["busbw_gbps"] for x in js),
            "spread": ((max(x["avg_us"] for x in js)
                        - min(x["avg_us"] for x in js))
                       / statistics.median(x["avg_us"] for x in js)),
            # Per repetition, for ratios paired within one (summary.paired).
            "by_rep": {x["rep"]: x["avg_us"] for x in js},
            "backend": js[0].get("backend"),
            "ways": ways,
            "wrong": max(x.get("wrong", 0) for x in js)})
    res["load_after"] = compare.loadavg()
    res["date"] = compare.now()
    res["commit"] = compare.commit()
    res["quick"], res["reps"] = ctx["quick"], reps
    res["groups"] = _groups(ctx["quick"])
    return res


def summary_rows(res):
    """Rows for the summary that opens BENCHMARKS.md (bench/summary.py)."""
    import summary
    return summary.a2a_rows(res)


def _us(v):
    return f"{v:.0f}" if v >= 100 else f"{v:.1f}"


def _when(res):
    if not res.get("date"):
        return ""
    return f"Run {res['date']} at {res.get('commit')}. "


def _timed(res):
    gs = res.get("groups")
    if not gs:
        return ""
    return ("Each job times " + ", ".join(
        f"{g[4]} calls from {g[0]} to {g[1]}B" for g in gs) + " after "
        + "/".join(str(g[3]) for g in gs) + " warm-up calls. ")


def render(res):
    import roofline
    import summary
    L = []
    c = res.get("ceilings") or {}
    L.append("float32 `all_to_all` and `all_to_allv` (`jaccl-bench -o "
             "all_to_all` / `-o all_to_allv -p moe|uniform`) against Open "
             "MPI's `MPI_Alltoall` / `MPI_Alltoallv` (`mpi_bench`, the same "
             "counts), every (op, library) pair alternated inside every "
             f"repetition (median of {res.get('reps')}; *speed-up*: the "
             "median over the repetitions of the ratio of the two times "
             "measured in each); bytes = the whole "
             "input per rank, time = the mean over ranks of each rank's mean "
             "per call. *moe*: every rank sends its whole input split over "
             "the ranks in Zipf(1) proportions (rank 0 hottest: 2 ranks 2/3 "
             "and 1/3, 4 ranks 48/24/16/12 %), so rank 0 receives 1.33x "
             "(2 ranks) or 1.92x (4 ranks) the mean; *uniform*: all_to_all's "
             "counts through the v call. *% roof*: roofline time / measured "
             "time (model in the summary and `bench/README.md`; all_to_allv's "
             "roofline is set by its busiest rank). " + _timed(res)
             + _when(res) + "Load average "
             f"before/after: {' '.join(res.get('load_before', []))} / "
             f"{' '.join(res.get('load_after', []))} (2 cores). Ceilings "
             f"(this run): {roofline.ceilings_line(c)}."
             + (" **Quick run.**" if res.get("quick") else ""))
    L.append("")
    rows = summary.a2a_rows(res)
    for row in rows:
        if row["plane"] != "shm":
            continue
        tcp = next((r for r in rows if r["op"] == row["op"]
                    and r["pattern"] == row["pattern"] and r["n"] == row["n"]
                    and r["plane"] == "TCP"), None)
        title = row["op"] + (f" ({row['pattern']})" if row["pattern"] else "")
        L.append(f"### {title}, {row['n']} ranks")
        L.append("")
        L.append("| bytes | jaccl shm µs | Open MPI µs | speed-up | % roof "
                 "| jaccl TCP µs | Open MPI TCP µs | speed-up | % roof |")
        L.append("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        sizes = sorted(set(row["jaccl"]) | set(tcp["jaccl"] if tcp else {}))
        for b in sizes:
            cells = [compare.human(b)]
            for r, peer in ((row, "Open MPI"), (tcp, "Open MPI TCP")):
                j = r["jaccl"].get(b) if r else None
                m = r["peers"].get(peer, {}).get(b) if r else None
                f = summary.roof(r, b) if r and j else None
                x = summary.ratio(r, b, peer) if r and j and m else None
                cells += [_us(j) if j else "–", _us(m) if m else "–",
                          f"{x:.2f}x" if x else "–",
                          f"{100 * f:.0f}%" if f is not None else "–"]
            L.append("| " + " | ".join(cells) + " |")
        L.append("")
        wl = compare.ways_line(sorted(
            ((r["bytes"], r.get("ways") or {}) for r in res.get("rows", [])
             if r["lib"] == "jaccl-shm" and r["op"] == row["op"]
             and r["pattern"] == row["pattern"] and r["ranks"] == row["n"]),
            key=lambda x: x[0]))
        if wl:
            L += [wl, ""]
    verdicts = []
    for row in rows:
        for name, ok, d in summary.targets(row):
            if name.startswith(">= Open MPI"):
                verdicts.append(
                    f"{summary._title(row)} {row['plane']} {row['n']} ranks: "
                    f"{'met' if ok else '**not met**'} ({d})")
    if verdicts:
        L.append("Target (issue 26: at least Open MPI at every size from "
                 "1 KiB to 16 MiB): " + "; ".join(verdicts) + ".")
        L.append("")
    bad = [r for r in res.get("rows", []) if r.get("wrong", 0) not in (0, -1)]
    if bad:
        L.append(f"**{len(bad)} rows had wrong results.**")
        L.append("")
    for e in res.get("errors", []):
        L.append(f"- failed: {e}")
    L.append("Reproduce: `bench/compare --section all_to_all`.")
    return L
