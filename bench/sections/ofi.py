# The ofi (libfabric) data plane: the provider's own fi_pingpong as the
# ceiling, jaccl's raw libfabric layer (tests/workers/ofi_node pingpong) and,
# once the ofi transport is integrated, `jaccl-bench -t ofi` all_sum rows,
# all in one run, for tcp;ofi_rxm (loopback) and shm.
import json
import os
import subprocess
import time

TITLE = "ofi (libfabric): tcp;ofi_rxm and shm beside fi_pingpong"
# bench/compare itself (human, free_port, json_lines, loadavg, ...), set
# on the module by load_sections before it runs.
compare = globals()["compare"]

PROVIDERS = [
    {"name": "tcp;ofi_rxm", "domain": "lo", "key": "tcp_rxm"},
    {"name": "shm", "domain": "", "key": "shm"},
]
PP_SIZES = [8, 65536, 1 << 20, 4 << 20, 16 << 20]


def _iters(size, quick):
    # Small counts: on a loaded 2-core machine a ping-pong waits a scheduler
    # round per message (measured: 64 KiB x 400 took > 300 s at load 39).
    n = {8: 1000, 65536: 200, 1 << 20: 50, 4 << 20: 20}.get(size, 10)
    return max(5, n // 5) if quick else n


def fi_pingpong(p, size, iters, log):
    """One fi_pingpong -e rdm -m tagged run (server + client on loopback):
    {usec (half round trip), mbps (fi_pingpong's MB/sec, 1e6 bytes)}."""
    port = compare.free_port()
    base = ["fi_pingpong", "-p", p["name"], "-e", "rdm", "-m", "tagged",
            "-I", str(iters), "-S", str(size)]
    if p["domain"]:
        base += ["-d", p["domain"]]
    srv = subprocess.Popen(base + ["-B", str(port)], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True,
                           start_new_session=True)
    try:
        time.sleep(0.3)
        cli = None
        for _ in range(20):  # the server may not listen yet
            try:
                cli = subprocess.run(base + ["-P", str(port), "127.0.0.1"],
                                     capture_output=True, text=True,
                                     timeout=180)
            except subprocess.TimeoutExpired:
                log(f"fi_pingpong {p['name']} {size}: timed out")
                return None
            if cli.returncode == 0:
                break
            time.sleep(0.3)
        srv.wait(timeout=60)
    finally:
        if srv.poll() is None:
            os.killpg(srv.pid, 9)
            srv.wait()
    if cli is None or cli.returncode != 0:
        log(f"fi_pingpong {p['name']} {size}: {cli.stderr[-300:] if cli else ''}")
        return None
    lines = cli.stdout.splitlines()
    for i, line in enumerate(lines[:-1]):
        if line.startswith("bytes"):  # the next line: 1m 50 =50 100m ...
            f = lines[i + 1].split()
            if len(f) >= 8:
                return {"usec": float(f[6]), "mbps": float(f[5])}
    return None


def raw_layer(ctx, worker, p, force):
    """tests/workers/ofi_node pingpong over 2 processes (cards through a
    directory)."""
    d = os.path.join(ctx["tmpdir"], f"ofi-{p['key']}-{int(force)}-{time.time_ns()}")
    os.makedirs(d)
    procs = []
    for r in range(2):
        env = dict(os.environ, JACCL_RANK=str(r), JACCL_SIZE="2",
                   TEST_SC_DIR=d, TEST_OFI_PROVIDER=p["name"],
                   TEST_OFI_DOMAIN=p["domain"],
                   TEST_OFI_FORCE_REGISTER="1" if force else "0",
                   TEST_OFI_BENCH_SECS="0.4" if ctx["quick"] else "1")
        procs.append(subprocess.Popen([worker, "pingpong"], env=env,
                                      stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True,
                                      start_new_session=True))
    outs = []
    for pr in procs:
        try:
            out, _ = pr.communicate(timeout=600)
        except subprocess.TimeoutExpired:
            os.killpg(pr.pid, 9)
            out, _ = pr.communicate()
        outs.append(out)
    rows = []
    for line in outs[0].splitlines():
        if line.startswith("{"):
            rows.append(json.loads(line))
    if not rows:
        ctx["log"](f"ofi_node pingpong {p['name']}: {outs[0][-500:]}")
    return rows


def jaccl_rows(ctx, p):
    exe = ctx["exe"]
    base = [exe["run"], "-n", "2", "--no-prefix",
            "--env", "JACCL_TRANSPORT=ofi",
            "--env", f"JACCL_OFI_PROVIDER={p['name']}",
            "--env", "JACCL_IFNAME=" + (p["domain"] or "127.0.0.1"),
            "--", exe["bench"], "-q", "-t", "ofi", "-o", "all_sum",
            "-d", "float32", "--json"]
    quick = ctx["quick"]
    # 8 B gets as many calls as fi_pingpong's 8-byte run (_iters), so the
    # latency ratio compares like with like; 20 calls after 2 warm-ups
    # measured 2.2 us where 100k calls averaged 1.1-1.4.
    small = str(_iters(8, quick))
    sweeps = [["-b", "8", "-e", "8", "-w", small, "-n", small],
              # The table's sizes (64 KiB-16 MiB), each after 5 warm-up
              # calls: the first calls on fresh buffers run 2-3x slower.
              ["-b", "64K", "-e", "16M", "-f", "4", "-w", "5",
               "-n", "5" if quick else "40"]]
    rows = []
    for extra in sweeps:
        try:
            out, _, _ = ctx["run"](base + extra, timeout=900)
        except RuntimeError as e:
            lines = [l for l in str(e).splitlines() if l.strip()]
            why = ([l for l in lines if "[jaccl]" in l] or lines[-1:]
                   or [str(e)])
            return {"error": why[0][-300:]}
        rows += compare.json_lines(out)
    return {"rows": rows}


def run(ctx):
    """Per provider: the raw layer once, then `reps` rounds that alternate
    fi_pingpong (every size) and jaccl's all_sum sweep, the order swapped
    every round, so a slow phase of the machine hits both alike; the table
    shows medians and each round's ratio."""
    log = ctx["log"]
    bdir = os.path.dirname(os.path.dirname(ctx["exe"]["run"]))
    worker = os.path.join(bdir, "tests", "workers", "ofi_node")
    reps = max(1, ctx["reps"])
    res = {"load_before": float(compare.loadavg()[0]), "providers": {},
           "reps": reps}
    try:
        ctx["run"](["cmake", "--build", bdir, "-j2", "--target",
                    "worker_ofi_node"], timeout=1800)
    except RuntimeError as e:
        log(f"ofi: cannot build worker_ofi_node: {e}")
    for p in PROVIDERS:
        log(f"== ofi {p['name']}")
        r = {"rounds": [], "raw": [], "raw_registered": []}
        if os.path.exists(worker):
            r["raw"] = raw_layer(ctx, worker, p, False)
            r["raw_registered"] = raw_layer(ctx, worker, p, True)
        for rep in range(reps):
            pp = {}

            def ping():
                for size in PP_SIZES:
                    pp[str(size)] = fi_pingpong(
                        p, size, _iters(size, ctx["quick"]), log)

            jr = {}

            def jaccl():
                jr.update(jaccl_rows(ctx, p))

            for step in ((ping, jaccl) if rep % 2 == 0 else (jaccl, ping)):
                step()
            r["rounds"].append({"fi_pingpong": pp, "jaccl": jr})
            log(f"   round {rep + 1}/{reps}")
        res["providers"][p["key"]] = r
    res["load_after"] = float(compare.loadavg()[0])
    return res


def _median(v):
    v = sorted(x for x in v if x is not None)
    return v[len(v) // 2] if v else None


def _rounds(r):
    """(fi_pingpong by size, jaccl rows by size) per round; results from
    before the rounds (one fi_pingpong and one sweep) count as one round."""
    rounds = r.get("rounds")
    if rounds is None:
        rounds = [{"fi_pingpong": r.get("fi_pingpong", {}),
                   "jaccl": r.get("jaccl", {})}]
    out = []
    for rd in rounds:
        jr = {row["bytes"]: row for row in rd["jaccl"].get("rows", [])}
        out.append((rd["fi_pingpong"], jr, rd["jaccl"].get("error")))
    return out


def render(res):
    L = []
    L.append(f"Load average {res['load_before']:.1f} before, "
             f"{res['load_after']:.1f} after (2 cores): figures taken on a "
             "loaded machine are low for every column alike.\n")
    reps = res.get("reps", 1)
    L.append("Ceiling: `fi_pingpong -e rdm -m tagged` of the same provider in "
             "the same run (ping-pong: half a round trip per message; its "
             "MB/s is bytes / half round trip). *raw* is jaccl's libfabric "
             "layer alone (`tests/workers/ofi_node pingpong`, the same "
             "ping-pong), *registered* the same with `force_register` (the "
             "bounce-slot / per-operation registration path verbs and efa "
             "take), *stream* the layer with 4 messages in flight. "
             "*all_sum* is `jaccl-bench -t ofi -o all_sum`, 2 ranks, busbw "
             "(8 B: the mean time of as many calls as fi_pingpong's 8-byte "
             f"run). fi_pingpong and all_sum alternate over {reps} round(s), "
             "the order swapped every round: their columns are medians, the "
             "ratio is of the medians, and *per round* lists each round's "
             "own ratio (lowest to highest).\n")
    for key, r in res["providers"].items():
        name = next(p["name"] for p in PROVIDERS if p["key"] == key)
        L.append(f"### {name}\n")
        raw = {x["bytes"]: x for x in r["raw"] if x["kind"] == "pingpong"}
        reg = {x["bytes"]: x for x in r["raw_registered"]
               if x["kind"] == "pingpong"}
        stream = {x["bytes"]: x for x in r["raw"] if x["kind"] == "stream"}
        rounds = _rounds(r)
        L.append("| size | fi_pingpong | raw | registered | stream | all_sum "
                 "(jaccl -t ofi) | all_sum / fi_pingpong | per round |")
        L.append("|---|---|---|---|---|---|---|---|")
        for size in PP_SIZES:
            small = size == 8
            # Per round: (pingpong figure, jaccl figure), latency in us for
            # 8 B, else GB/s.
            pairs = []
            for pp_by, jr, _ in rounds:
                pp, a = pp_by.get(str(size)), jr.get(size)
                pairs.append((
                    (pp["usec"] if small else pp["mbps"] / 1e3) if pp else None,
                    (a["avg_us"] if small else a["busbw_gbps"]) if a else None))
            ppm = _median([x for x, _ in pairs])
            am = _median([y for _, y in pairs])
            # Latency: jaccl / pingpong (lower is better); bandwidth:
            # jaccl / pingpong (higher is better).
            per = sorted(y / x for x, y in pairs if x and y)
            unit = "us" if small else "GB/s"
            cells = [compare.human(size)]
            cells.append(f"{ppm:.{1 if small else 2}f} {unit}"
                         if ppm else "failed")
            if small:
                cells.append(f"{raw[size]['half_rtt_us']:.1f} us"
                             if size in raw else "-")
                cells.append(f"{reg[size]['half_rtt_us']:.1f} us"
                             if size in reg else "-")
                cells.append("")
            else:
                for src in (raw, reg):
                    cells.append(f"{src[size]['gbps']:.2f} GB/s"
                                 if size in src else "-")
                cells.append(f"{stream[size]['gbps']:.2f} GB/s"
                             if size in stream else "")
            cells.append(f"{am:.{1 if small else 2}f} {unit}" if am else "-")
            cells.append(f"{am / ppm:.2f}x{' latency' if small else ''}"
                         if am and ppm else "")
            cells.append(", ".join(f"{x:.2f}" for x in per))
            L.append("| " + " | ".join(cells) + " |")
        L.append("")
        ex = [x for x in r["raw"] if x["kind"] == "exchange"]
        if ex:
            L.append(f"Raw 8-byte exchange (both ranks send at once, as a "
                     f"2-rank all_sum does): {ex[0]['us']:.1f} us.\n")
        errs = [e for _, _, e in rounds if e]
        if errs:
            L.append(f"`jaccl-bench -t ofi` failed: {errs[0]}.\n")
    L.append("Targets (issue 12): all_sum busbw at >= 4 MiB >= 0.8x "
             "fi_pingpong, 8 B latency within 1.5x. Hardware providers "
             "(verbs, efa, psm2/3, cxi, opx) could not be measured: this "
             "machine has no RDMA device.\n")
    return L
