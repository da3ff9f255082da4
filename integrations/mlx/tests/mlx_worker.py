# One rank of an MLX job on backend="jaccl", started by test_mlx_jaccl.py
# (under jaccl-run, or as plain processes for the cases that must not have a
# coordinator). `python mlx_worker.py SCENARIO`; prints "OK <scenario>" at
# the end, and the parent checks every rank said so.
import json
import os
import sys
import time

import mlx.core as mx

SCENARIO = sys.argv[1]
RANK = int(os.environ.get("JACCL_RANK", os.environ.get("MLX_RANK", "0")))

# Every MLX dtype the glue maps to a jaccl dtype.
DTYPES = [mx.bool_, mx.int8, mx.int16, mx.int32, mx.int64, mx.uint8,
          mx.uint16, mx.uint32, mx.uint64, mx.float16, mx.bfloat16,
          mx.float32, mx.float64, mx.complex64]
# Odd sizes around the library's small/large and chunking boundaries.
SIZES = [1, 3, 7, 1023, 4097, 65537, 1 << 20]


def data(n, dt, rank, salt):
    """The same pseudo-random data at every rank for (rank, salt): small
    integers, so sums are exact in every dtype and any order (ring and
    jaccl add in different orders)."""
    key = mx.random.key(1000 * salt + rank)
    if dt == mx.bool_:
        return mx.random.uniform(shape=(n,), key=key) > 0.5
    x = mx.floor(mx.random.uniform(low=-30, high=30, shape=(n,), key=key))
    if mx.issubdtype(dt, mx.unsignedinteger):
        x = x.abs()
    if dt == mx.complex64:
        im = mx.floor(mx.random.uniform(low=-30, high=30, shape=(n,),
                                        key=mx.random.key(salt - rank - 1)))
        return x.astype(mx.complex64) + 1j * im.astype(mx.complex64)
    return x.astype(dt)


def same(a, b, dt):
    return a.dtype == b.dtype and mx.array_equal(a, b).item()


def check(ok, what):
    if not ok:
        raise AssertionError(f"rank {RANK}: {what}")


def ops():
    """Every op of MLX's jaccl glue on every dtype and odd sizes, against
    the same calls on backend="ring" in this job (ring lacks sum_scatter:
    there, all_sum's slice of this rank)."""
    gj = mx.distributed.init(strict=True, backend="jaccl")
    n = gj.size()
    gr = None
    if n > 1:
        os.environ["MLX_RANK"] = str(gj.rank())
        gr = mx.distributed.init(strict=True, backend="ring")
        check(gr.size() == n and gr.rank() == gj.rank(), "ring group differs")
    r = gj.rank()
    for salt, dt in enumerate(DTYPES):
        for size in SIZES:
            if size == SIZES[-1] and dt not in (mx.float32, mx.int64):
                continue  # the large size only where it costs little
            x = data(size, dt, r, salt)
            what = f"{dt} x {size}"
            reductions = [("all_sum", mx.distributed.all_sum),
                          ("all_max", mx.distributed.all_max),
                          ("all_min", mx.distributed.all_min)]
            if dt == mx.complex64:
                reductions = reductions[:1]  # MLX does not order complex
            for name, op in reductions:
                y = op(x, group=gj)
                if gr is not None:
                    want = op(x, group=gr)
                else:
                    want = x
                check(same(y, want, dt), f"{name} {what}")
            full = mx.concatenate([data(size, dt, p, salt) for p in range(n)])
            y = mx.distributed.all_gather(x, group=gj)
            check(mx.array_equal(y, full).item(), f"all_gather {what}")
            if dt != mx.bool_:
                m = size * n
                z = data(m, dt, r, salt + 100)
                y = mx.distributed.sum_scatter(z, group=gj)
                if gr is not None:
                    want = mx.distributed.all_sum(z, group=gr)
                else:
                    want = z
                want = want[r * size:(r + 1) * size]
                check(same(y, want, dt), f"sum_scatter {what}")
            if n > 1:
                right, left = (r + 1) % n, (r + n - 1) % n
                if r % 2 == 0:
                    s = mx.distributed.send(x, right, group=gj)
                    got = mx.distributed.recv_like(x, left, group=gj)
                    mx.eval(s, got)
                else:
                    got = mx.distributed.recv_like(x, left, group=gj)
                    s = mx.distributed.send(x, right, group=gj)
                    mx.eval(got, s)
                check(mx.array_equal(got, data(size, dt, left, salt)).item(),
                      f"send/recv {what}")


