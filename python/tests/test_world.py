"""World-group registration, clear_backends, group objects."""
import gc
import os
import weakref

import numpy as np
import pytest

import jaccl
from file_factory import file_factory

RANK = int(os.environ.get("JACCL_RANK", "0"))
SIZE = int(os.environ.get("JACCL_SIZE", "1"))


def test_group_api(world):
    assert world.rank() == RANK
    assert world.size() == SIZE
    assert isinstance(world.backend_name, str) and world.backend_name
    assert f"rank {RANK} of {SIZE}" in repr(world)


def test_second_init_returns_same_group(world):
    assert jaccl.init() == world
    assert jaccl.init(strict=True, backend="jaccl") == world
    assert jaccl.init() is world  # same Python object while referenced


def test_world_is_default_group(world):
    x = np.arange(5, dtype=np.float32) + RANK
    np.testing.assert_array_equal(jaccl.all_sum(x),
                                  jaccl.all_sum(x, group=world))


def test_clear_backends(world):
    jaccl.clear_backends()
    with pytest.raises(jaccl.UsageError, match="jaccl.init"):
        jaccl.all_sum(np.ones(3))
    # A group you still hold keeps working.
    y = jaccl.all_sum(np.ones(3), group=world)
    np.testing.assert_array_equal(y, np.full(3, SIZE))
    g2 = jaccl.init(strict=True)  # a fresh world group
    assert g2 != world
    np.testing.assert_array_equal(jaccl.all_sum(np.ones(2)), np.full(2, SIZE))
    # Two live groups, used alternately.
    jaccl.barrier(group=world)
    jaccl.barrier(group=g2)


def test_clear_backends_drops_factory_objects(shared_dir):
    jaccl.clear_backends()

    class Channel:
        def __init__(self, f):
            self.f = f

        def __call__(self, src, n):
            return self.f(src, n)

    refs = []
    inner = file_factory(shared_dir)

    def factory(rank, size):
        ch = Channel(inner(rank, size))
        refs.append(weakref.ref(ch))
        return ch

    g = jaccl.init(strict=True, all_gather_factory=factory)
    jaccl.barrier(group=g)
    del g
    jaccl.clear_backends()
    gc.collect()
    assert refs and refs[0]() is None, "the factory's function is still alive"
    weak_factory = weakref.ref(factory)
    del factory
    gc.collect()
    assert weak_factory() is None


def test_collectives_without_init_raise_usage_error():
    jaccl.clear_backends()
    for call in (lambda: jaccl.barrier(), lambda: jaccl.all_gather(b"x"),
                 lambda: jaccl.recv(3, np.uint8, 0)):
        with pytest.raises(jaccl.UsageError):
            call()
    jaccl.init(strict=True)


def test_exception_hierarchy():
    assert issubclass(jaccl.Error, RuntimeError)
    for name in ("ConfigError", "TimeoutError", "PeerLostError",
                 "ProtocolError", "IoError", "UsageError"):
        cls = getattr(jaccl, name)
        assert issubclass(cls, jaccl.Error), name
        assert cls.__module__ == "jaccl"
    assert issubclass(jaccl.UsageError, ValueError)
