"""Rooflines for bench/compare: the least time one call of a collective can
take on this machine, from the bytes each rank must move for the op's
algorithm class and the ceilings measured in the same run. The models are
written out in bench/README.md ("Rooflines"); MODEL below is their short
form for BENCHMARKS.md.

Every function takes `c`, compare's ceilings dict (JSON keys may be strings
after a round trip through a file), and returns seconds.
"""
import math
import os

# Plane of each library label, for judging a row against the right model.
PLANE = {"jaccl-shm": "shm", "mpi-sm": "shm", "jaccl-tcp": "tcp",
         "mpi-tcp": "tcp", "gloo-tcp": "tcp"}

MODEL = [
    "**Roofline model** (the least time per call; `% roof` = roofline time "
    "/ measured time, so 100 % is the machine's limit; details in "
    "`bench/README.md`). S = the row's size (all_sum: each buffer; "
    "all_gather: the whole output; all_to_all(v): each rank's whole "
    "input), n ranks on C cores, user buffers private to each process "
    "(no rank can read a peer's buffer except through a copy the peer makes "
    "into shared memory, or a kernel copy, `process_vm_readv`). Reads and "
    "writes cost alike: a rank that reads R and writes W bytes takes "
    "(R + W) / 2 / memcpy, memcpy being the fastest of glibc's, a plain "
    "16-byte load/store loop and a streaming-store copy (each side of a "
    "cross-core copy too: on some CPUs glibc's `rep movsb` runs at a tenth "
    "of the loop's rate). Every rate is this run's:",
    "- *shm*: every transfer between ranks by the cheaper of staging "
    "(the owner copies into the segment, the receiver reads from it, each "
    "at this run's cross-core copy rate: `memcpy_bench`'s xcore) and a "
    "kernel copy (CMA, at its measured rate: one process alone, capped "
    "like memcpy at the all-cores aggregate, every CPU's process reading "
    "its neighbour's buffer at once, / cores in use). *all_sum* = "
    "reduce-scatter + "
    "all-gather, the least traffic with private buffers: each rank reduces "
    "its 1/n from n inputs (reads S, writes S/n), its peers' slices reach "
    "it, and the other (n-1)/n of the result reaches its output; all staged "
    "that is R = (3n-2)/n S, W = 2S (n = 2: two memcpys of S if crossing "
    "cores were free). "
    "*all_gather*: own block copied, n-1 blocks in (staged: R = S, W = "
    "(n+1)/n S in all; n = 2 by CMA: one local copy plus one cross-process "
    "read). *all_to_all(v)*: own block copied, what a rank sends and "
    "receives staged, or every block by one CMA copy that its receiver or "
    "its sender makes, shared so that the ranks' times are as even as "
    "they can be (a skewed all_to_allv's busiest receiver need not copy "
    "all it receives). *broadcast*: S at the "
    "lesser of memcpy and CMA time.",
    "- *TCP* (loopback: bound by the CPU copying every byte through the "
    "kernel on both sides): each rank must send s and receive r bytes "
    "(all_sum 2(n-1)/n S each way, all_gather and all_to_all (n-1)/n S, "
    "all_to_allv its off-diagonal counts); t_rank = s x (CPU-seconds per "
    "byte sent) + r x (per byte received), both from iperf3 in this run "
    "(its rate over the CPU share each side used; the cheapest of an "
    "autotuned and a 256 KiB window).",
    "- *cores*: a rank has a core to itself while n <= C; beyond, the "
    "ranks' work shares the C cores (job time = max(slowest rank, sum of "
    "the ranks' times / C): 4 ranks on 2 cores get half a core each). "
    "memcpy is the single-core rate at the message's size (the smallest "
    "measured buffer >= S), capped at the all-cores aggregate / cores in "
    "use (memory bandwidth shared); with k ranks a core, every rate is "
    "read at k x S (k ranks' buffers share that core's caches).",
    "- *latency floor* (small sizes; best batches, not medians): shm one "
    "cross-core cache-line handoff (`memcpy_bench handoff`), or, with more "
    "ranks than cores, one switch per rank sharing a core (ranks/core x the "
    "measured same-core handoff); TCP ceil(log2 n) one-way 8-byte loopback "
    "latencies (`tcp_rtt`, blocking or busy-polling, whichever was faster; "
    "all_to_all(v): one). Roofline = max(latency floor, bandwidth time).",
    "- What it leaves out, so that it stays a bound: page faults, "
    "synchronisation beyond the floor, the float adds (at copy speed), "
    "overlap being imperfect; ranks sharing a core are assumed to be "
    "placed so that as few transfers as possible cross cores.",
]


