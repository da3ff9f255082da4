"""One rank of a torch.distributed job on the "jaccl" backend (started by
test_backend.py or by torchrun; the benchmark has torch/bench_rank.py).

    rank_main.py ops        every op x every dtype against gloo, subgroups,
                            two groups at once, async ops, errors
    rank_main.py ddp        a few DDP steps with jaccl and with gloo
    rank_main.py train      DDP training until a peer dies (fault test)
    rank_main.py exit       leaves async ops in flight at exit, without
                            destroy_process_group
    rank_main.py join       init from JT_INIT and one all_reduce (init
                            methods; the missing-rank test)
    rank_main.py inline     the inline limit JACCL_TORCH_INLINE_BYTES set

Rank and size come from RANK / WORLD_SIZE (env://, as torchrun sets them),
and no JACCL_* variable is needed. Prints "OK <mode>" at the end; any failed
check raises, so the process exits non-zero with a traceback.
"""
import faulthandler
import gc
import os
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist

import jaccl_torch

MODE = sys.argv[1]
TIMEOUT = timedelta(seconds=float(os.environ.get("JT_TIMEOUT", "30")))
# Every group here, gloo's and jaccl's, is given TIMEOUT: new_group's
# default is torch's 30 minutes, so a rank stuck in one would outlive the
# test's 300 s and leave no trace. As a last resort a rank still running
# after JT_WATCHDOG seconds prints every thread's Python stack and exits.
faulthandler.dump_traceback_later(
    float(os.environ.get("JT_WATCHDOG", "240")), exit=True)

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16,
          torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8,
          torch.bool, torch.complex64]
FLOATS = (torch.float32, torch.float64, torch.float16, torch.bfloat16)


def log(*a):
    print(f"[rank {RANK}]", *a, flush=True)


def wide(dtype):
    """The dtype gloo computes the reference in (gloo lacks bfloat16, and
    wider sums make the reference exact enough)."""
    if dtype.is_complex:
        return torch.complex128
    if dtype.is_floating_point:
        return torch.float64
    return torch.int64


def make(dtype, rank, n=37, salt=0):
    """The input of `rank` (any rank can rebuild every rank's input)."""
    g = torch.Generator().manual_seed(1000 * salt + 17 * rank + 5)
    if dtype == torch.bool:
        return torch.rand(n, generator=g) < 0.5
    if dtype.is_complex:
        return torch.complex(torch.randn(n, generator=g),
                             torch.randn(n, generator=g)).to(dtype)
    if dtype.is_floating_point:
        return torch.randn(n, generator=g).to(dtype)
    # Small positive integers: products of 4 ranks fit in int8.
    return torch.randint(1, 4, (n,), generator=g).to(dtype)


def tol(dtype):
    if dtype in (torch.float16, torch.bfloat16):
        return dict(rtol=2e-2, atol=2e-2)
    if dtype in (torch.float32, torch.complex64):
        return dict(rtol=1e-5, atol=1e-5)
    return dict(rtol=1e-12, atol=1e-12)


def close(got, want, what):
    assert got.dtype == want.dtype or want.dtype == wide(got.dtype), what
    if got.dtype == torch.bool or not (got.dtype.is_floating_point
                                       or got.dtype.is_complex):
        ok = torch.equal(got.to(torch.int64), want.to(torch.int64))
    else:
        ok = torch.allclose(got.to(wide(got.dtype)), want.to(wide(got.dtype)),
                            **tol(got.dtype))
    assert ok, f"{what}: jaccl {got} != reference {want}"


def same_everywhere(t, what):
    """All ranks hold bitwise-equal bytes (compared over gloo)."""
    b = t.contiguous().view(-1).view(torch.uint8) if t.numel() else \
        torch.zeros(0, dtype=torch.uint8)
    parts = [torch.empty_like(b) for _ in range(SIZE)]
    dist.all_gather(parts, b, group=GLOO)
    for r, p in enumerate(parts):
        assert torch.equal(p, parts[0]), f"{what}: rank {r} differs from rank 0"


def to_gloo(t):
    """A copy gloo can reduce: widened, complex as real pairs."""
    w = t.to(wide(t.dtype))
    return torch.view_as_real(w).clone() if w.is_complex() else w


