"""The jaccl_torch tests: each test starts its ranks as real processes
(rank_main.py, one python process per rank running many checks) over a real
TCPStore (env://), FileStore (file://) or torchrun's store.

ctest runs them in three parts (-m ops_shm / ops_tcp / integration); alone:
  JACCL_TORCH_MODULE_DIR=build/torch /usr/bin/python3 -m pytest torch/tests
"""
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
MODULE_DIR = os.environ.get("JACCL_TORCH_MODULE_DIR",
                            os.path.join(ROOT, "build", "torch"))
RANK_MAIN = os.path.join(HERE, "rank_main.py")


def pytest_configure(config):
    for m in ("ops_shm", "ops_tcp", "integration", "elastic"):
        config.addinivalue_line("markers", f"{m}: part of the torch suite")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rank_env(extra=None):
    """The environment of a rank: no JACCL_*/MLX_* or launcher variables
    (the backend needs none), the module on PYTHONPATH, plus `extra`."""
    drop = ("JACCL_", "MLX_", "OMPI_", "PMI_", "SLURM_", "MASTER_", "RANK",
            "WORLD_SIZE", "LOCAL_RANK", "TORCHELASTIC_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    env["PYTHONPATH"] = MODULE_DIR + os.pathsep + env.get("PYTHONPATH", "")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["OMP_NUM_THREADS"] = "1"  # ranks share two cores
    env.update(extra or {})
    return env


class Ranks:
    """N rank processes of rank_main.py MODE, each in its own session."""

    def __init__(self, n, mode, extra=None, ranks=None, init=None,
                 script=RANK_MAIN):
        port = free_port()
        self.procs = {}
        for r in (range(n) if ranks is None else ranks):
            env = rank_env({"MASTER_ADDR": "127.0.0.1",
                            "MASTER_PORT": str(port), "RANK": str(r),
                            "WORLD_SIZE": str(n), **(extra or {})})
            self.procs[r] = subprocess.Popen(
                [sys.executable, script, mode], env=env,
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                start_new_session=True)
        self.out = {}

    def wait(self, timeout=300):
        end = time.monotonic() + timeout
        try:
            for r, p in self.procs.items():
                out, _ = p.communicate(timeout=max(0.1, end - time.monotonic()))
                self.out[r] = out
        finally:
            self.kill()
        return {r: p.returncode for r, p in self.procs.items()}

    def kill(self):
        for p in self.procs.values():
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait()

    def report(self):
        return "\n".join(f"--- rank {r} (exit {p.returncode}):\n"
                         f"{self.out.get(r, '')[-4000:]}"
                         for r, p in self.procs.items())


@pytest.fixture
def ranks():
    started = []

    def start(*a, **k):
        job = Ranks(*a, **k)
        started.append(job)
        return job

    yield start
    for job in started:
        job.kill()