def _at(table, b):
    """Entry of {size: value} at the smallest measured size >= b (the
    largest if none)."""
    if not table:
        return None
    sizes = sorted(int(k) for k in table)
    pick = next((k for k in sizes if k >= b), sizes[-1])
    return table.get(pick) if pick in table else table.get(str(pick))


def cores(c):
    v = c.get("cores")
    if v:
        return int(v)
    at = c.get("memcpy_at") or {}
    for e in at.values():
        if e.get("cores"):
            return int(e["cores"])
    return os.cpu_count() or 1


def mem_rate(c, b, active):
    """Bytes/s one rank copies at size b while `active` ranks copy at
    once (single-core memcpy, capped by the all-cores aggregate share)."""
    e = _at(c.get("memcpy_at") or {}, b) or c.get("memcpy") or {}
    # The fastest of memcpy, a plain load/store loop (glibc's `rep movsb`
    # is slower on some CPUs) and a copy with streaming stores (which wins
    # once the buffers outgrow the caches).
    m1 = max(e.get("memcpy_median_gbps") or float("nan"),
             e.get("loop_median_gbps") or 0, e.get("nt_median_gbps") or 0)
    agg = e.get("memcpy_all_cores_gbps")
    k = max(1, min(active, cores(c)))
    if agg and k > 1:
        m1 = min(m1, agg / k)
    return m1 * 1e9


def cma_rate(c, b, active):
    """Bytes/s one rank reads from a peer by CMA at size b while `active`
    ranks do so at once (one process alone, capped by the share of the
    all-cores aggregate where the run measured it: the ranks of a
    collective make their kernel copies together)."""
    e = _at(c.get("memcpy_at") or {}, b) or {}
    v = e.get("cma_median_gbps")
    if not v:
        return None
    agg = e.get("cma_all_cores_gbps")
    k = max(1, min(active, cores(c)))
    if agg and k > 1:
        v = min(v, agg / k)
    return v * 1e9


def tcp_cost(c):
    """(seconds per byte sent, per byte received) of CPU time over loopback:
    the cheapest of this run's iperf3 tests, each rate divided by the CPU
    share its side used (loopback TCP is bound by the CPU copying through
    the kernel, not by a wire). None without CPU figures (older reports: a
    stream's rate alone is no bound, the runs beat it)."""
    best_s = best_r = None
    for v in (c.get("iperf") or {}).values():
        if not v or not v.get("gbps"):
            continue
        for key, pct in (("s", v.get("sender_cpu_pct")),
                         ("r", v.get("receiver_cpu_pct"))):
            if not pct:
                continue
            cost = (pct / 100) / (v["gbps"] * 1e9)
            if key == "s":
                best_s = cost if best_s is None else min(best_s, cost)
            else:
                best_r = cost if best_r is None else min(best_r, cost)
    if best_s is None or best_r is None:
        return None
    return best_s, best_r