def from_gloo(w, dtype):
    return torch.view_as_complex(w) if dtype.is_complex else w


def gloo_reduce(dtype, op, salt):
    """Reference all-reduce: gloo on a widened copy; bool by hand (gloo has
    no bool reductions, jaccl's bool sum is a logical or)."""
    x = make(dtype, RANK, salt=salt)
    if dtype == torch.bool:
        allx = torch.stack([make(dtype, r, salt=salt) for r in range(SIZE)])
        if op in (dist.ReduceOp.SUM, dist.ReduceOp.MAX):
            return allx.any(0)
        return allx.all(0)
    w = to_gloo(x)
    dist.all_reduce(w, op=op, group=GLOO)
    w = from_gloo(w, dtype)
    if dtype in FLOATS or dtype.is_complex:
        return w
    if op == dist.ReduceOp.SUM or op == dist.ReduceOp.PRODUCT:
        return w.to(dtype)  # wraps like jaccl's integer sums
    return w


def reduce_ops(dtype):
    # torch reduces complex tensors as real pairs, so it allows only SUM and
    # AVG on them; gloo has no bool product.
    if dtype.is_complex:
        return [dist.ReduceOp.SUM]
    ops = [dist.ReduceOp.SUM, dist.ReduceOp.MAX, dist.ReduceOp.MIN]
    return ops if dtype == torch.bool else ops + [dist.ReduceOp.PRODUCT]


def check_all_reduce(dtype):
    for i, op in enumerate(reduce_ops(dtype)):
        x = make(dtype, RANK, salt=i)
        dist.all_reduce(x, op=op)
        close(x, gloo_reduce(dtype, op, i), f"all_reduce {op} {dtype}")
        same_everywhere(x, f"all_reduce {op} {dtype}")
    if dtype in FLOATS or dtype.is_complex:
        # AVG: gloo has none; the reference is gloo's sum / size.
        x = make(dtype, RANK, salt=9)
        dist.all_reduce(x, op=dist.ReduceOp.AVG)
        ref = gloo_reduce(dtype, dist.ReduceOp.SUM, 9) / SIZE
        close(x, ref, f"all_reduce AVG {dtype}")
        same_everywhere(x, f"all_reduce AVG {dtype}")
    # A non-contiguous tensor (copied in and out by the backend).
    m = torch.stack([make(dtype, RANK, salt=3)] * 2, 1)[:, 0]
    assert not m.is_contiguous()
    dist.all_reduce(m, op=dist.ReduceOp.MAX if not dtype.is_complex
                    else dist.ReduceOp.SUM)
    op = dist.ReduceOp.MAX if not dtype.is_complex else dist.ReduceOp.SUM
    close(m, gloo_reduce(dtype, op, 3), f"all_reduce non-contiguous {dtype}")


def check_reduce(dtype):
    root = SIZE - 1
    x = make(dtype, RANK, salt=1)
    op = dist.ReduceOp.SUM
    dist.reduce(x, root, op=op)
    ref = gloo_reduce(dtype, op, 1)  # on every rank: it is a collective
    if RANK == root:
        close(x, ref, f"reduce {dtype}")
    else:  # the other ranks keep their input
        close(x, make(dtype, RANK, salt=1), f"reduce non-root {dtype}")


def check_broadcast(dtype):
    for root in {0, SIZE - 1}:
        x = make(dtype, RANK, salt=4)
        dist.broadcast(x, root)
        w = to_gloo(make(dtype, RANK, salt=4))
        dist.broadcast(w, root, group=GLOO)
        close(x, from_gloo(w, dtype), f"broadcast from {root} {dtype}")


def check_all_gather(dtype):
    x = make(dtype, RANK, salt=5)
    outs = [torch.empty_like(x) for _ in range(SIZE)]
    dist.all_gather(outs, x)
    w = to_gloo(x)
    refs = [torch.empty_like(w) for _ in range(SIZE)]
    dist.all_gather(refs, w, group=GLOO)
    for r in range(SIZE):
        close(outs[r], from_gloo(refs[r], dtype), f"all_gather {dtype} [{r}]")
    flat = torch.empty(SIZE * x.numel(), dtype=dtype)
    dist.all_gather_into_tensor(flat, x)
    close(flat, torch.cat([from_gloo(r, dtype) for r in refs]),
          f"all_gather_into_tensor {dtype}")


