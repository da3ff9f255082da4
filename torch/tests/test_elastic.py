"""Elastic jaccl process groups: the error kinds (Aborted, Revoked,
PeerLost, Excluded) as jaccl_torch classes, shrink to a new ProcessGroup,
and the torchft-style DDP example (examples/python/elastic_ddp.py) under
jaccl-run --elastic, whose losses after losing a rank match a run that
started with the survivors."""
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from conftest import HERE, MODULE_DIR, ROOT, free_port, rank_env

pytestmark = pytest.mark.elastic

ELASTIC_RANK = os.path.join(HERE, "elastic_rank.py")
EXAMPLE = os.path.join(ROOT, "examples", "python", "elastic_ddp.py")
JACCL_RUN = os.environ.get(
    "JACCL_RUN", os.path.join(os.path.dirname(MODULE_DIR), "tools", "jaccl-run"))


def wait_line(job, r, text, timeout=90):
    """Reads rank r's output until a line holding text; returns what it
    read (the test fails with it if the rank ends first)."""
    seen = job.seen.setdefault(r, [])
    end = time.monotonic() + timeout
    for line in job.procs[r].stdout:
        seen.append(line)
        if text in line:
            return "".join(seen)
        if time.monotonic() > end:
            break
    pytest.fail(f"rank {r} never printed {text!r}:\n{''.join(seen)}")


@pytest.mark.parametrize("transport", ["shm", "tcp"])
def test_error_kinds_and_shrink(ranks, transport):
    n, victim = 3, 2
    job = ranks(n, "kinds", {"JACCL_TRANSPORT": transport,
                             "JACCL_HEARTBEAT_TIMEOUT": "3"},
                script=ELASTIC_RANK)
    job.seen = {}
    for r in range(n):
        wait_line(job, r, "LOOPING")
    time.sleep(0.2)
    os.kill(job.procs[victim].pid, signal.SIGSTOP)
    try:
        for r in range(n):
            if r != victim:
                wait_line(job, r, "VERIFIED")
    finally:
        os.kill(job.procs[victim].pid, signal.SIGCONT)
    out = {}
    for r, p in job.procs.items():
        # Not communicate(): it would bypass the lines stdout has buffered.
        p.wait(timeout=60)
        out[r] = "".join(job.seen[r]) + p.stdout.read()
        assert p.returncode == 0, f"rank {r}:\n{out[r]}"
        assert "OK kinds" in out[r], out[r]
    line = re.search(r"ABORTED ([\d.]+) Aborted", out[0])
    assert line and float(line.group(1)) < 10, out[0]  # promptly
    for r in (1, 2):
        assert "PEER SAW PeerLostError True" in out[r], out[r]
    for r in (0, 2):
        assert "REVOKED BY 1" in out[r], out[r]
    for r in range(n):
        assert "SHRUNK HEALTHY" in out[r], out[r]
    for r in (0, 1):
        assert "PEERLOST True" in out[r], out[r]
        assert "VERIFIED [2]" in out[r], out[r]
    assert "excluded from the group" in out[victim], out[victim]
    assert "SHRINK EXCLUDED" in out[victim], out[victim]


def run_example(n, *args):
    """The example under jaccl-run --elastic; returns ({step: loss}, output)."""
    env = rank_env()
    cmd = [JACCL_RUN, "--elastic", "-n", str(n), "--", sys.executable,
           EXAMPLE, "--init", f"tcp://127.0.0.1:{free_port()}", "--steps",
           "8", *args]
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=240)
    losses = {}
    for m in re.finditer(r"step (\d+): (\d+) ranks, loss ([\d.e+-]+)",
                         p.stdout):
        losses[int(m.group(1))] = (int(m.group(2)), float(m.group(3)))
    return p, losses


@pytest.fixture(scope="module")
def survivors_run():
    p, losses = run_example(3)
    assert p.returncode == 0, p.stdout[-6000:]
    assert sorted(losses) == list(range(8)), p.stdout[-6000:]
    return losses


# Rank 2 dies in the middle of the job, or rank 0 (whose process holds
# torch's TCPStore and jaccl's coordinator).
@pytest.mark.parametrize("victim", [2, 0])
def test_ddp_example_matches_a_run_of_the_survivors(survivors_run, victim):
    kill_step = 4
    p, losses = run_example(4, "--kill-rank", str(victim), "--kill-step",
                            str(kill_step))
    out = p.stdout
    # --elastic ends with the dead rank's status; the survivors finish.
    assert p.returncode != 0, out[-6000:]
    for r in range(4):
        if r != victim:
            assert f"rank {r}: done" in out, out[-6000:]
            # Each survivor caught the error, which names the dead rank.
            failed = re.search(rf"rank {r}: step {kill_step} failed: (.*)", out)
            assert failed and f"rank {victim}" in failed.group(1), out[-6000:]
    assert f"lost rank(s) [{victim}], carrying on with 3" in out, out[-6000:]
    assert sorted(losses) == list(range(8)), out[-6000:]
    for step, (size, loss) in losses.items():
        assert size == (4 if step < kill_step else 3), out[-6000:]
        want = survivors_run[step][1]
        assert abs(loss - want) <= 1e-9 * max(1.0, abs(want)), \
            (step, loss, want, out[-6000:])
