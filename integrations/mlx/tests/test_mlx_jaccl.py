# MLX-level tests of MLX's jaccl backend on this library: real processes
# (under jaccl-run, or started by hand where a launcher must not be), with
# the MLX that scripts/mlx.sh built. Run through integrations/mlx/run.sh,
# which puts that MLX on PYTHONPATH and sets JACCL_BUILD_DIR.
import json
import os
import socket
import subprocess
import sys
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "mlx_worker.py")
BUILD = os.environ.get("JACCL_BUILD_DIR", "")
JACCL_RUN = os.path.join(BUILD, "tools", "jaccl-run")
PY = sys.executable

if not os.access(JACCL_RUN, os.X_OK):
    pytest.exit(f"no jaccl-run in JACCL_BUILD_DIR={BUILD!r} "
                "(run through integrations/mlx/run.sh)", returncode=2)


def free_ports(n):
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def base_env(**extra):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("JACCL_", "MLX_", "OMPI_", "PMI"))}
    env["JACCL_TIMEOUT"] = "30"
    env.update({k: str(v) for k, v in extra.items()})
    return env


def ring_hostfile(tmp_path, n):
    """MLX ring's hostfile: one list of host:port per rank."""
    path = tmp_path / "ring_hosts.json"
    path.write_text(json.dumps([[f"127.0.0.1:{p}"] for p in free_ports(n)]))
    return str(path)


def jaccl_run(n, scenario, env, timeout=240):
    cmd = [JACCL_RUN, "-n", str(n), "--timeout", str(timeout), "--",
           PY, WORKER, scenario]
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True,
                       timeout=timeout + 30)
    return p.returncode, p.stdout


def assert_all_ok(rc, out, n, scenario):
    assert rc == 0, out
    for r in range(n):
        assert f"OK {scenario} rank {r}" in out, out


@pytest.mark.parametrize("transport", ["auto", "tcp"])
@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_ops_match_ring(tmp_path, n, transport):
    env = base_env(JACCL_TRANSPORT=transport,
                   MLX_HOSTFILE=ring_hostfile(tmp_path, n))
    rc, out = jaccl_run(n, "ops", env)
    assert_all_ok(rc, out, n, "ops")


@pytest.mark.parametrize("n", [2, 4])
def test_sharded_linear_layers(n):
    rc, out = jaccl_run(n, "shard", base_env())
    assert_all_ok(rc, out, n, "shard")


def spawn(n, scenario, env_of_rank):
    return [subprocess.Popen([PY, WORKER, scenario], env=env_of_rank(r),
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True) for r in range(n)]


def finish_all(procs, timeout=120):
    outs = []
    for p in procs:
        try:
            out, _ = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            out, _ = p.communicate()
            pytest.fail(f"a rank did not finish in {timeout} s:\n{out}")
        outs.append((p.returncode, out))
    return outs


@pytest.mark.parametrize("kind", ["dir", "zmq"])
def test_python_all_gather_factory(tmp_path, kind):
    """mx.distributed.init(backend="jaccl", all_gather_factory=f) with f in
    Python, started without any launcher or coordinator: MLX holds the
    interpreter lock during init and takes it again inside f."""
    n = 3
    endpoint = f"tcp://127.0.0.1:{free_ports(1)[0]}"
    procs = spawn(n, "factory", lambda r: base_env(
        JACCL_RANK=r, JACCL_SIZE=n, FACTORY_KIND=kind,
        FACTORY_DIR=tmp_path, FACTORY_ENDPOINT=endpoint))
    for r, (rc, out) in enumerate(finish_all(procs)):
        assert rc == 0 and f"OK factory rank {r}" in out, out


def test_exo_start(tmp_path):
    """exo's way: a parent sets MLX_RANK, MLX_IBV_DEVICES (a file holding
    the device matrix; null everywhere on a machine without RDMA) and
    MLX_JACCL_COORDINATOR, and calls init(strict=True)."""
    n = 3
    devices = tmp_path / "devices.json"
    devices.write_text(json.dumps([[None] * n for _ in range(n)]))
    coord = f"127.0.0.1:{free_ports(1)[0]}"
    procs = spawn(n, "exo", lambda r: base_env(
        MLX_RANK=r, MLX_IBV_DEVICES=devices, MLX_JACCL_COORDINATOR=coord))
    for r, (rc, out) in enumerate(finish_all(procs)):
        assert rc == 0 and f"OK exo rank {r}" in out, out


@pytest.mark.parametrize("transport", ["auto", "tcp"])
def test_killed_rank_is_named_by_every_survivor(transport):
    """SIGKILL of one rank during all_sum: every survivor's MLX call raises
    a Python exception naming that rank within 10 s. (Started by hand:
    jaccl-run would stop the survivors itself.)"""
    n = 4
    coord = f"127.0.0.1:{free_ports(1)[0]}"
    procs = spawn(n, "kill", lambda r: base_env(
        JACCL_RANK=r, JACCL_SIZE=n, JACCL_COORDINATOR=coord,
        JACCL_TRANSPORT=transport, JACCL_TIMEOUT=60,
        JACCL_OP_TIMEOUT=120))  # the failure must come from the death
    victim = procs[-1]
    line = victim.stdout.readline()
    assert line.startswith("READY"), line + victim.communicate()[0]
    time.sleep(0.5)  # the survivors are inside all_sum by now
    killed = time.time()
    victim.kill()
    for r, (rc, out) in enumerate(finish_all(procs[:-1], timeout=60)):
        said = [ln for ln in out.splitlines() if ln.startswith("RAISED at")]
        assert rc == 0 and said, out
        assert f"rank {n - 1}" in said[0], out
        raised = float(said[0].split("at ")[1].split(":")[0])
        assert raised - killed < 10, f"rank {r} took {raised - killed:.1f} s"
    victim.communicate()