def shard():
    """mlx.nn's sharded linear layers give the single-process result."""
    import mlx.nn as nn
    from mlx.nn.layers.distributed import (AllToShardedLinear,
                                           ShardedToAllLinear)
    g = mx.distributed.init(strict=True, backend="jaccl")
    mx.random.seed(7)
    # Sizes the ranks divide (MLX refuses others), odd per-rank shares.
    for d_in, d_out in [(64, 96), (1012, 332)]:
        lin = nn.Linear(d_in, d_out, bias=True)
        x = mx.random.normal((5, d_in))
        want = lin(x)
        col = AllToShardedLinear.from_linear(lin, group=g)
        row = ShardedToAllLinear.from_linear(lin, group=g)
        lo = d_out * g.rank() // g.size()
        hi = d_out * (g.rank() + 1) // g.size()
        check(mx.allclose(col(x), want[:, lo:hi], atol=1e-4).item(),
              f"AllToShardedLinear {d_in}x{d_out}")
        lo = d_in * g.rank() // g.size()
        hi = d_in * (g.rank() + 1) // g.size()
        check(mx.allclose(row(x[:, lo:hi]), want, atol=1e-4).item(),
              f"ShardedToAllLinear {d_in}x{d_out}")
    # A tensor-parallel MLP (column- then row-sharded), as in Llama blocks.
    up, down = nn.Linear(256, 512), nn.Linear(512, 256)
    x = mx.random.normal((3, 256))
    want = down(nn.silu(up(x)))
    got = ShardedToAllLinear.from_linear(down, group=g)(
        nn.silu(AllToShardedLinear.from_linear(up, group=g)(x)))
    check(mx.allclose(got, want, atol=1e-4).item(), "sharded MLP")


def listening_tcp_ports():
    """TCP ports this process listens on (from /proc: its socket inodes
    matched against the kernel's LISTEN entries)."""
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            link = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    ports = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for line in f.readlines()[1:]:
                cols = line.split()
                if cols[3] == "0A" and cols[9] in inodes:
                    ports.append(int(cols[1].split(":")[1], 16))
    return ports


def dir_factory(path, timeout=30.0):
    """An all-gather through files in a shared directory."""
    def factory(rank, size):
        calls = [0]

        def all_gather(src, n):
            c = calls[0]
            calls[0] += 1
            tmp = os.path.join(path, f".{c}.{rank}")
            with open(tmp, "wb") as f:
                f.write(bytes(src))
            os.rename(tmp, os.path.join(path, f"{c}.{rank}"))
            out = []
            deadline = time.monotonic() + timeout
            for p in range(size):
                name = os.path.join(path, f"{c}.{p}")
                while not os.path.exists(name):
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"rank {p} never wrote call {c}")
                    time.sleep(0.002)
                with open(name, "rb") as f:
                    out.append(f.read())
            return b"".join(out)
        return all_gather
    return factory


def zmq_factory(endpoint, timeout_ms=30000):
    """An all-gather through a zmq ROUTER at rank 0 (bound by rank 0)."""
    import zmq

    def factory(rank, size):
        ctx = zmq.Context.instance()
        if rank == 0:
            sock = ctx.socket(zmq.ROUTER)
            sock.bind(endpoint)
        else:
            sock = ctx.socket(zmq.DEALER)
            sock.connect(endpoint)
        sock.setsockopt(zmq.RCVTIMEO, timeout_ms)

        def all_gather(src, n):
            if rank == 0:
                parts, who = {0: bytes(src)}, []
                while len(parts) < size:
                    ident, r, payload = sock.recv_multipart()
                    parts[int(r)] = payload
                    who.append(ident)
                out = b"".join(parts[p] for p in range(size))
                for ident in who:
                    sock.send_multipart([ident, out])
                return out
            sock.send_multipart([str(rank).encode(), bytes(src)])
            return sock.recv()
        return all_gather
    return factory