def a2av_counts(pattern, b, n, esz=4):
    """bench_pattern.h's counts, in bytes: [src][dst]."""
    elems = b // esz
    if pattern != "moe":
        row = [elems // n * esz] * n
    else:
        total = sum(1.0 / (j + 1) for j in range(n))
        row = [0] * n
        for j in range(n - 1, 0, -1):
            row[j] = int(elems / (j + 1) / total)
        row[0] = elems - sum(row[1:])
        row = [x * esz for x in row]
    return [list(row) for _ in range(n)]


def _job(per_rank, c, n):
    """Job time from per-rank times: max(slowest, sum / cores)."""
    return max(max(per_rank), sum(per_rank) / cores(c))


def xcore_costs(c, b, n, m):
    """Seconds per byte of the owner's copy into shared memory (cw) and of a
    peer's copy out of it (cr): this run's cross-core copies (the faster
    pair of cached and streaming stores on the owner's side); ranks that
    share a core exchange at local speed, so with k ranks a core only
    (n - k) / (n - 1) of a rank's peer traffic crosses cores. Without
    cross-core figures (older reports): a local copy each."""
    e = _at(c.get("memcpy_at") or {}, b) or {}
    pairs = [(e.get("xcore_write_gbps"), e.get("xcore_read_gbps")),
             (e.get("xcore_nt_write_gbps"), e.get("xcore_nt_read_gbps"))]
    pairs = [(w * 1e9, r * 1e9) for w, r in pairs if w and r]
    if not pairs:
        return 1 / m, 1 / m
    w, r = min(pairs, key=lambda p: 1 / p[0] + 1 / p[1])
    k = math.ceil(n / cores(c))
    f = (n - k) / (n - 1) if n > 1 else 1
    return f / w + (1 - f) / m, f / r + (1 - f) / m


def working_size(c, b, n):
    """The buffer size whose memcpy_bench figures judge a message of b
    bytes at n ranks: a rank's buffers (input and output, each at most b)
    occupy what a memcpy of b does (source and destination), and k ranks
    sharing a core put k times that in its caches, so the rates are read at
    k x b (all_sum at 4 ranks on 2 cores and 4 MiB: the 8 MiB figures)."""
    return b * math.ceil(n / cores(c))


def _shm_rank_times(op, n, b, c, pattern):
    w = working_size(c, b, n)
    m = mem_rate(c, w, n)
    x = cma_rate(c, w, n)
    cw, cr = xcore_costs(c, w, n, m)
    loc = 1 / (2 * m)  # a local read, or a local write, per byte
    rx, wx = cr - loc, cw - loc  # reading / writing across cores
    cma = (1 / x) if x else float("inf")
    S = float(b)
    if op in ("all_sum", "sum_scatter"):
        # Reduce-scatter: the own 1/n from n inputs (the own slice read and
        # the output written locally); the peers' slices come in staged
        # (owner's copy in, read across cores by the reduction) or by CMA
        # into a private buffer read locally.
        peers = (n - 1) / n * S
        local = S / n * 2 * loc
        slices_in = min(peers * (cw + rx), peers * (cma + loc))
        if op == "sum_scatter":
            return [local + slices_in] * n
        # All-gather of the reduced slices: the reduction also writes its
        # slice to the segment and every rank copies the others out, or
        # each reads them from its peers' outputs by CMA.
        out = min(S / n * wx + peers * cr, peers * cma)
        return [local + slices_in + out] * n
    if op == "all_gather":
        blk = S / n
        # The own block copied locally; staged: written once more into the
        # segment from the same read, the n-1 others copied out.
        staged = blk * wx + (n - 1) * blk * cr
        return [blk / m + min(staged, (n - 1) * blk * cma)] * n
    if op == "broadcast":
        root = min(S * cw, 0 if x else float("inf"))
        return [root] + [min(S * cr, S * cma)] * (n - 1)
    if op in ("all_to_all", "all_to_allv"):
        cnt = a2av_counts(pattern if op == "all_to_allv" else "uniform",
                          b, n)
        # By CMA each block's copy may be made by either end, so no rank
        # need take longer than the ranks' average (nor than its own
        # block's copy).
        owns = [cnt[r][r] / m for r in range(n)]
        cross = sum(cnt[q][r] for q in range(n) for r in range(n) if q != r)
        by_cma = max(max(owns), (sum(owns) + cross * cma) / n)
        res = []
        for r in range(n):
            sent = sum(cnt[r][j] for j in range(n) if j != r)
            got = sum(cnt[q][r] for q in range(n) if q != r)
            res.append(min(owns[r] + sent * cw + got * cr, by_cma))
        return res
    return None


def _tcp_rank_times(op, n, b, c, pattern):
    cost = tcp_cost(c)
    if cost is None:
        return None
    cs, cr = cost
    S = float(b)

    def t(sent, got):
        return sent * cs + got * cr
    if op == "all_sum":
        v = 2 * (n - 1) / n * S
        return [t(v, v)] * n
    if op in ("all_gather", "sum_scatter", "all_to_all"):
        v = (n - 1) / n * S
        return [t(v, v)] * n
    if op == "broadcast":
        # Every non-root receives S; the root sends it at least once.
        return [t(S, 0)] + [t(0, S)] * (n - 1)
    if op == "all_to_allv":
        cnt = a2av_counts(pattern, b, n)
        return [t(sum(cnt[r][j] for j in range(n) if j != r),
                  sum(cnt[q][r] for q in range(n) if q != r))
                for r in range(n)]
    return None


def latency_floor(plane, op, n, c):
    """Seconds, or None when this run did not measure the floor (reports
    from before the handoff and busy-poll ceilings existed). The floors are
    the best batches (what the machine allows), not the medians."""
    ho = c.get("handoff") or {}
    k = math.ceil(n / cores(c))
    sw = (ho.get("switch_best_ns") or 0) * 1e-9
    if plane == "shm":
        if ho.get("line_oneway_best_ns") is None:
            return None
        line = ho["line_oneway_best_ns"] * 1e-9
        return max(line, k * sw if k > 1 else 0)
    spin, block = c.get("tcp_rtt_spin"), c.get("tcp_rtt")
    if not spin or not ho:
        return None
    one = min(spin["rtt_best_us"], block["rtt_best_us"]) / 2 * 1e-6
    rounds = 1 if op in ("all_to_all", "all_to_allv") else \
        max(1, math.ceil(math.log2(n)))
    return max(rounds * one, k * sw if k > 1 else 0)


def seconds(plane, op, n, b, c, pattern="moe"):
    """Roofline time (s) of one call, or None when there is no model."""
    if n < 2 or not c:
        return None
    f = _shm_rank_times if plane == "shm" else _tcp_rank_times
    try:
        per = f(op, n, b, c, pattern)
    except (TypeError, ZeroDivisionError, KeyError):
        return None
    if not per or any(v != v for v in per):
        return None
    floor = latency_floor(plane, op, n, c)
    if floor is None:
        # No floor measured: only where bandwidth surely dominates.
        return _job(per, c, n) if b >= 64 << 10 else None
    return max(floor, _job(per, c, n))


def fraction(plane, op, n, b, c, measured_us, pattern="moe"):
    """Roofline time / measured time (1.0 = at the machine's limit)."""
    t = seconds(plane, op, n, b, c, pattern)
    if t is None or not measured_us:
        return None
    return t / (measured_us * 1e-6)


def ceilings_line(c):
    """The rates the rooflines use, one line."""
    at = c.get("memcpy_at") or {}
    parts = []
    for b in sorted(int(k) for k in at):
        e = at.get(b) or at.get(str(b))
        s = f"{_human(b)} {e['memcpy_median_gbps']:.1f}"
        if e.get("loop_median_gbps"):
            s += f" / loop {e['loop_median_gbps']:.1f}"
        if e.get("nt_median_gbps"):
            s += f" / streaming {e['nt_median_gbps']:.1f}"
        if e.get("memcpy_all_cores_gbps"):
            s += f" (all cores {e['memcpy_all_cores_gbps']:.1f}"
            if e.get("cma_median_gbps"):
                s += f", CMA {e['cma_median_gbps']:.1f}"
                if e.get("cma_all_cores_gbps"):
                    s += f" / all cores {e['cma_all_cores_gbps']:.1f}"
            s += ")"
        parts.append(s)
    txt = "memcpy " + ", ".join(parts) + " GB/s"
    cost = tcp_cost(c)
    if cost:
        txt += (f"; loopback TCP {c.get('iperf_1M', float('nan')):.2f} GB/s "
                f"one stream, {1e-9 / cost[0]:.1f} / {1e-9 / cost[1]:.1f} GB "
                "per CPU-second sent / received")
    elif c.get("iperf_1M"):
        txt += (f"; loopback TCP one stream {c['iperf_1M']:.2f} GB/s (no CPU "
                "figures in this run: no TCP roofline)")
    ho = c.get("handoff") or {}
    if ho.get("line_oneway_best_ns") is not None:
        txt += (f"; cache-line handoff {ho['line_oneway_best_ns']:.0f} ns, "
                f"same-core switch {ho.get('switch_best_ns') or 0:.0f} ns "
                "(best batches)")
    to = c.get("touch") or {}
    if to.get("user_fault_median_ns") is not None:
        txt += (f"; a fresh page {to['user_fault_median_ns'] / 1e3:.1f} us "
                f"to fault, {to['kernel_first_write_median_ns'] / 1e3:.1f} "
                "us more at the kernel's first write")
    sp, bl = c.get("tcp_rtt_spin"), c.get("tcp_rtt")
    if sp and bl:
        txt += (f"; TCP 8 B one-way "
                f"{min(sp['rtt_best_us'], bl['rtt_best_us']) / 2:.1f} us "
                "(best of blocking and busy-poll)")
    return txt


def _human(b):
    for unit, k in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= k and b % k == 0:
            return f"{b // k} {unit}"
    return f"{b} B"
