"""Every collective and dtype against numpy references."""
import os
import threading
import time

import numpy as np
import pytest

import jaccl

RANK = int(os.environ.get("JACCL_RANK", "0"))
SIZE = int(os.environ.get("JACCL_SIZE", "1"))

DTYPES = [np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8,
          np.uint16, np.uint32, np.uint64, np.float16, np.float32, np.float64,
          np.complex64]
IDS = [np.dtype(d).name for d in DTYPES]


def data(rank, dtype, shape=(6, 3)):
    """Rank's input: small integers, so every sum is exact in every dtype."""
    rng = np.random.default_rng(1000 + rank)
    v = rng.integers(0, 20, size=shape)
    if dtype == np.bool_:
        return v % 3 == 0
    if np.dtype(dtype).kind == "c":
        return (v + 1j * rng.integers(0, 20, size=shape)).astype(dtype)
    return v.astype(dtype)


def inputs(dtype, shape=(6, 3)):
    return [data(r, dtype, shape) for r in range(SIZE)]


def check(y, want):
    assert y.dtype == want.dtype
    assert y.shape == want.shape
    np.testing.assert_array_equal(y, want)


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_all_sum(world, dtype):
    xs = inputs(dtype)
    y = jaccl.all_sum(xs[RANK])
    if dtype == np.bool_:
        want = np.logical_or.reduce(xs)
    else:
        want = np.sum(xs, axis=0, dtype=dtype)
    check(y, want)


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_all_max_min(world, dtype):
    xs = inputs(dtype)
    check(jaccl.all_max(xs[RANK]), np.maximum.reduce(xs))
    check(jaccl.all_min(xs[RANK]), np.minimum.reduce(xs))


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_all_gather(world, dtype):
    xs = inputs(dtype)
    check(jaccl.all_gather(xs[RANK]), np.concatenate(xs, axis=0))


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_sum_scatter(world, dtype):
    xs = inputs(dtype, shape=(2 * SIZE, 3))
    y = jaccl.sum_scatter(xs[RANK])
    if dtype == np.bool_:
        total = np.logical_or.reduce(xs)
    else:
        total = np.sum(xs, axis=0, dtype=dtype)
    check(y, total[2 * RANK:2 * RANK + 2])


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_send_recv_ring(world, dtype):
    # 0 sends first, everyone else receives first: no cycle of waits.
    nxt, prv = (RANK + 1) % SIZE, (RANK - 1) % SIZE
    mine = data(RANK, dtype)
    if RANK == 0:
        jaccl.send(mine, nxt)
        got = jaccl.recv(mine.shape, mine.dtype, prv)
    else:
        got = jaccl.recv_like(mine, prv)
        jaccl.send(mine, nxt)
    check(got, data(prv, dtype))


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_broadcast(world, dtype):
    for root in range(SIZE):
        x = data(RANK, dtype)
        before = x.copy()
        check(jaccl.broadcast(x, root), data(root, dtype))
        check(x, before)  # the input is not modified


def test_barrier(world):
    for _ in range(3):
        jaccl.barrier()
    jaccl.barrier(group=world)


def test_bfloat16_override(world):
    vals = [np.arange(12, dtype=np.float32).reshape(3, 4) * (r + 1) - 5
            for r in range(SIZE)]
    # bfloat16 = the top 16 bits of float32 (exact for these values).
    bits = [(v.view(np.uint32) >> 16).astype(np.uint16) for v in vals]
    y = jaccl.all_sum(bits[RANK], dtype="bfloat16")
    assert y.dtype == np.uint16 and y.shape == (3, 4)
    got = (y.astype(np.uint32) << 16).view(np.float32)
    np.testing.assert_array_equal(got, np.sum(vals, axis=0))
    got = (jaccl.all_max(bits[RANK], dtype="bfloat16").astype(np.uint32)
           << 16).view(np.float32)
    np.testing.assert_array_equal(got, np.maximum.reduce(vals))


def test_dtype_override_errors(world):
    with pytest.raises(ValueError, match="bfloat16"):
        jaccl.all_sum(np.zeros(3, np.uint16), dtype="float32")
    with pytest.raises(TypeError, match="float32"):
        jaccl.all_sum(np.zeros(3, np.float32), dtype="bfloat16")


@pytest.mark.parametrize("dtype", ["object", "complex128", "longdouble",
                                   "U3", "S2", "datetime64[s]", ">f4"])
def test_unsupported_dtypes(world, dtype):
    x = np.zeros(4, dtype=dtype)
    name = str(np.dtype(dtype))
    for fn in (jaccl.all_sum, jaccl.all_gather, jaccl.broadcast):
        with pytest.raises(TypeError) as info:
            fn(x) if fn is not jaccl.broadcast else fn(x, 0)
        assert name in str(info.value)
    with pytest.raises(TypeError, match="buffer protocol"):
        jaccl.all_sum([1, 2, 3])


