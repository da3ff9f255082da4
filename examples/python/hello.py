# Every rank all-sums four floats:
#   PYTHONPATH=build/python jaccl-run -n 4 -- /usr/bin/python3 examples/python/hello.py
import numpy as np

import jaccl

group = jaccl.init(strict=True)  # rank, size, coordinator: environment
y = jaccl.all_sum(np.array([1, 2, 3, group.rank()], dtype=np.float32))
print(f"rank {group.rank()} of {group.size()}: y = {y} over {group.backend_name}")
