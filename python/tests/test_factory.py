"""jaccl.init(all_gather_factory=...): end to end, and every way it can fail.

Failure tests make every rank fail the same way locally (all ranks use the
faulty factory), or bound the others' wait with a small JACCL_TIMEOUT.
"""
import os
import threading
import time

import numpy as np
import pytest

import jaccl
from conftest import RUN_ID
from file_factory import file_factory
from zmq_factory import zmq_factory

RANK = int(os.environ.get("JACCL_RANK", "0"))
SIZE = int(os.environ.get("JACCL_SIZE", "1"))

pytestmark = pytest.mark.usefixtures("no_world")


def check_group(g):
    assert g.rank() == RANK and g.size() == SIZE
    y = jaccl.all_sum(np.full(7, RANK + 1, np.int32), group=g)
    np.testing.assert_array_equal(y, np.full(7, SIZE * (SIZE + 1) // 2))
    jaccl.barrier(group=g)


def test_file_factory(shared_dir):
    calls = []
    inner = file_factory(shared_dir)

    def factory(rank, size):
        calls.append((rank, size))
        return inner(rank, size)

    g = jaccl.init(strict=True, all_gather_factory=factory)
    assert calls == [(RANK, SIZE)]  # called exactly once
    assert jaccl.init() is g  # registered as the world group
    check_group(g)
    jaccl.all_sum(np.ones(3))  # no group= needed
    # The side channel really was the directory.
    assert os.path.exists(os.path.join(shared_dir, f"0.{RANK}"))


def test_zmq_factory():
    # ipc:// paths are short (about 100 bytes at most).
    address = f"ipc:///tmp/jaccl-{RUN_ID}-zmq.sock"
    g = jaccl.init(strict=True, backend="jaccl",
                   all_gather_factory=zmq_factory(address, timeout=20))
    check_group(g)


def test_factory_returns_bytearray_or_memoryview(shared_dir):
    inner = file_factory(shared_dir)

    def factory(rank, size):
        f = inner(rank, size)
        return lambda src, n: memoryview(bytearray(f(bytes(src), n)))

    check_group(jaccl.init(strict=True, all_gather_factory=factory))


def test_non_callable_result():
    with pytest.raises(TypeError, match="not callable") as info:
        jaccl.init(all_gather_factory=lambda rank, size: 42)
    assert "int" in str(info.value)
    assert jaccl.init.__name__  # the module is still usable


def test_factory_not_callable():
    with pytest.raises(TypeError, match="must be callable"):
        jaccl.init(all_gather_factory="not a function")


def test_factory_raises():
    class Boom(Exception):
        pass

    def factory(rank, size):
        raise Boom(f"no side channel for rank {rank}")

    with pytest.raises(Boom, match="no side channel") as info:
        jaccl.init(all_gather_factory=factory)
    notes = getattr(info.value, "__notes__", [])
    assert any("[jaccl]" in n and "factory" in n for n in notes), notes


def test_inner_function_raises():
    def factory(rank, size):
        def all_gather(src, n_bytes):
            raise ValueError(f"boom on rank {rank}")
        return all_gather

    with pytest.raises(ValueError, match=f"boom on rank {RANK}") as info:
        jaccl.init(strict=True, all_gather_factory=factory)
    # Traceback reaches into the user's function; the note says where jaccl was.
    assert "all_gather" in [f.name for f in
                            __import__("traceback").extract_tb(
                                info.value.__traceback__)]
    notes = getattr(info.value, "__notes__", [])
    assert any("side-channel all-gather #0" in n for n in notes), notes


def test_wrong_length():
    factory = lambda rank, size: (lambda src, n: src)  # noqa: E731
    with pytest.raises(jaccl.ProtocolError,
                       match=r"Custom all-gather returned 256 bytes but "
                             rf"expected {256 * SIZE}"):
        jaccl.init(all_gather_factory=factory)


def test_wrong_type():
    factory = lambda rank, size: (lambda src, n: None)  # noqa: E731
    with pytest.raises(TypeError, match="NoneType"):
        jaccl.init(all_gather_factory=factory)


def test_backend_other_than_jaccl(shared_dir):
    for backend in ("mpi", "ring", "nccl"):
        with pytest.raises(ValueError, match="backend"):
            jaccl.init(backend=backend, all_gather_factory=file_factory(
                shared_dir))
    assert jaccl.init(backend="mpi") is None
    with pytest.raises(ValueError):
        jaccl.init(strict=True, backend="mpi")


def test_one_faulty_rank_others_bounded(shared_dir, monkeypatch):
    """Rank 0's function raises; the others wait for it in the directory and
    fail within JACCL_TIMEOUT instead of hanging."""
    monkeypatch.setenv("JACCL_TIMEOUT", "2")
    inner = file_factory(shared_dir, timeout=4)

    def factory(rank, size):
        if rank == 0:
            def broken(src, n_bytes):
                raise RuntimeError("rank 0 lost its side channel")
            return broken
        return inner(rank, size)

    start = time.monotonic()
    if RANK == 0:
        with pytest.raises(RuntimeError, match="lost its side channel"):
            jaccl.init(strict=True, all_gather_factory=factory)
    else:
        with pytest.raises((jaccl.TimeoutError, TimeoutError)):
            jaccl.init(strict=True, all_gather_factory=factory)
    assert time.monotonic() - start < 15


def test_factory_runs_on_the_calling_thread(shared_dir):
    """The factory and its function run on the thread that called init, as
    upstream JACCL does: objects bound to that thread (a zmq socket, an MPI
    communicator, an asyncio loop, a lock the caller holds) work there."""
    inner = file_factory(shared_dir)
    caller = threading.get_ident()
    held = threading.RLock()
    seen = []

    def factory(rank, size):
        seen.append(threading.get_ident())
        f = inner(rank, size)

        def fn(src, n):
            with held:  # re-entrant only on the thread that holds it
                seen.append(threading.get_ident())
                return f(src, n)
        return fn

    with held:
        g = jaccl.init(strict=True, all_gather_factory=factory)
    check_group(g)
    assert len(seen) >= 2 and set(seen) == {caller}


def test_stuck_function_is_reported(monkeypatch, capfd, shared_dir):
    """jaccl cannot interrupt a user function (it runs on the caller's
    thread): past JACCL_TIMEOUT a warning names the call that is stuck, and
    a late but correct answer still counts."""
    monkeypatch.setenv("JACCL_TIMEOUT", "1")
    inner = file_factory(shared_dir, timeout=20)

    def factory(rank, size):
        f = inner(rank, size)
        first = [True]

        def fn(src, n):
            if first[0]:
                first[0] = False
                time.sleep(2.5)
            return f(src, n)
        return fn

    g = jaccl.init(strict=True, all_gather_factory=factory)
    check_group(g)
    err = capfd.readouterr().err
    assert "side-channel all-gather #0 (user factory) has not returned" in err
    assert "cannot interrupt it" in err
