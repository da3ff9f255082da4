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
    log = ctx["log"]
    bdir = os.path.dirname(os.path.dirname(ctx["exe"]["run"]))
    worker = os.path.join(bdir, "tests", "workers", "ofi_node")
    res = {"load_before": float(compare.loadavg()[0]), "providers": {}}
    try:
        ctx["run"](["cmake", "--build", bdir, "-j2", "--target",
                    "worker_ofi_node"], timeout=1800)
    except RuntimeError as e:
        log(f"ofi: cannot build worker_ofi_node: {e}")
    for p in PROVIDERS:
        log(f"== ofi {p['name']}")
        r = {"fi_pingpong": {}, "raw": [], "raw_registered": []}
        for size in PP_SIZES:
            r["fi_pingpong"][str(size)] = fi_pingpong(
                p, size, _iters(size, ctx["quick"]), log)
        if os.path.exists(worker):
            r["raw"] = raw_layer(ctx, worker, p, False)
            r["raw_registered"] = raw_layer(ctx, worker, p, True)
        r["jaccl"] = jaccl_rows(ctx, p)
        res["providers"][p["key"]] = r
    res["load_after"] = float(compare.loadavg()[0])
    return res


def render(res):
    L = []
    L.append(f"Load average {res['load_before']:.1f} before, "
             f"{res['load_after']:.1f} after (2 cores): figures taken on a "
             "loaded machine are low for every column alike.\n")
    L.append("Ceiling: `fi_pingpong -e rdm -m tagged` of the same provider in "
             "the same run (ping-pong: half a round trip per message; its "
             "MB/s is bytes / half round trip). *raw* is jaccl's libfabric "
             "layer alone (`tests/workers/ofi_node pingpong`, the same "
             "ping-pong), *registered* the same with `force_register` (the "
             "bounce-slot / per-operation registration path verbs and efa "
             "take), *stream* the layer with 4 messages in flight. "
             "*all_sum* is `jaccl-bench -t ofi -o all_sum`, 2 ranks, busbw "
             "(8 B: the mean time of as many calls as fi_pingpong's 8-byte "
             "run).\n")
    for key, r in res["providers"].items():
        name = next(p["name"] for p in PROVIDERS if p["key"] == key)
        L.append(f"### {name}\n")
        raw = {x["bytes"]: x for x in r["raw"] if x["kind"] == "pingpong"}
        reg = {x["bytes"]: x for x in r["raw_registered"]
               if x["kind"] == "pingpong"}
        stream = {x["bytes"]: x for x in r["raw"] if x["kind"] == "stream"}
        jr = {}
        j = r.get("jaccl", {})
        for row in j.get("rows", []):
            jr[row["bytes"]] = row
        L.append("| size | fi_pingpong | raw | registered | stream | all_sum "
                 "(jaccl -t ofi) | all_sum / fi_pingpong |")
        L.append("|---|---|---|---|---|---|---|")
        for size in PP_SIZES:
            pp = r["fi_pingpong"].get(str(size))
            cells = [compare.human(size)]
            if size == 8:
                cells.append(f"{pp['usec']:.1f} us" if pp else "failed")
                cells.append(f"{raw[size]['half_rtt_us']:.1f} us"
                             if size in raw else "-")
                cells.append(f"{reg[size]['half_rtt_us']:.1f} us"
                             if size in reg else "-")
                cells.append("")
                a = jr.get(8)
                cells.append(f"{a['avg_us']:.1f} us" if a else "-")
                cells.append(f"{a['avg_us'] / pp['usec']:.2f}x latency"
                             if a and pp else "")
            else:
                cells.append(f"{pp['mbps'] / 1e3:.2f} GB/s" if pp else "failed")
                for src in (raw, reg):
                    cells.append(f"{src[size]['gbps']:.2f} GB/s"
                                 if size in src else "-")
                cells.append(f"{stream[size]['gbps']:.2f} GB/s"
                             if size in stream else "")
                a = jr.get(size)
                cells.append(f"{a['busbw_gbps']:.2f} GB/s" if a else "-")
                cells.append(f"{a['busbw_gbps'] / (pp['mbps'] / 1e3):.2f}x"
                             if a and pp else "")
            L.append("| " + " | ".join(cells) + " |")
        L.append("")
        ex = [x for x in r["raw"] if x["kind"] == "exchange"]
        if ex:
            L.append(f"Raw 8-byte exchange (both ranks send at once, as a "
                     f"2-rank all_sum does): {ex[0]['us']:.1f} us.\n")
        if "error" in j:
            L.append(f"`jaccl-bench -t ofi`: not built yet ({j['error']}).\n")
    L.append("Targets (issue 12): all_sum busbw at >= 4 MiB >= 0.8x "
             "fi_pingpong, 8 B latency within 1.5x. Hardware providers "
             "(verbs, efa, psm2/3, cxi, opx) could not be measured: this "
             "machine has no RDMA device.\n")
    return L
