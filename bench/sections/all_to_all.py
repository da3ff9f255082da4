"""bench/compare section: all_to_all, jaccl vs Open MPI's MPI_Alltoall.

float32 all_to_all on 2 and 4 ranks, 1 KiB .. 16 MiB of input per rank (the
whole buffer: size() blocks), over jaccl shm, jaccl TCP, Open MPI default
(shared memory) and Open MPI forced to TCP, the four alternated inside every
repetition (order rotated per repetition) exactly like the core sweeps
(jaccl-bench -o all_to_all, mpi_bench -o all_to_all). Ceilings measured in
the same run: single-core memcpy (memcpy_bench) and the TCP loopback stream
(iperf3), via compare's own ceilings().
"""
import statistics

TITLE = "all_to_all: jaccl vs Open MPI MPI_Alltoall"
# bench/compare itself (human, free_port, json_lines, loadavg, ...), set
# on the module by load_sections before it runs.
compare = globals()["compare"]
LIBS = ["jaccl-shm", "mpi-sm", "jaccl-tcp", "mpi-tcp"]


def _groups(quick):
    # (min, max, factor, warmup, iters). The large group warms up with 8
    # calls (jaccl's shm tuner runs two untimed calls and then measures six
    # per size class).
    if quick:
        return [("4K", "4K", 4, 20, 200), ("1M", "1M", 4, 8, 20)]
    return [("1K", "16K", 4, 50, 500), ("64K", "1M", 4, 10, 100),
            ("4M", "16M", 4, 8, 20)]


def run(ctx):
    # compare (set by bench/compare): its command builders and ceilings, so
    # the rows are timed the same way as the core sweeps.
    cmp = compare
    log, runner, exe = ctx["log"], ctx["run"], ctx["exe"]
    res = {"load_before": compare.loadavg(), "rows": [], "errors": []}
    res["ceilings"] = cmp.ceilings(exe, ctx["quick"])
    reps = max(1, ctx["reps"])
    raw = []
    for rep in range(reps):
        for n in (2, 4):
            for gi, g in enumerate(_groups(ctx["quick"])):
                k = (rep + gi + n) % len(LIBS)
                for lib in LIBS[k:] + LIBS[:k]:
                    cmd = cmp.lib_cmd(exe, lib, n, "all_to_all", g,
                                      ctx["tmpdir"])
                    if cmd is None:
                        continue
                    try:
                        out, _, _ = runner(cmd, timeout=300)
                    except RuntimeError as e:
                        res["errors"].append(f"{lib} {n} ranks {g[0]}..{g[1]}: "
                                             f"{str(e).splitlines()[0]}")
                        log("   FAILED " + res["errors"][-1])
                        continue
                    for j in cmp.json_lines(out):
                        if "bytes" in j and "avg_us" in j:
                            j["lib"], j["rep"] = lib, rep
                            raw.append(j)
                log(f"   all_to_all rep {rep + 1}/{reps} {n} ranks "
                    f"{g[0]}..{g[1]}")
    # Median over repetitions of each rank-average.
    cells = {}
    for j in raw:
        cells.setdefault((j["ranks"], j["lib"], j["bytes"]), []).append(j)
    for (n, lib, b), js in sorted(cells.items()):
        res["rows"].append({
            "ranks": n, "lib": lib, "bytes": b,
            "avg_us": statistics.median(x["avg_us"] for x in js),
            "busbw_gbps": statistics.median(x["busbw_gbps"] for x in js),
            "backend": js[0].get("backend"),
            "wrong": max(x.get("wrong", 0) for x in js)})
    res["load_after"] = compare.loadavg()
    res["quick"], res["reps"] = ctx["quick"], reps
    return res


def _us(v):
    return f"{v:.0f}" if v >= 100 else f"{v:.1f}"


