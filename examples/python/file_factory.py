"""A jaccl side channel over a shared directory (NFS, a local tmpfs, ...).

    jaccl-run -n 4 -- python3 examples/python/file_factory.py /shared/job42

Call k of rank r writes <dir>/<k>.<r> atomically (temporary file + rename),
then waits until every rank's file for call k exists and returns them in rank
order. No rank opens a port for bootstrap. Use a fresh directory per job.
"""
import os
import time


def file_factory(directory, timeout=None, poll=0.005):
    """Returns an all_gather_factory for jaccl.init that uses `directory`."""
    if timeout is None:
        timeout = float(os.environ.get("JACCL_TIMEOUT", "60"))

    def factory(rank, size):
        os.makedirs(directory, exist_ok=True)
        calls = iter(range(1 << 62))

        def all_gather(src, n_bytes):
            call = next(calls)
            mine = os.path.join(directory, f"{call}.{rank}")
            tmp = f"{mine}.{os.getpid()}.tmp"
            with open(tmp, "wb") as f:
                f.write(src)
            os.replace(tmp, mine)  # atomic: readers see all of it or nothing
            deadline = time.monotonic() + timeout
            parts = []
            for r in range(size):
                path = os.path.join(directory, f"{call}.{r}")
                while not os.path.exists(path):
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"rank {r} did not write {path} "
                                           f"within {timeout:g} s")
                    time.sleep(poll)
                with open(path, "rb") as f:
                    parts.append(f.read())
            return b"".join(parts)

        return all_gather

    return factory


if __name__ == "__main__":
    import sys

    import numpy as np

    import jaccl

    directory = sys.argv[1] if len(sys.argv) > 1 else "/tmp/jaccl-files-" + \
        os.environ.get("JACCL_TOKEN", "job")[:16]
    group = jaccl.init(strict=True, all_gather_factory=file_factory(directory))
    y = jaccl.all_sum(np.full(4, group.rank() + 1, dtype=np.float32))
    expected = group.size() * (group.size() + 1) / 2
    assert (y == expected).all(), y
    print(f"rank {group.rank()}/{group.size()}: all_sum over "
          f"{group.backend_name} via {directory}: OK")