def check_gather_scatter(dtype):
    root = SIZE // 2
    x = make(dtype, RANK, salt=6)
    outs = [torch.empty_like(x) for _ in range(SIZE)] if RANK == root else None
    dist.gather(x, outs, dst=root)
    w = to_gloo(x)
    refs = [torch.empty_like(w) for _ in range(SIZE)] if RANK == root else None
    dist.gather(w, refs, dst=root, group=GLOO)
    if RANK == root:
        for r in range(SIZE):
            close(outs[r], from_gloo(refs[r], dtype), f"gather {dtype} [{r}]")
    parts = [make(dtype, r, salt=7) for r in range(SIZE)]
    y = torch.empty_like(x)
    dist.scatter(y, parts if RANK == root else None, src=root)
    wy = torch.empty_like(to_gloo(x))
    dist.scatter(wy, [to_gloo(p) for p in parts] if RANK == root else None,
                 src=root, group=GLOO)
    close(y, from_gloo(wy, dtype), f"scatter {dtype}")


def check_reduce_scatter(dtype):
    # Gloo (torch 1.13) has no reduce_scatter: the reference is gloo's
    # all-reduce of the whole input, then this rank's part.
    ops = [dist.ReduceOp.SUM] + ([] if dtype.is_complex
                                 else [dist.ReduceOp.MAX])
    for i, op in enumerate(ops):
        salt = 20 + i
        n = 6
        x = make(dtype, RANK, n=SIZE * n, salt=salt)
        ref = gloo_reduce_long(dtype, op, salt, SIZE * n)[RANK * n:(RANK + 1) * n]
        out = torch.empty(n, dtype=dtype)
        dist.reduce_scatter(out, list(x.chunk(SIZE)), op=op)
        close(out, ref, f"reduce_scatter {op} {dtype}")
        out2 = torch.empty(n, dtype=dtype)
        dist.reduce_scatter_tensor(out2, x, op=op)
        close(out2, ref, f"reduce_scatter_tensor {op} {dtype}")
        assert torch.equal(out.view(torch.uint8), out2.view(torch.uint8))


def gloo_reduce_long(dtype, op, salt, n):
    x = make(dtype, RANK, n=n, salt=salt)
    if dtype == torch.bool:
        allx = torch.stack([make(dtype, r, n=n, salt=salt)
                            for r in range(SIZE)])
        return allx.any(0)
    w = to_gloo(x)
    dist.all_reduce(w, op=op, group=GLOO)
    w = from_gloo(w, dtype)
    return w.to(dtype) if not (dtype in FLOATS or dtype.is_complex) else w


def check_all_to_all(dtype):
    rows = 3
    # Equal splits.
    x = make(dtype, RANK, n=SIZE * rows, salt=8)
    out = torch.empty_like(x)
    dist.all_to_all_single(out, x)
    w = to_gloo(x)
    ref = torch.empty_like(w)
    dist.all_to_all_single(ref, w, group=GLOO)
    close(out, from_gloo(ref, dtype), f"all_to_all_single {dtype}")
    # Uneven splits along dim 0 of a 2-d tensor, some of them empty.

    def count(src, dst):
        return (src + 2 * dst) % 3

    ins = [count(RANK, p) for p in range(SIZE)]
    outs = [count(p, RANK) for p in range(SIZE)]
    x2 = make(dtype, RANK, n=sum(ins) * 2, salt=10).view(-1, 2)
    y2 = torch.empty(sum(outs), 2, dtype=dtype)
    dist.all_to_all_single(y2, x2, output_split_sizes=outs,
                           input_split_sizes=ins)
    w2 = to_gloo(x2)
    r2 = torch.empty((sum(outs),) + tuple(w2.shape[1:]), dtype=w2.dtype)
    dist.all_to_all_single(r2, w2, output_split_sizes=outs,
                           input_split_sizes=ins, group=GLOO)
    close(y2, from_gloo(r2, dtype), f"all_to_all_single splits {dtype}")
    # The list form; gloo (torch 1.13) has no list all_to_all: the reference
    # is computed from every rank's input.
    xs = [make(dtype, RANK * 100 + p, n=p + 1, salt=11) for p in range(SIZE)]
    ys = [torch.empty(RANK + 1, dtype=dtype) for _ in range(SIZE)]
    dist.all_to_all(ys, xs)
    for p in range(SIZE):
        close(ys[p], make(dtype, p * 100 + RANK, n=RANK + 1, salt=11),
              f"all_to_all {dtype} from {p}")


