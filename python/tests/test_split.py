"""Group.split: children by color and key, None for a negative color,
children used with group= and from threads next to their parent."""
import os
import threading

import numpy as np
import pytest

import jaccl

RANK = int(os.environ.get("JACCL_RANK", "0"))
SIZE = int(os.environ.get("JACCL_SIZE", "1"))


def job_ranks(group):
    """The world ranks of group's members, in member order."""
    return jaccl.all_gather(np.array([RANK], dtype=np.int32),
                            group=group).tolist()


def test_split_by_parity(world):
    child = world.split(RANK % 2)
    want = [r for r in range(SIZE) if r % 2 == RANK % 2]
    assert isinstance(child, jaccl.Group)
    assert child.size() == len(want)
    assert child.rank() == want.index(RANK)
    assert job_ranks(child) == want
    x = np.full(3, RANK, dtype=np.int64)
    np.testing.assert_array_equal(jaccl.all_sum(x, group=child),
                                  np.full(3, sum(want)))
    assert f"rank {child.rank()} of {child.size()}" in repr(child)


def test_key_orders_members(world):
    child = world.split(0, key=SIZE - 1 - RANK)
    assert child.rank() == SIZE - 1 - RANK
    assert job_ranks(child) == list(reversed(range(SIZE)))


def test_child_errors_name_job_ranks(world):
    """A child's error reports job ranks, in its fields and its text, even
    where member numbers differ (keys reverse the order here)."""
    child = world.split(0, key=SIZE - 1 - RANK)
    members = job_ranks(child)
    assert members == list(reversed(range(SIZE)))
    recv = [1] * SIZE
    if child.rank() == SIZE - 1:  # job rank 0 expects more from member 0
        recv[0] = 2
    with pytest.raises(jaccl.ProtocolError) as info:
        jaccl.all_to_allv(np.zeros(SIZE), [1] * SIZE, recv, group=child)
    e = info.value
    assert e.rank == RANK, (e.rank, str(e))
    assert str(e).startswith(f"[jaccl] rank {RANK}: "), str(e)
    assert (f"rank 0 expects 16 bytes from rank {SIZE - 1}, "
            f"but rank {SIZE - 1} sends 8 bytes") in e.detail, e.detail
    jaccl.barrier(group=child)  # the child is still usable


def test_negative_color_gives_none(world):
    child = world.split(-1 if RANK == 0 else 1)
    if RANK == 0:
        assert child is None
    else:
        assert child.size() == SIZE - 1
        jaccl.barrier(group=child)


def test_child_and_parent_from_two_threads(world):
    child = world.split(RANK // 2)
    errors = []

    def on_child():
        try:
            for _ in range(20):
                y = jaccl.all_sum(np.ones(1000, dtype=np.float32),
                                  group=child)
                assert y[0] == child.size()
        except Exception as e:  # reported below
            errors.append(e)

    t = threading.Thread(target=on_child)
    t.start()
    for _ in range(20):
        y = jaccl.all_sum(np.ones(1000, dtype=np.float32), group=world)
        assert y[0] == SIZE
    t.join(60)
    assert not t.is_alive() and not errors, errors


def test_nested_split_outlives_parent(world):
    child = world.split(0)
    grandchild = child.split(RANK % 2)
    del child
    want = [r for r in range(SIZE) if r % 2 == RANK % 2]
    assert job_ranks(grandchild) == want


def test_split_arguments(world):
    with pytest.raises(TypeError):
        world.split("red")
