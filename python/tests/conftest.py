"""Shared set-up of the jaccl Python tests.

Run under jaccl-run (python/run_tests.sh): every rank runs the same tests in
the same order, so tests that do collectives stay in step. Tests marked
`solo` start their own ranks with subprocess; under jaccl-run they run on
rank 0 only, after all the others.
"""
import hashlib
import os
import re
import sys
import tempfile

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples", "python"))

import jaccl  # noqa: E402

RANK = int(os.environ.get("JACCL_RANK", "-1"))
SIZE = int(os.environ.get("JACCL_SIZE", "0"))
MULTI = RANK >= 0 and SIZE >= 2
# The same on every rank of one jaccl-run job, different between jobs.
RUN_ID = hashlib.sha1((os.environ.get("JACCL_TOKEN", "") + "/" +
                       os.environ.get("JACCL_COORDINATOR", "")).encode()
                      ).hexdigest()[:10]
WORK = os.environ.get("JACCL_PYTEST_DIR") or os.path.join(
    tempfile.gettempdir(), "jaccl-pytest-" + RUN_ID)


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "solo: starts its own ranks; rank 0 only under jaccl-run")


def pytest_collection_modifyitems(config, items):
    solo = [i for i in items if i.get_closest_marker("solo")]
    rest = [i for i in items if not i.get_closest_marker("solo")]
    items[:] = rest + solo
    for item in rest:
        if not MULTI:
            item.add_marker(pytest.mark.skip(
                reason="needs several ranks: run under jaccl-run -n 2 or more"))
    for item in solo:
        if RANK > 0:
            item.add_marker(pytest.mark.skip(reason="runs on rank 0 only"))


@pytest.fixture
def shared_dir(request):
    """A directory path shared by the ranks of this job, unique per test."""
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.name)
    path = os.path.join(WORK, RUN_ID, name)
    os.makedirs(path, exist_ok=True)
    return path


@pytest.fixture
def world():
    """The world group over the default TCP coordinator (re-created if a
    test cleared it)."""
    return jaccl.init(strict=True)


@pytest.fixture
def no_world():
    """No world group during the test, and none left behind."""
    jaccl.clear_backends()
    yield
    jaccl.clear_backends()


def pytest_sessionfinish(session, exitstatus):
    """Under run_tests.sh, report this rank's result in a file and exit 0,
    so one failing rank does not make jaccl-run stop the others before they
    print their own summary; run_tests.sh turns the files into its status."""
    status_dir = os.environ.get("JACCL_PYTEST_STATUS_DIR")
    if status_dir and RANK >= 0:
        os.makedirs(status_dir, exist_ok=True)
        with open(os.path.join(status_dir, f"rank{RANK}"), "w") as f:
            f.write(f"{int(exitstatus)}\n")
        session.exitstatus = 0