def check_send_recv(dtype):
    if SIZE < 2:
        return
    # Rank 0 sends each rank a tensor, which sends it back plus one.
    if RANK == 0:
        for p in range(1, SIZE):
            x = make(dtype, p, salt=12)
            dist.send(x, p)
            y = torch.empty_like(x)
            dist.recv(y, p)
            close(y, make(dtype, p, salt=13), f"send/recv {dtype} with {p}")
    else:
        y = torch.empty_like(make(dtype, RANK, salt=12))
        dist.recv(y, 0)
        close(y, make(dtype, RANK, salt=12), f"recv {dtype}")
        dist.send(make(dtype, RANK, salt=13), 0)
    # isend / irecv.
    peer = RANK ^ 1
    if peer < SIZE:
        x = make(dtype, RANK, salt=14)
        y = torch.empty_like(x)
        if RANK % 2 == 0:
            reqs = [dist.isend(x, peer), dist.irecv(y, peer)]
        else:
            reqs = [dist.irecv(y, peer), dist.isend(x, peer)]
        for q in reqs:
            q.wait()
        close(y, make(dtype, peer, salt=14), f"isend/irecv {dtype}")


def check_errors():
    def raises(fn, *needles, kind=RuntimeError):
        try:
            fn()
        except RuntimeError as e:
            assert isinstance(e, kind), f"{type(e)} is not {kind}: {e}"
            for s in needles:
                assert s in str(e), f"{s!r} not in {e}"
            return e
        raise AssertionError(f"no error, expected {needles}")

    # (all_reduce would see complex128 as float64 pairs: torch's view_as_real)
    raises(lambda: dist.reduce(torch.zeros(3, dtype=torch.complex128), 0),
           "reduce", "ComplexDouble", "not supported")
    # (A CUDA tensor is refused by name too, "tensor on cuda:0 ... CPU
    # tensors only"; this machine has no GPU to try it, and torch itself
    # refuses meta tensors before the backend sees them.)
    raises(lambda: dist.all_reduce(torch.zeros(3, dtype=torch.int32),
                                   op=dist.ReduceOp.AVG), "AVG", "Int")
    if SIZE > 1:
        raises(lambda: dist.send(torch.zeros(3), (RANK + 1) % SIZE, tag=7),
               "tag 7")
    if SIZE > 1:
        # Split sizes that disagree with the peer's: jaccl's counts check
        # fails every rank alike, as the class of its kind (a RuntimeError
        # still), and leaves the group working.
        outs = [1] * SIZE
        outs[1 if RANK == 0 else 0] = 2
        e = raises(lambda: dist.all_to_all_single(
                       torch.zeros(SIZE + 1), torch.zeros(SIZE),
                       output_split_sizes=outs, input_split_sizes=[1] * SIZE),
                   "all_to_all_single", kind=jaccl_torch.ProtocolError)
        # jaccl's fields survive the backend: this rank reports it, and the
        # detail is the message without the op and the "[jaccl] rank" prefix.
        assert e.kind == "Protocol" and e.rank == RANK, (e.kind, e.rank, e)
        assert isinstance(e.peers, list) and e.errno is None, e
        assert e.detail.startswith("all_to_allv: rank "), e.detail
        assert str(e).endswith(f"[jaccl] rank {RANK}: {e.detail}"), e
        assert issubclass(jaccl_torch.ProtocolError, jaccl_torch.Error)
        assert issubclass(jaccl_torch.UsageError, ValueError)
    # The group still works after usage errors.
    x = torch.ones(2)
    dist.all_reduce(x)
    assert torch.equal(x, torch.full((2,), float(SIZE)))


