"""Elastic groups from Python (docs/failures.md, "Elastic groups"): a rank
SIGKILLed mid all_sum, the survivors' error naming it, revoke, agreement,
shrink, and every op on the shrunk group; abort from another thread; revoke
reaching an idle member; shrink with exclude. Each test starts its ranks as
real processes (test_solo.spawn)."""
import os
import signal
import subprocess
import textwrap
import time

import pytest

from test_solo import PY, clean_env, finish, spawn

pytestmark = pytest.mark.solo

# What the survivors run on the shrunk group: every op, checked against
# what the survivors' ranks say it must give.
CHECK_OPS = """
    def check_ops(ng, survivors, me):
        n, r = ng.size(), ng.rank()
        assert n == len(survivors) and r == survivors.index(me), (n, r)
        v = np.full(1000, me + 1, np.float64)
        assert (jaccl.all_sum(v, group=ng) == sum(s + 1 for s in survivors)).all()
        assert (jaccl.all_max(v, group=ng) == max(survivors) + 1).all()
        assert (jaccl.all_min(v, group=ng) == min(survivors) + 1).all()
        big = np.full(1 << 18, me + 1, np.float32)
        assert (jaccl.all_sum(big, group=ng) == sum(s + 1 for s in survivors)).all()
        assert list(jaccl.all_gather(np.array([me]), group=ng)) == survivors
        x = np.arange(4 * n, dtype=np.int64) + me
        got = jaccl.sum_scatter(x, group=ng)
        want = sum(np.arange(4 * n, dtype=np.int64)[4 * r:4 * r + 4] + s
                   for s in survivors)
        assert (got == want).all(), (got, want)
        b = jaccl.broadcast(np.array([me, 7]), 0, group=ng)
        assert list(b) == [survivors[0], 7]
        blocks = np.array([me * 100 + j for j in range(n)])
        assert list(jaccl.all_to_all(blocks, group=ng)) == [
            s * 100 + r for s in survivors]
        if n > 1:
            jaccl.send(np.array([me]), (r + 1) % n, group=ng)
            got = jaccl.recv((1,), np.int64, (r - 1) % n, group=ng)
            assert got[0] == survivors[(r - 1) % n]
        jaccl.barrier(group=ng)
        print("OPS OK", n, flush=True)
"""


def script(*parts):
    return "\n".join(textwrap.dedent(p) for p in parts)


def run_job(tmp_path, code, size, timeout=60, **env):
    env.setdefault("JACCL_TIMEOUT", 10)
    env.setdefault("JACCL_OP_TIMEOUT", 30)
    procs = spawn(tmp_path, code, size, **env)
    return [finish(p, timeout) for p in procs]


@pytest.mark.parametrize("transport,victim", [("shm", 2), ("tcp", 0)])
def test_sigkill_mid_all_sum_then_shrink(tmp_path, transport, victim):
    code = script("""
        import os, signal, threading, time
        import numpy as np
        import jaccl
    """, CHECK_OPS, """
    VICTIM = int(os.environ["T_VICTIM"])
    g = jaccl.init(strict=True)
    me, n = g.rank(), g.size()
    x = np.ones(1 << 20, np.float32)
    jaccl.all_sum(x, group=g)
    if me == VICTIM:
        # Die while the collectives below are running.
        threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGKILL)).start()
    start = time.monotonic()
    try:
        while time.monotonic() - start < 20:
            jaccl.all_sum(x, group=g)
        raise SystemExit("NO ERROR")
    except (jaccl.PeerLostError, jaccl.RevokedError) as e:
        print("CAUGHT", type(e).__name__, VICTIM in e.peers, repr(str(e)),
              flush=True)
    g.revoke()
    print("AGREED", g.agree_failed(), flush=True)
    ng = g.shrink()
    jaccl.clear_backends()  # the world group is g: drop it
    del g
    check_ops(ng, [r for r in range(n) if r != VICTIM], me)
    """)
    results = run_job(tmp_path, code, 4, T_VICTIM=victim,
                      JACCL_TRANSPORT=transport)
    rc, out = results[victim]
    assert rc == -signal.SIGKILL, out
    for r, (rc, out) in enumerate(results):
        if r == victim:
            continue
        assert rc == 0, f"rank {r}:\n{out}"
        # The first error names the dead rank (as PeerLost, or as the
        # revoke of a survivor that saw it first, which names it too).
        assert "CAUGHT PeerLostError True" in out or \
            "CAUGHT RevokedError True" in out, f"rank {r}:\n{out}"
        assert f"AGREED [{victim}]" in out, f"rank {r}:\n{out}"
        assert "OPS OK 3" in out, f"rank {r}:\n{out}"


