"""One rank of the jaccl_torch elastic tests (test_elastic.py):

    elastic_rank.py kinds   3 ranks: abort from another thread on a
                            new_group (AbortedError; the peers see rank 0
                            lost), a revoke reaching the others
                            (RevokedError), shrink of a healthy revoked
                            group; then a SIGSTOPped rank (the test stops
                            and resumes rank 2): PeerLostError on the
                            others, who shrink and carry on; ExcludedError
                            on the woken rank.

Rank and size come from RANK / WORLD_SIZE (env://). Each step prints a line
the test looks for; any failed check raises (exit non-zero).
"""
import faulthandler
import os
import sys
import threading
import time
from datetime import timedelta

import torch
import torch.distributed as dist

import jaccl_torch

faulthandler.dump_traceback_later(200, exit=True)
RANK = int(os.environ["RANK"])


def log(*a):
    print(f"[rank {RANK}]", *a, flush=True)


def expect(cls, fn):
    """Runs fn, which must raise cls; returns the error."""
    try:
        fn()
    except cls as e:
        return e
    raise AssertionError(f"{fn} did not raise {cls.__name__}")


def all_reduce(group, value=1.0):
    t = torch.full((4,), float(value))
    dist.all_reduce(t, group=group)
    return t[0].item()


def kinds():
    pg = dist.group.WORLD
    # Aborted, on a group of its own (the world goes on).
    sub = dist.new_group(backend="jaccl", timeout=timedelta(seconds=30))
    if RANK == 0:
        threading.Timer(0.5, jaccl_torch.abort, (sub,)).start()
        t0 = time.monotonic()
        # Nobody else joins: only the abort ends it (op timeout: 30 s).
        e = expect(jaccl_torch.AbortedError, lambda: all_reduce(sub))
        log("ABORTED", round(time.monotonic() - t0, 1), e.kind)
        expect(jaccl_torch.AbortedError, lambda: all_reduce(sub))
    else:
        time.sleep(1.5)
        e = expect(jaccl_torch.Error, lambda: all_reduce(sub))
        log("PEER SAW", type(e).__name__, 0 in e.peers)

    # Revoked: rank 1 revokes the world once it is through the barrier; the
    # others are still in the barrier (its last message to them may be in
    # flight when rank 1 revokes) or in the all_reduce after it.
    if RANK == 1:
        dist.barrier(group=pg)
        jaccl_torch.revoke(pg)
    else:
        e = expect(jaccl_torch.RevokedError,
                   lambda: (dist.barrier(group=pg), all_reduce(pg)))
        log("REVOKED BY", e.peers[0])
    agreed = jaccl_torch.agree_failed(pg)
    assert agreed == [], (agreed, jaccl_torch.failed_ranks(pg))
    pg = jaccl_torch.shrink(pg)  # nobody failed: the same three
    assert pg.size() == 3 and pg.rank() == RANK
    # Known to torch.distributed as a new_group is.
    assert dist.get_rank(group=pg) == RANK and dist.get_backend(pg) == "jaccl"
    assert all_reduce(pg, RANK + 1) == 6
    log("SHRUNK HEALTHY")

    # PeerLost, then Excluded: the test stops rank 2 while the ranks loop.
    log("LOOPING")
    try:
        while True:
            all_reduce(pg)
            time.sleep(0.01)
    except jaccl_torch.ExcludedError as e:
        assert RANK == 2, e
        log("EXCLUDED", str(e))
        expect(jaccl_torch.ExcludedError, lambda: jaccl_torch.shrink(pg))
        log("SHRINK EXCLUDED")
        return
    except jaccl_torch.PeerLostError as e:
        assert RANK != 2, e
        log("PEERLOST", 2 in e.peers)
    jaccl_torch.revoke(pg)
    failed = jaccl_torch.agree_failed(pg)
    new = jaccl_torch.shrink(pg)
    assert new.size() == 2 and new.rank() == RANK, (new.size(), new.rank())
    assert dist.get_rank(group=new) == RANK
    assert all_reduce(new, RANK + 1) == 3
    log("VERIFIED", failed)


def main():
    dist.init_process_group("jaccl", timeout=timedelta(seconds=30))
    {"kinds": kinds}[sys.argv[1]]()
    log("OK", sys.argv[1])
    sys.stdout.flush()
    # The world lost members: an orderly teardown would wait on them.
    os._exit(0)


if __name__ == "__main__":
    main()
