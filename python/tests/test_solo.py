"""Tests that start their own ranks (subprocess + JACCL_* environment):
a rank killed mid-collective, Ctrl-C, interpreter exit, no configuration."""
import os
import select
import signal
import socket
import subprocess
import sys
import textwrap
import time

import pytest

pytestmark = pytest.mark.solo

PY = sys.executable


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("JACCL_", "MLX_"))}
    env.update({k: str(v) for k, v in extra.items()})
    return env


def spawn(tmp_path, code, size, ranks=None, **env):
    """Starts `code` as ranks of a job of `size`; returns the Popen list."""
    script = tmp_path / "worker.py"
    script.write_text(textwrap.dedent(code))
    port = free_port()
    procs = []
    for rank in (range(size) if ranks is None else ranks):
        e = clean_env(JACCL_RANK=rank, JACCL_SIZE=size,
                      JACCL_COORDINATOR=f"127.0.0.1:{port}", **env)
        procs.append(subprocess.Popen(
            [PY, str(script)], env=e, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True))
    return procs


def finish(proc, timeout=30):
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
        pytest.fail(f"process did not finish in {timeout} s:\n{out}")
    return proc.returncode, out


def finish_all(procs, timeout=30):
    """Like finish() for every rank under one deadline; on a timeout it kills
    them all and fails with every rank's output (who waited for whom)."""
    deadline = time.monotonic() + timeout
    late = []
    for p in procs:
        try:
            p.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            late.append(p)
    for p in late:
        p.kill()
    results = [(p.returncode, p.communicate()[0]) for p in procs]
    if late:
        pytest.fail(f"ranks {[procs.index(p) for p in late]} did not finish "
                    f"in {timeout} s:\n" + "\n".join(
                        f"--- rank {r}:\n{out}"
                        for r, (_, out) in enumerate(results)))
    return results


def test_killed_rank_raises_peer_lost_on_the_others(tmp_path):
    code = """
        import os, signal, threading, time
        import numpy as np
        import jaccl
        g = jaccl.init(strict=True)
        x = np.ones(1 << 20, np.float32)
        jaccl.all_sum(x)
        if g.rank() == 1:
            # Die while the collectives below are running.
            threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGKILL)).start()
        start = time.monotonic()
        try:
            while time.monotonic() - start < 20:
                jaccl.all_sum(x)
            print("NO ERROR")
        except jaccl.PeerLostError as e:
            print("PEERLOST", round(time.monotonic() - start, 1), e, flush=True)
            # The fields: this rank reports it, rank 1 is among the peers.
            print("FIELDS", e.kind, e.rank == g.rank(), 1 in e.peers,
                  flush=True)
        """
    procs = spawn(tmp_path, code, 3, JACCL_TIMEOUT=10, JACCL_OP_TIMEOUT=30)
    results = [finish(p) for p in procs]
    assert results[1][0] == -signal.SIGKILL, results[1][1]
    for rank in (0, 2):
        rc, out = results[rank]
        assert rc == 0 and "PEERLOST" in out, f"rank {rank}:\n{out}"
        assert "FIELDS PeerLost True True" in out, f"rank {rank}:\n{out}"


def test_no_configuration(tmp_path):
    code = """
        import jaccl
        assert jaccl.init() is None
        assert jaccl.init(all_gather_factory=lambda r, s: None) is None
        try:
            jaccl.init(strict=True)
        except jaccl.ConfigError as e:
            assert "JACCL_RANK" in str(e), e
            print("OK")
        """
    script = tmp_path / "noconf.py"
    script.write_text(textwrap.dedent(code))
    rc, out = finish(subprocess.Popen([PY, str(script)], env=clean_env(),
                                      stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True))
    assert rc == 0 and "OK" in out, out


def test_exit_with_live_groups(tmp_path):
    """Interpreter exit with groups alive, a daemon thread blocked in a
    collective no peer joins, and another stuck in a user side-channel
    function neither hangs nor crashes."""
    code = """
        import os, threading, time
        import numpy as np
        import jaccl
        g = jaccl.init(strict=True)
        jaccl.all_sum(np.ones(10))
        jaccl.clear_backends()
        g2 = jaccl.init(strict=True)
        if g2.rank() == 0:
            threading.Thread(target=jaccl.all_sum, args=(np.ones(1 << 20),),
                             kwargs={"group": g2}, daemon=True).start()
        else:
            time.sleep(1)
        # A user all-gather runs on the thread that called init: this one
        # is stuck on a daemon thread when the interpreter exits.
        jaccl.clear_backends()
        stuck = threading.Event()
        threading.Thread(target=jaccl.init, daemon=True, kwargs={
            "all_gather_factory": lambda r, s: (
                lambda src, n: stuck.set() or threading.Event().wait(60))
        }).start()
        assert stuck.wait(10), "the user all-gather was never called"
        print("EXITING", flush=True)
        """
    procs = spawn(tmp_path, code, 2, JACCL_TIMEOUT=10)
    for p in procs:
        rc, out = finish(p, timeout=30)
        assert rc == 0 and "EXITING" in out, out


def test_ctrl_c_during_init(tmp_path):
    """Rank 1 never comes: SIGINT ends rank 0's init with KeyboardInterrupt
    long before JACCL_TIMEOUT."""
    code = """
        import time
        import jaccl
        start = time.monotonic()
        try:
            jaccl.init(strict=True)
        except KeyboardInterrupt:
            print("INTERRUPTED", round(time.monotonic() - start, 1), flush=True)
        """
    (p,) = spawn(tmp_path, code, 2, ranks=[0], JACCL_TIMEOUT=60)
    time.sleep(1.5)
    p.send_signal(signal.SIGINT)
    rc, out = finish(p, timeout=20)
    assert rc == 0 and "INTERRUPTED" in out, out


def test_ctrl_c_during_collective(tmp_path):
    """SIGINT while a collective waits for a late peer: the collective
    completes, then KeyboardInterrupt is raised."""
    code = """
        import os, time
        import numpy as np
        import jaccl
        g = jaccl.init(strict=True)
        jaccl.barrier()
        if g.rank() == 1:
            time.sleep(3)
        print("ENTERING", flush=True)
        try:
            y = jaccl.all_sum(np.ones(4))
            print("NO INTERRUPT", flush=True)
        except KeyboardInterrupt:
            print("INTERRUPTED AFTER COLLECTIVE", flush=True)
        jaccl.barrier()
        """
    procs = spawn(tmp_path, code, 2, JACCL_TIMEOUT=20)
    # Signal rank 0 once it is in the collective (rank 1 joins it 3 s
    # later), not after a fixed delay: under load a fixed delay fell in
    # rank 0's imports, before any collective.
    # Raw reads of the pipe (a buffered readline would hide what it read
    # ahead from select and from communicate()).
    fd = procs[0].stdout.fileno()
    seen = b""
    deadline = time.monotonic() + 30
    while b"ENTERING\n" not in seen and time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 1)
        if ready:
            chunk = os.read(fd, 4096)
            if not chunk:
                break
            seen += chunk
    time.sleep(0.3)
    procs[0].send_signal(signal.SIGINT)
    r0, r1 = finish_all(procs)
    r0 = (r0[0], seen.decode() + r0[1])
    assert b"ENTERING\n" in seen, r0[1]
    assert r0[0] == 0 and "INTERRUPTED AFTER COLLECTIVE" in r0[1], r0[1]
    assert r1[0] == 0 and "NO INTERRUPT" in r1[1], r1[1]