def check_bitwise():
    for op, fn in ((dist.ReduceOp.BAND, torch.bitwise_and),
                   (dist.ReduceOp.BOR, torch.bitwise_or),
                   (dist.ReduceOp.BXOR, torch.bitwise_xor)):
        x = torch.tensor([RANK + 1, 7, 12 + RANK], dtype=torch.int32)
        dist.all_reduce(x, op=op)
        want = torch.tensor([1, 7, 12], dtype=torch.int32)
        for r in range(1, SIZE):
            want = fn(want, torch.tensor([r + 1, 7, 12 + r], dtype=torch.int32))
        assert torch.equal(x, want), f"{op}: {x} != {want}"


def check_async():
    check_async_order()
    if SIZE > 1:
        check_eager()
    # Small ops run on the calling thread when the group is idle; with the
    # limit at 0 every op goes through the worker. Both keep the semantics.
    limit = jaccl_torch.inline_bytes()
    assert limit > 0
    try:
        jaccl_torch.set_inline_bytes(0)
        assert jaccl_torch.inline_bytes() == 0
        check_async_waits()
        if SIZE > 1:
            # Not even after synchronous calls.
            x = torch.ones(1024)
            dist.all_reduce(x)
            dist.all_reduce(x)
            check_returns_before_peers(1024)
    finally:
        jaccl_torch.set_inline_bytes(limit)
    check_async_waits()
    # An idle group runs a small op before the call returns.
    w = dist.all_reduce(torch.ones(2), async_op=True)
    assert w.is_completed() and w.is_success()


def check_eager():
    # A caller that waits for each large op at once (a synchronous call)
    # gets the next ones on its own thread after two in a row: done when
    # the call returns. A wait within 100 us of the call counts, so a rank
    # held up between the two (a loaded machine) tries again, in step with
    # its peers (each round's verdict is agreed over gloo).
    big = jaccl_torch.inline_bytes() // 4 * 4  # 4x the limit, in bytes
    ok = torch.zeros(1)
    for _ in range(20):
        x = torch.full((big,), float(RANK))
        dist.all_reduce(x)
        dist.all_reduce(x)
        w = dist.all_reduce(x, async_op=True)
        ok[0] = 1.0 if w.is_completed() else 0.0
        dist.all_reduce(ok, op=dist.ReduceOp.MIN, group=GLOO)
        w.wait()  # after the gloo round: not at once
        if ok[0] == 1.0:
            break
    assert ok[0] == 1.0, "synchronous large ops never ran inline"
    want = (SIZE * (SIZE - 1) / 2) * SIZE ** 2
    assert torch.equal(x, torch.full_like(x, want)), (x[:3], want)
    # That op was not waited for at once (its wait came after the gloo
    # round): the next goes to the worker.
    check_returns_before_peers(big)


def check_returns_before_peers(n):
    # An async_op=True all_reduce of n floats that must go to the worker and
    # return before the peers have joined it: rank 0 issues it before a
    # gloo barrier its peers pass before theirs (run inline, it would wait
    # for them until the op timeout).
    y = torch.full((n,), float(RANK))
    if RANK == 0:
        w = dist.all_reduce(y, async_op=True)
        dist.barrier(group=GLOO)
    else:
        dist.barrier(group=GLOO)
        w = dist.all_reduce(y, async_op=True)
    w.wait()
    assert torch.equal(y, torch.full_like(y, SIZE * (SIZE - 1) / 2))