def test_buffer_inputs(world):
    # bytes / bytearray / memoryview come back as uint8 arrays.
    mine = bytes([RANK + 1] * 5)
    check(jaccl.all_sum(mine), np.full(5, SIZE * (SIZE + 1) // 2, np.uint8))
    check(jaccl.all_gather(bytearray(mine)),
          np.repeat(np.arange(1, SIZE + 1, dtype=np.uint8), 5))
    mv = memoryview(np.arange(4, dtype=np.float64) + RANK)
    check(jaccl.all_max(mv), np.arange(4, dtype=np.float64) + SIZE - 1)
    check(jaccl.broadcast(b"hello", 0), np.frombuffer(b"hello", np.uint8))


def test_shapes(world):
    # 0-d, empty, non-contiguous (copied), Fortran order.
    check(jaccl.all_sum(np.float32(RANK)),
          np.array(SIZE * (SIZE - 1) / 2, np.float32))
    check(jaccl.all_gather(np.int32(RANK)), np.arange(SIZE, dtype=np.int32))
    check(jaccl.all_sum(np.zeros((0, 3))), np.zeros((0, 3)))
    base = np.arange(40, dtype=np.int64).reshape(8, 5) + RANK
    strided = base[::2, 1::2]
    assert not strided.flags.c_contiguous
    want = np.sum([np.arange(40).reshape(8, 5)[::2, 1::2] + r
                   for r in range(SIZE)], axis=0)
    check(jaccl.all_sum(strided), want)
    fortran = np.asfortranarray(base)
    check(jaccl.all_gather(fortran),
          np.concatenate([np.arange(40).reshape(8, 5) + r
                          for r in range(SIZE)]))
    check(jaccl.recv(0, np.float32, (RANK + 1) % SIZE),
          np.zeros(0, np.float32))  # zero bytes: no message


def test_large(world):
    n = 3 << 20  # big enough for the chunked / pipelined paths
    x = np.arange(n, dtype=np.float32) % 1000 + RANK
    want = (np.arange(n, dtype=np.float32) % 1000) * SIZE + SIZE * (SIZE - 1) / 2
    check(jaccl.all_sum(x), want)
    y = jaccl.all_gather(x[: n // SIZE])
    assert y.shape == (n // SIZE * SIZE,)
    assert y[-1] == x[n // SIZE - 1] - RANK + SIZE - 1


def test_usage_errors(world):
    with pytest.raises(jaccl.UsageError, match="divisible"):
        jaccl.sum_scatter(np.zeros(2 * SIZE + 1))
    with pytest.raises(ValueError):  # UsageError is also a ValueError
        jaccl.sum_scatter(np.float32(1))
    with pytest.raises(jaccl.UsageError, match="itself") as info:
        jaccl.send(np.zeros(3), RANK)
    # Every jaccl error has the field attributes, None when not known.
    e = info.value
    assert e.kind == "Usage" and e.peers == [], (e.kind, e.peers)
    assert e.rank is None and e.peer is None and e.errno is None
    with pytest.raises(jaccl.UsageError, match="not a rank"):
        jaccl.recv((3,), np.float32, SIZE)
    with pytest.raises(jaccl.UsageError, match="not a rank"):
        jaccl.broadcast(np.zeros(3), -1)
    jaccl.barrier()  # everyone is still in step


def test_gil_released_during_collective(world, shared_dir):
    """Rank 0 runs a collective in a thread; its main thread must still run
    Python (to write the file rank 1 waits for) while that blocks."""
    flag = os.path.join(shared_dir, "go")
    x = np.full(1000, RANK, np.int64)
    if RANK == 0:
        out = []
        t = threading.Thread(target=lambda: out.append(jaccl.all_sum(x)))
        t.start()
        time.sleep(0.3)  # let the thread enter the collective
        with open(flag + ".tmp", "w"):
            pass
        os.replace(flag + ".tmp", flag)
        t.join(30)
        assert out, "the collective did not finish"
        y = out[0]
    else:
        deadline = time.monotonic() + 15
        while not os.path.exists(flag) and time.monotonic() < deadline:
            time.sleep(0.01)
        seen = os.path.exists(flag)
        y = jaccl.all_sum(x)
        assert seen, "rank 0's main thread was blocked during the collective"
    check(y, np.full(1000, SIZE * (SIZE - 1) // 2, np.int64))


def block(src, dst, dtype, rows, cols=3):
    """What rank src sends rank dst: distinct per pair."""
    v = np.arange(rows * cols).reshape(rows, cols) + 100 * src + 10 * dst
    if dtype == np.bool_:
        return v % 3 == 0
    return (v % 120).astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_all_to_all(world, dtype):
    x = np.concatenate([block(RANK, j, dtype, 2) for j in range(SIZE)])
    y = jaccl.all_to_all(x)
    check(y, np.concatenate([block(i, RANK, dtype, 2) for i in range(SIZE)]))


def counts(src, dst):
    """Rows src sends dst in the variable test: some pairs send nothing."""
    return 0 if (src + 2 * dst) % 3 == 1 else 1 + (src * 5 + dst) % 4


@pytest.mark.parametrize("dtype", [np.uint8, np.int16, np.float32,
                                   np.complex64], ids=["u8", "i16", "f32",
                                                       "c64"])
def test_all_to_allv(world, dtype):
    send = [counts(RANK, j) for j in range(SIZE)]
    recv = [counts(i, RANK) for i in range(SIZE)]
    x = np.concatenate([block(RANK, j, dtype, send[j]) for j in range(SIZE)])
    y = jaccl.all_to_allv(x, send, recv)
    check(y, np.concatenate([block(i, RANK, dtype, recv[i])
                             for i in range(SIZE)]))


def test_all_to_all_errors(world):
    if SIZE > 1:
        with pytest.raises(ValueError, match="divisible"):
            jaccl.all_to_all(np.zeros(SIZE + 1))
    with pytest.raises(jaccl.UsageError, match="divisible"):
        jaccl.all_to_all(np.float32(1))
    with pytest.raises(jaccl.UsageError, match="one per rank"):
        jaccl.all_to_allv(np.zeros(3), [3] + [0] * SIZE, [0] * SIZE)
    with pytest.raises(jaccl.UsageError, match="add up to"):
        jaccl.all_to_allv(np.zeros(SIZE + 2), [1] * SIZE, [1] * SIZE)
    # The last rank expects one row more from rank 0 than it sends: every
    # rank raises the same error, and the group stays usable.
    recv = [1] * SIZE
    if RANK == SIZE - 1:
        recv[0] = 2
    last = SIZE - 1
    with pytest.raises(jaccl.ProtocolError,
                       match=f"rank {last} expects 16 bytes from rank 0, "
                             f"but rank 0 sends 8 bytes") as info:
        jaccl.all_to_allv(np.zeros(SIZE), [1] * SIZE, recv)
    # The error's fields: who reports it, what it says without the prefix.
    e = info.value
    assert e.kind == "Protocol" and e.rank == RANK, (e.kind, e.rank)
    assert isinstance(e.peers, list) and e.errno is None and e.address is None
    assert e.detail.startswith(f"all_to_allv: rank {last} expects 16 bytes")
    assert str(e) == f"[jaccl] rank {RANK}: {e.detail}"
    y = jaccl.all_to_all(np.arange(SIZE, dtype=np.int64) + 10 * RANK)
    check(y, np.arange(SIZE, dtype=np.int64) * 10 + RANK)


INT_DTYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16,
              np.uint32, np.uint64]


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_all_reduce_prod(world, dtype):
    if dtype == np.bool_:
        xs = inputs(dtype)
    else:  # 1..3, so every product is exact in every dtype
        xs = [((data(r, np.int64) % 3) + 1).astype(dtype) for r in range(SIZE)]
    y = jaccl.all_reduce(xs[RANK], "prod")
    if dtype == np.bool_:
        want = np.logical_and.reduce(xs)
    else:
        want = xs[0].copy()
        for x in xs[1:]:
            want = (want * x).astype(dtype)
    check(y, want)


@pytest.mark.parametrize("dtype", INT_DTYPES + [np.bool_],
                         ids=[np.dtype(d).name for d in INT_DTYPES] + ["bool"])
def test_all_reduce_bitwise(world, dtype):
    xs = inputs(dtype)
    for op, fn in (("bitand", np.bitwise_and), ("bitor", np.bitwise_or),
                   ("bitxor", np.bitwise_xor)):
        check(jaccl.all_reduce(xs[RANK], op), fn.reduce(xs))
    # The others by name match the dedicated calls.
    check(jaccl.all_reduce(xs[RANK], "max"), jaccl.all_max(xs[RANK]))


def test_all_reduce_errors(world):
    with pytest.raises(ValueError, match="unknown op 'avg'"):
        jaccl.all_reduce(np.ones(3), "avg")
    with pytest.raises(jaccl.UsageError, match="bitor"):
        jaccl.all_reduce(np.ones(3, dtype=np.float32), "bitor")
    check(jaccl.all_sum(np.ones(3)), np.full(3, float(SIZE)))  # still works


@pytest.mark.parametrize("root", range(SIZE))
def test_rooted_ops(world, root):
    xs = inputs(np.int32)
    r = jaccl.reduce(xs[RANK], root, "max")
    g = jaccl.gather(xs[RANK], root)
    if RANK == root:
        check(r, np.maximum.reduce(xs))
        check(g, np.concatenate(xs))
    else:
        assert r is None and g is None
    full = np.arange(SIZE * 4 * 2, dtype=np.float32).reshape(SIZE * 4, 2)
    part = jaccl.scatter(full if RANK == root else np.zeros_like(full), root)
    check(part, full[RANK * 4:(RANK + 1) * 4])
    with pytest.raises(jaccl.UsageError, match="root"):
        jaccl.gather(xs[RANK], SIZE)