def factory():
    """The seed's call with a Python factory: no coordinator is opened."""
    kind = os.environ["FACTORY_KIND"]
    f = (dir_factory(os.environ["FACTORY_DIR"]) if kind == "dir" else
         zmq_factory(os.environ["FACTORY_ENDPOINT"]))
    g = mx.distributed.init(backend="jaccl", strict=True,
                            all_gather_factory=f)
    y = mx.distributed.all_sum(mx.full((1000,), g.rank() + 1.0), group=g)
    check(mx.all(y == g.size() * (g.size() + 1) / 2).item(), "all_sum")
    if kind == "dir":
        ports = listening_tcp_ports()
        check(not ports, f"listening on TCP ports {ports}")


def kill():
    """The last rank dies by SIGKILL during an all_sum; the others must
    raise, naming it, within 10 s."""
    g = mx.distributed.init(strict=True, backend="jaccl")
    x = mx.ones((1 << 22,))
    mx.eval(mx.distributed.all_sum(x, group=g))
    victim = g.size() - 1
    if g.rank() == victim:
        print(f"READY {os.getpid()}", flush=True)
        time.sleep(60)  # the parent kills this rank
        return
    try:
        for _ in range(100000):
            mx.eval(mx.distributed.all_sum(x, group=g))
    except RuntimeError as e:
        print(f"RAISED at {time.time():.3f}: {e}", flush=True)
        return
    raise AssertionError("no error although a rank died")


def exo():
    """exo's start: MLX_RANK, MLX_IBV_DEVICES and MLX_JACCL_COORDINATOR set
    by a parent, strict=True, nothing else."""
    for v in ("JACCL_RANK", "JACCL_SIZE", "JACCL_COORDINATOR"):
        check(v not in os.environ, f"{v} is set")
    g = mx.distributed.init(strict=True, backend="jaccl")
    with open(os.environ["MLX_IBV_DEVICES"]) as f:
        check(g.size() == len(json.load(f)), "size is not the matrix's")
    check(g.rank() == int(os.environ["MLX_RANK"]), "rank is not MLX_RANK")
    y = mx.distributed.all_sum(mx.arange(10), group=g)
    check(mx.array_equal(y, mx.arange(10) * g.size()).item(), "all_sum")


def launched():
    """Started by mlx.launch: reports where it ran into LAUNCH_DIR (shared
    by the test's hosts) as well as on stdout. mlx.launch stops reading a
    rank's output once the rank exits, so the last lines of a rank that
    ends at once can be lost: hence the file and the pause."""
    out = os.path.join(os.environ["LAUNCH_DIR"], f"rank-{RANK}")
    try:
        g = mx.distributed.init(strict=True, backend="jaccl")
    except RuntimeError as e:
        with open(out, "w") as f:
            f.write(f"INIT FAILED: {e}\n")
        raise
    y = mx.distributed.all_sum(mx.array([g.rank() + 1]), group=g)
    n = g.size()
    check(y.item() == n * (n + 1) // 2, "all_sum")
    with open(out, "w") as f:
        f.write(f"RANK {g.rank()} OF {n} NETNS "
                f"{os.readlink('/proc/self/ns/net')}\n")
    print(f"RANK {g.rank()} OF {n}", flush=True)
    time.sleep(1)


def split():
    """Group.split (the opt-in glue patch): every op on the subgroups, and
    a split of a split."""
    world = mx.distributed.init(strict=True, backend="jaccl")
    r, n = world.rank(), world.size()
    color = r % 2
    sub = world.split(color)
    members = [p for p in range(n) if p % 2 == color]
    check(sub.size() == len(members), f"split size {sub.size()}")
    check(sub.rank() == members.index(r), f"split rank {sub.rank()}")
    x = mx.arange(1001, dtype=mx.float32) + r
    want = sum(mx.arange(1001, dtype=mx.float32) + p for p in members)
    check(mx.array_equal(mx.distributed.all_sum(x, group=sub), want).item(),
          "all_sum on the subgroup")
    got = mx.distributed.all_gather(mx.array([r]), group=sub)
    check(got.tolist() == members, f"all_gather on the subgroup: {got}")
    # key reverses the order inside each color.
    rev = world.split(color, n - r)
    check(rev.rank() == len(members) - 1 - members.index(r), "key order")
    # World still works after its splits.
    y = mx.distributed.all_sum(mx.array([1]), group=world)
    check(y.item() == n, "world after split")


{"ops": ops, "split": split, "shard": shard, "factory": factory, "kill": kill, "exo": exo,
 "launched": launched}[SCENARIO]()
print(f"OK {SCENARIO} rank {RANK}", flush=True)