def test_abort_from_another_thread(tmp_path):
    code = """
        import threading, time
        import numpy as np
        import jaccl
        g = jaccl.init(strict=True)
        jaccl.barrier(group=g)
        if g.rank() == 0:
            # Rank 1 joins no collective: this all_sum waits until aborted.
            t0 = time.monotonic()
            threading.Timer(0.5, g.abort).start()
            try:
                jaccl.all_sum(np.ones(1 << 16, np.float32), group=g)
                raise SystemExit("NO ERROR")
            except jaccl.AbortedError as e:
                print("ABORTED", round(time.monotonic() - t0, 1), e.kind,
                      flush=True)
            # Later calls fail at once, shrink too.
            for call in (lambda: jaccl.barrier(group=g), lambda: g.shrink()):
                try:
                    call()
                    raise SystemExit("NO ERROR")
                except jaccl.AbortedError:
                    pass
            print("LATER ABORTED", flush=True)
        else:
            time.sleep(1.5)
            try:
                jaccl.barrier(group=g)
                raise SystemExit("NO ERROR")
            except jaccl.Error as e:
                # The peer sees rank 0 as failed.
                print("PEER SAW", type(e).__name__, 0 in e.peers, flush=True)
                print("FAILED", g.failed_ranks(), flush=True)
        """
    results = run_job(tmp_path, code, 2, JACCL_TRANSPORT="tcp")
    rc, out = results[0]
    assert rc == 0, out
    line = [l for l in out.splitlines() if l.startswith("ABORTED")]
    assert line and line[0].endswith("Aborted"), out
    # Promptly: the op timeout is 30 s, the abort came at 0.5 s.
    assert float(line[0].split()[1]) < 10, out
    assert "LATER ABORTED" in out, out
    rc, out = results[1]
    assert rc == 0, out
    assert "PEER SAW PeerLostError True" in out, out
    assert "FAILED [0]" in out, out


def test_revoke_reaches_an_idle_member_then_shrink_with_exclude(tmp_path):
    code = script("""
        import time
        import numpy as np
        import jaccl
    """, CHECK_OPS, """
    g = jaccl.init(strict=True)
    me = g.rank()
    if me == 1:
        jaccl.barrier(group=g)
        g.revoke()
    else:
        # In the barrier (rank 1 may revoke before its last message
        # arrives) or idle in a collective rank 1 never joins: the revoke
        # ends it.
        try:
            jaccl.barrier(group=g)
            jaccl.all_sum(np.ones(8), group=g)
            raise SystemExit("NO ERROR")
        except jaccl.RevokedError as e:
            # peers: the rank that revoked first, then whoever relayed it.
            print("REVOKED BY", e.peers[0], str(e), flush=True)
    # Every member shrinks the revoked group, leaving rank 2 out on purpose.
    ng = g.shrink(exclude=[2])
    if me == 2:
        assert ng is None
        print("LEFT OUT", flush=True)
    else:
        check_ops(ng, [0, 1], me)
    """)
    results = run_job(tmp_path, code, 3, JACCL_TRANSPORT="shm")
    for r, (rc, out) in enumerate(results):
        assert rc == 0, f"rank {r}:\n{out}"
        if r != 1:
            assert "REVOKED BY 1 " in out, f"rank {r}:\n{out}"
    assert "LEFT OUT" in results[2][1]
    for r in (0, 1):
        assert "OPS OK 2" in results[r][1], results[r][1]


def test_grow_back_after_a_death(tmp_path):
    """Rank 1 of 3 dies; the survivors shrink to 2, a replacement started
    with JACCL_JOIN=1 (no rank, no size) joins through a file:// grow
    channel, and the grown group of 3 gives correct results on every op."""
    chan = tmp_path / "grow"
    chan.mkdir()
    common = dict(JACCL_GROW_CHANNEL=f"file://{chan}",
                  JACCL_JOB=f"pygrow{os.getpid()}", JACCL_TIMEOUT=20,
                  JACCL_OP_TIMEOUT=30)
    code = script(CHECK_OPS, """
        import os, signal, sys
        import numpy as np
        import jaccl
        if os.environ.get("JACCL_JOIN"):
            g = jaccl.init(strict=True)
            print("JOINED", g.rank(), g.size(), g.generation(), flush=True)
            check_ops(g, [0, 1, 2], g.rank())
            sys.exit(0)
        g = jaccl.init(strict=True)
        me = g.rank()
        jaccl.all_sum(np.ones(8))
        if me == 1:
            os.kill(os.getpid(), signal.SIGKILL)
        try:
            while True:
                jaccl.all_sum(np.ones(1 << 16), group=g)
        except jaccl.Error as e:
            print("ERROR", type(e).__name__, flush=True)
        g.revoke()
        s = g.shrink()
        del g
        print("SHRUNK", s.size(), flush=True)
        grown = s.grow(3)
        assert grown.generation() == 1 and grown.size() == 3
        check_ops(grown, [0, 1, 2], grown.rank())
        """)
    procs = spawn(tmp_path, code, 3, **common)
    deadline = time.monotonic() + 60
    out0 = ""
    # Start the replacement once a survivor has shrunk.
    while "SHRUNK" not in out0 and time.monotonic() < deadline:
        line = procs[0].stdout.readline()
        if not line:
            break
        out0 += line
    assert "SHRUNK 2" in out0, out0
    script_path = tmp_path / "worker.py"
    joiner = subprocess.Popen(
        [PY, str(script_path)],
        env=clean_env(JACCL_JOIN=1, **common), stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True)
    r0, r1, r2 = [finish(p, 60) for p in procs]
    rj = finish(joiner, 60)
    assert r1[0] == -signal.SIGKILL, r1[1]
    assert r0[0] == 0 and "OPS OK 3" in r0[1], out0 + r0[1]
    assert r2[0] == 0 and "SHRUNK 2" in r2[1] and "OPS OK 3" in r2[1], r2[1]
    assert rj[0] == 0 and "JOINED 2 3 1" in rj[1] and "OPS OK 3" in rj[1], \
        rj[1]
