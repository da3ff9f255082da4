"""One rank of the Python module's per-call benchmark (bench/sections/torch.py
runs it under jaccl-run): jaccl.all_sum of a float32 numpy array in a steady
loop, 8 B .. 32 KiB. Per size a warm-up (JP_WARM_CALLS calls), then JP_REPS
timed loops of JP_CALLS calls, a barrier before each. Rank 0 prints one JSON
line per size: the per-call time of every repetition (seconds) and their
median.
"""
import json
import os
import statistics
import time

import numpy as np

import jaccl

REPS = int(os.environ.get("JP_REPS", "5"))
CALLS = int(os.environ.get("JP_CALLS", "5000"))
WARM_CALLS = int(os.environ.get("JP_WARM_CALLS", "500"))


def main():
    g = jaccl.init(strict=True)
    for nbytes in (8, 64, 512, 4 << 10, 32 << 10):
        x = np.ones(nbytes // 4, np.float32)
        for _ in range(WARM_CALLS):
            jaccl.all_sum(x)
        reps = []
        for _ in range(REPS):
            jaccl.barrier()
            t0 = time.perf_counter()
            for _ in range(CALLS):
                jaccl.all_sum(x)
            reps.append((time.perf_counter() - t0) / CALLS)
        if g.rank() == 0:
            print(json.dumps({"op": "all_sum", "bytes": nbytes,
                              "calls": CALLS, "reps": reps,
                              "median": statistics.median(reps),
                              "plane": g.backend_name}), flush=True)


if __name__ == "__main__":
    main()
