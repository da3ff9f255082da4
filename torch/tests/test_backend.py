"""torch.distributed on the "jaccl" backend, against gloo in the same job."""
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from conftest import HERE, RANK_MAIN, free_port, rank_env


def run_ok(job, mode, timeout=300):
    codes = job.wait(timeout)
    assert all(c == 0 for c in codes.values()), job.report()
    for r in codes:
        assert f"OK {mode}" in job.out[r], job.report()


# Every op x every dtype against gloo, subgroups, two groups at once, async
# ops, usage errors: over shared memory with no JACCL_* variable at all
# (auto picks shm on one host), and over TCP with JACCL_TRANSPORT=tcp (the
# backend reads jaccl's environment table when it is set).
@pytest.mark.ops_shm
@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_ops_shm(ranks, n):
    run_ok(ranks(n, "ops", {"JT_EXPECT_PLANE": "shm"}), "ops")


@pytest.mark.ops_tcp
@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_ops_tcp(ranks, n):
    run_ok(ranks(n, "ops", {"JACCL_TRANSPORT": "tcp",
                            "JT_EXPECT_PLANE": "tcp"}), "ops")


@pytest.mark.integration
@pytest.mark.parametrize("transport", ["shm", "tcp"])
def test_ddp_matches_gloo(ranks, transport):
    run_ok(ranks(3, "ddp", {"JACCL_TRANSPORT": transport}), "ddp")


# A rank that exits with ops in flight and never destroys its groups (as
# many scripts do) ends cleanly once its peers have run the same ops.
@pytest.mark.integration
def test_exit_with_ops_in_flight(ranks):
    job = ranks(3, "exit", {"JACCL_TRANSPORT": "shm"})
    run_ok(job, "exit")
    for r in job.out:
        assert "terminate" not in job.out[r], job.report()


@pytest.mark.integration
def test_torchrun(tmp_path):
    # Debian's torchrun (torch 1.13 on Python 3.11) crashes at start in
    # to_map ('NoneType' object has no attribute 'get': Std.from_str("0")
    # returns None under 3.11's enum) unless --redirects and --tee are given.
    env = rank_env({"JT_STEPS": "3"})
    launcher = shutil.which("torchrun")
    launcher = [launcher] if launcher else [sys.executable, "-m",
                                            "torch.distributed.run"]
    cmd = launcher + ["--nproc_per_node",
           "4", "--redirects", "1", "--tee", "1", "--log_dir",
           str(tmp_path / "logs"), "--master_addr", "127.0.0.1",
           "--master_port", str(free_port()), RANK_MAIN, "ddp"]
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=300)
    assert p.returncode == 0, p.stdout[-6000:]
    for r in range(4):
        assert f"[rank {r}] OK ddp" in p.stdout, p.stdout[-6000:]


@pytest.mark.integration
@pytest.mark.parametrize("transport", ["shm", "tcp"])
def test_sigkill_fails_every_survivor(ranks, transport):
    n, victim = 4, 2
    job = ranks(n, "train", {"JACCL_TRANSPORT": transport})
    # Wait until every rank is training (reads its output line by line).
    seen = {r: [] for r in job.procs}
    for r, p in job.procs.items():
        for line in p.stdout:
            seen[r].append(line)
            if "step 20" in line:
                break
        else:
            pytest.fail(f"rank {r} ended before training:\n{''.join(seen[r])}")
    os.killpg(job.procs[victim].pid, signal.SIGKILL)
    # Every survivor's wait() (or DDP's backward, which waits on the same
    # work) raises naming the dead rank, well inside 10 s.
    for r, p in job.procs.items():
        if r == victim:
            continue
        try:
            rest, _ = p.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            pytest.fail(f"rank {r} still running 10 s after rank {victim} "
                        f"was killed:\n{''.join(seen[r])}")
        out = "".join(seen[r]) + rest
        assert p.returncode == 3, out[-3000:]
        failed = [l for l in out.splitlines() if "FAILED:" in l]
        assert failed and f"rank {victim}" in failed[0], out[-3000:]


@pytest.mark.integration
def test_missing_rank_is_named(ranks, tmp_path):
    # Ranks 0 and 1 of 3 meet in a FileStore; rank 2 never starts.
    init = "file://" + str(tmp_path / "store")
    job = ranks(3, "join", {"JT_INIT": init, "JT_TIMEOUT": "4"},
                ranks=[0, 1])
    codes = job.wait(120)
    for r in (0, 1):
        assert codes[r] == 3, job.report()
        failed = [l for l in job.out[r].splitlines() if "FAILED:" in l]
        assert failed, job.report()
        assert "timed out" in failed[0] and "rank 2" in failed[0], job.report()
        # The class of the kind (jaccl_torch.TimeoutError), not a bare
        # RuntimeError.
        assert "FAILED: TimeoutError:" in failed[0], job.report()


# JACCL_JOIN (a newcomer to a jaccl grow) means nothing to a torch job,
# whose members come from torch's rendezvous: a clear ConfigError at once
# (without the check these ranks silently joined each other and exited 0).
@pytest.mark.integration
def test_jaccl_join_is_refused(ranks, tmp_path):
    init = "file://" + str(tmp_path / "store")
    job = ranks(2, "join", {"JT_INIT": init, "JACCL_JOIN": "1",
                            "JT_TIMEOUT": "60"})
    codes = job.wait(30)
    for r in (0, 1):
        assert codes[r] == 3, job.report()
        failed = [l for l in job.out[r].splitlines() if "FAILED:" in l]
        assert failed, job.report()
        assert "FAILED: ConfigError:" in failed[0], job.report()
        assert "JACCL_JOIN=1" in failed[0], job.report()
        assert f"rank {r} of 2" in failed[0], job.report()


@pytest.mark.integration
@pytest.mark.parametrize("method", ["tcp", "file"])
def test_init_methods(ranks, tmp_path, method):
    init = (f"tcp://127.0.0.1:{free_port()}" if method == "tcp"
            else "file://" + str(tmp_path / "store"))
    job = ranks(2, "join", {"JT_INIT": init})
    codes = job.wait(120)
    assert codes == {0: 0, 1: 0}, job.report()
    for r in (0, 1):
        assert "joined" in job.out[r], job.report()


# JACCL_TORCH_INLINE_BYTES sets where ops stop running on the calling
# thread, for a program that is not changed: with it at 4 MiB an idle
# group's 1 MiB async all_reduce is done when the call returns.
@pytest.mark.integration
@pytest.mark.parametrize("value", [None, "4194304"])
def test_inline_bytes_from_environment(ranks, value):
    extra = {"JT_EXPECT_INLINE": value or "65536"}
    if value is not None:
        extra["JACCL_TORCH_INLINE_BYTES"] = value
    run_ok(ranks(2, "inline", extra), "inline")


@pytest.mark.integration
@pytest.mark.parametrize("value", ["abc", "-5", "1M", "64 KiB"])
def test_inline_bytes_malformed_fails_the_import(value):
    env = rank_env({"JACCL_TORCH_INLINE_BYTES": value})
    p = subprocess.run([sys.executable, "-c", "import jaccl_torch"], env=env,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode != 0, p.stdout + p.stderr
    assert (f"JACCL_TORCH_INLINE_BYTES='{value}' is not a whole number of "
            "bytes") in p.stderr, p.stderr