def check_async_order():
    # Ops issued while the worker is busy (a large one queued first) queue
    # behind it, small ones too: issue order is run order on every rank, so
    # each result is the sum of the same ops everywhere.
    big = (jaccl_torch.inline_bytes() // 4) * 16
    ops = []
    for i in range(6):
        n = big if i % 2 == 0 else 3
        x = torch.full((n,), float(RANK * 10 + i))
        ops.append((x, i, dist.all_reduce(x, async_op=True)))
    y = torch.full((5,), float(RANK))
    dist.all_reduce(y)  # synchronous, behind the queued ones
    assert torch.equal(y, torch.full((5,), SIZE * (SIZE - 1) / 2))
    assert all(w.is_completed() for _, _, w in ops), "an op ran out of order"
    for x, i, w in ops:
        w.wait()
        want = 10 * SIZE * (SIZE - 1) / 2 + SIZE * i
        assert torch.equal(x, torch.full_like(x, want)), (i, x[:3], want)


def check_async_waits():
    # Several ops in flight on one group, waited for in reverse order.
    xs = [torch.full((1000,), float(RANK + i)) for i in range(8)]
    works = [dist.all_reduce(x, async_op=True) for x in xs]
    g = torch.arange(5, dtype=torch.int64) + RANK
    works.append(dist.broadcast(g, 0, async_op=True))
    futs = [w.get_future() for w in works]
    for w in reversed(works):
        assert w.wait()
    base = SIZE * (SIZE - 1) / 2
    for i, x in enumerate(xs):
        assert torch.equal(x, torch.full((1000,), base + SIZE * i)), i
        assert torch.equal(futs[i].wait()[0], x)
        assert works[i].is_completed() and works[i].is_success()
    assert torch.equal(g, torch.arange(5, dtype=torch.int64))


def mode_inline():
    # The inline limit's starting value comes from JACCL_TORCH_INLINE_BYTES
    # (JT_EXPECT_INLINE: what the test set, or the default).
    limit = int(os.environ["JT_EXPECT_INLINE"])
    assert jaccl_torch.inline_bytes() == limit, jaccl_torch.inline_bytes()
    n = 1 << 18  # 1 MiB of float32: the worker's by default
    x = torch.full((n,), float(RANK))
    w = dist.all_reduce(x, async_op=True)
    if limit >= 4 * n:
        # Run on this thread: complete before the call returned.
        assert w.is_completed() and w.is_success()
    w.wait()
    assert torch.equal(x, torch.full((n,), SIZE * (SIZE - 1) / 2))


def check_groups():
    # Two jaccl groups over the same ranks used at once.
    second = dist.new_group(backend="jaccl", timeout=TIMEOUT)
    a = torch.full((4096,), float(RANK))
    b = torch.full((4096,), float(2 * RANK))
    wa = dist.all_reduce(a, async_op=True)
    wb = dist.all_reduce(b, group=second, async_op=True)
    wb.wait()
    wa.wait()
    s = SIZE * (SIZE - 1) / 2
    assert torch.equal(a, torch.full((4096,), s))
    assert torch.equal(b, torch.full((4096,), 2 * s))
    # A subgroup of the ranks: every rank calls new_group; the others get
    # GroupMember.NON_GROUP_MEMBER.
    if SIZE >= 2:
        members = list(range(1, SIZE)) if SIZE >= 3 else [0, 1]
        sub = dist.new_group(members, backend="jaccl", timeout=TIMEOUT)
        sub_gloo = dist.new_group(members, backend="gloo",
                                  timeout=TIMEOUT)
        if RANK in members:
            x = make(torch.float32, RANK, salt=30)
            dist.all_reduce(x, group=sub)
            w = x.new_tensor(make(torch.float32, RANK, salt=30)).double()
            dist.all_reduce(w, group=sub_gloo)
            close(x, w, "all_reduce on a subgroup")
            y = torch.zeros(3)
            if RANK == members[0]:
                y += 5
            dist.broadcast(y, members[0], group=sub)
            assert torch.equal(y, torch.full((3,), 5.0))
            assert dist.get_world_size(sub) == len(members)
    dist.barrier()


def mode_ops():
    expect = os.environ.get("JT_EXPECT_PLANE")
    plane = jaccl_torch.data_plane(dist.group.WORLD)
    if expect and SIZE > 1:
        assert expect in plane, f"data plane {plane!r}, expected {expect!r}"
    log("data plane", plane)
    for dtype in DTYPES:
        check_all_reduce(dtype)
        check_reduce(dtype)
        check_broadcast(dtype)
        check_all_gather(dtype)
        check_gather_scatter(dtype)
        check_reduce_scatter(dtype)
        check_all_to_all(dtype)
        check_send_recv(dtype)
    check_bitwise()
    check_errors()
    check_async()
    check_groups()
    dist.barrier()


def mode_exit():
    """Exits with jaccl ops still queued, on tensors Python no longer holds,
    and no destroy_process_group: jaccl_torch's atexit hook runs them and
    stops the workers while the interpreter is whole (else a worker dropping
    the last tensor during finalization takes the GIL and aborts the rank)."""
    global GLOO
    GLOO = None
    dist.barrier()
    # Larger than what runs on the calling thread, so that they queue.
    n = jaccl_torch.inline_bytes() // 4 + 1
    for i in range(int(os.environ.get("JT_INFLIGHT", "200"))):
        dist.all_reduce(torch.full((n,), float(i)), async_op=True)
    log("OK", MODE)


def model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(),
                               torch.nn.Linear(32, 4))