def render(res):
    L = []
    c = res.get("ceilings") or {}
    mem = c.get("memcpy_at") or {}
    mems = ", ".join(f"{compare.human(int(k))} {v['memcpy_median_gbps']:.1f}"
                     for k, v in sorted(mem.items(), key=lambda kv: int(kv[0])))
    L.append("float32 `all_to_all` (`jaccl-bench -o all_to_all`) against "
             "Open MPI's `MPI_Alltoall` (`mpi_bench -o all_to_all`), the "
             "four alternated inside every repetition (median of "
             f"{res.get('reps')}); bytes = the whole input per rank "
             "(size() blocks of bytes / size()), time = the mean over ranks "
             "of each rank's mean per call, busbw = bytes / time × "
             "(n-1)/n. jaccl shm reads blocks of 64 KiB and more straight "
             "from the peers' inputs (process_vm_readv) when ranks do not "
             "outnumber cores (2 ranks here), and otherwise stages them "
             "through its slots (one sync per window); jaccl TCP posts "
             "every block to every peer at once (blocks of 512 KiB and more "
             "over both wires). Open MPI 4.1's shm (vader) also reads large "
             "messages with CMA. Load average before/after: "
             f"{' '.join(res.get('load_before', []))} / "
             f"{' '.join(res.get('load_after', []))} (2 cores). Ceilings "
             f"(this run): single-core memcpy {mems} GB/s; TCP loopback "
             f"stream (iperf3, 1 MiB writes) {c.get('iperf_1M', float('nan')):.2f} "
             "GB/s." + (" **Quick run.**" if res.get("quick") else ""))
    L.append("")
    rows = res.get("rows", [])
    verdicts = []
    for n in sorted({r["ranks"] for r in rows}):
        by = {(r["lib"], r["bytes"]): r for r in rows if r["ranks"] == n}
        sizes = sorted({b for (_, b) in by})
        L.append(f"### {n} ranks")
        L.append("")
        L.append("| bytes | jaccl shm µs | Open MPI shm µs | shm speed-up | "
                 "jaccl TCP µs | Open MPI TCP µs | TCP speed-up | jaccl shm "
                 "busbw GB/s | jaccl TCP busbw GB/s |")
        L.append("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        worst = {"shm": None, "tcp": None}
        for b in sizes:
            cell = {lib: by.get((lib, b)) for lib in LIBS}

            def us(lib):
                return _us(cell[lib]["avg_us"]) if cell[lib] else "–"

            def bus(lib):
                return f"{cell[lib]['busbw_gbps']:.2f}" if cell[lib] else "–"

            def ratio(j, m, key):
                if not cell[j] or not cell[m]:
                    return "–"
                x = cell[m]["avg_us"] / cell[j]["avg_us"]
                if b >= 64 << 10:
                    w = worst[key]
                    worst[key] = x if w is None else min(w, x)
                return f"{x:.2f}x"
            L.append(f"| {compare.human(b)} | {us('jaccl-shm')} | {us('mpi-sm')} | "
                     f"{ratio('jaccl-shm', 'mpi-sm', 'shm')} | "
                     f"{us('jaccl-tcp')} | {us('mpi-tcp')} | "
                     f"{ratio('jaccl-tcp', 'mpi-tcp', 'tcp')} | "
                     f"{bus('jaccl-shm')} | {bus('jaccl-tcp')} |")
        L.append("")
        for key, w in worst.items():
            if w is not None:
                verdicts.append(f"{n} ranks {key}: lowest jaccl / Open MPI "
                                f"speed-up from 64 KiB {w:.2f}x "
                                f"({'met' if w >= 1 else 'NOT met'})")
    if verdicts:
        L.append("Goal (ahead of Open MPI at every size from 64 KiB): "
                 + "; ".join(verdicts) + ".")
        L.append("")
    bad = [r for r in rows if r.get("wrong", 0) not in (0, -1)]
    if bad:
        L.append(f"**{len(bad)} rows had wrong results.**")
        L.append("")
    for e in res.get("errors", []):
        L.append(f"- failed: {e}")
    L.append("Reproduce: `bench/compare --section all_to_all`.")
    return L
