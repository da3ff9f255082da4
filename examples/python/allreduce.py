"""All-reduce with jaccl from Python, checked on every rank.

    PYTHONPATH=build/python build/tools/jaccl-run -n 4 -- \
        /usr/bin/python3 examples/python/allreduce.py [elements]
"""
import sys

import numpy as np

import jaccl

n = int(sys.argv[1]) if len(sys.argv) > 1 else 1 << 20
group = jaccl.init(strict=True)  # JACCL_RANK, JACCL_SIZE, JACCL_COORDINATOR
rank, size = group.rank(), group.size()

# Rank r contributes r + i % 7; the sum is size*(size-1)/2 + size*(i % 7).
x = (rank + np.arange(n) % 7).astype(np.float32)
y = jaccl.all_sum(x)  # the world group; same as jaccl.all_sum(x, group=group)
want = size * (size - 1) / 2 + size * (np.arange(n) % 7)
wrong = int(np.count_nonzero(np.abs(y - want) > 1e-3))
jaccl.barrier()
if wrong:
    print(f"rank {rank}/{size}: all_sum of {n} floats: {wrong} WRONG elements")
    sys.exit(1)
print(f"rank {rank}/{size}: all_sum of {n} floats over {group.backend_name}: OK")