def train(group, steps):
    from torch.nn.parallel import DistributedDataParallel as DDP
    net = DDP(model(), process_group=group)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(100 + RANK)
    for _ in range(steps):
        x = torch.randn(8, 16, generator=g)
        y = torch.randn(8, 4, generator=g)
        opt.zero_grad()
        torch.nn.functional.mse_loss(net(x), y).backward()
        opt.step()
    return [p.detach().clone() for p in net.parameters()]


def mode_ddp():
    steps = int(os.environ.get("JT_STEPS", "5"))
    pj = train(dist.group.WORLD, steps)
    pg = train(GLOO, steps)
    for a, b in zip(pj, pg):
        assert torch.allclose(a, b, rtol=1e-5, atol=1e-6), (a - b).abs().max()
        same_everywhere(a, "DDP parameters")
    changed = any(not torch.equal(a, b) for a, b in zip(pj, model().parameters()))
    assert changed, "DDP did not change the parameters"


def mode_train():
    """Trains until something fails; the test kills one rank meanwhile."""
    from torch.nn.parallel import DistributedDataParallel as DDP
    net = DDP(model())
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    g = torch.Generator().manual_seed(RANK)
    step = 0
    try:
        while True:
            x = torch.randn(8, 16, generator=g)
            opt.zero_grad()
            loss = net(x).pow(2).mean()
            loss.backward()
            opt.step()
            w = dist.all_reduce(loss.detach().clone(), async_op=True)
            w.wait()
            step += 1
            if step % 10 == 0:
                log("step", step)
            time.sleep(0.005)
    except RuntimeError as e:
        log("FAILED:", type(e).__name__ + ":", str(e).replace("\n", " "))
        sys.stdout.flush()
        os._exit(3)


def main():
    global RANK, SIZE, GLOO
    RANK = int(os.environ.get("RANK", "0"))
    if MODE == "join":
        try:
            dist.init_process_group("jaccl", init_method=os.environ["JT_INIT"],
                                    rank=RANK,
                                    world_size=int(os.environ["WORLD_SIZE"]),
                                    timeout=TIMEOUT)
        except RuntimeError as e:
            log("FAILED:", type(e).__name__ + ":", str(e).replace("\n", " "))
            sys.exit(3)
        x = torch.ones(3)
        dist.all_reduce(x)
        assert torch.equal(x, torch.full((3,), float(dist.get_world_size())))
        dist.destroy_process_group()
        log("joined")
        return
    dist.init_process_group("jaccl", timeout=TIMEOUT)
    RANK, SIZE = dist.get_rank(), dist.get_world_size()
    assert dist.get_backend() == "jaccl"
    GLOO = dist.new_group(backend="gloo", timeout=TIMEOUT)
    {"ops": mode_ops, "ddp": mode_ddp, "train": mode_train,
     "exit": mode_exit, "inline": mode_inline}[MODE]()
    if MODE == "exit":
        return  # what is left is the atexit hook's
    # DDP modules sit in reference cycles and hold their process groups; a
    # gloo group first destroyed at interpreter exit can abort the process
    # ("terminate called without an active exception", pytorch#190489): its
    # worker drops tensors, taking the GIL, while the interpreter finalizes.
    # GLOO is a module global, which destroy_process_group cannot drop.
    GLOO = None
    gc.collect()
    dist.destroy_process_group()
    log("OK", MODE)


if __name__ == "__main__":
    main()
