"""Carrying on after a rank dies, in Python (docs/failures.md, "Elastic
groups"): a loop of all_sums that, when a step fails, revokes the group,
agrees on who failed, shrinks to the survivors and repeats the step on
them. examples/elastic.cpp is the same in C++.

    PYTHONPATH=build/python build/tools/jaccl-run --elastic -n 4 -- \\
        /usr/bin/python3 examples/python/elastic.py 6 2 3

Arguments: steps, crash_rank, crash_step (crash_rank SIGKILLs itself at the
start of crash_step). The group's rank 0 prints each step.
"""
import os
import signal
import sys

import numpy as np

import jaccl

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 6
crash_rank = int(sys.argv[2]) if len(sys.argv) > 2 else -1
crash_step = int(sys.argv[3]) if len(sys.argv) > 3 else -1

group = jaccl.init(strict=True)
job_rank = group.rank()
step = 0
while step < steps:
    if job_rank == crash_rank and step == crash_step:
        os.kill(os.getpid(), signal.SIGKILL)  # no goodbye: a crash
    try:
        total = jaccl.all_sum(np.array([job_rank + 1.0], np.float32),
                              group=group)
        if group.rank() == 0:
            print(f"step {step}: {group.size()} ranks, sum {total[0]:g}",
                  flush=True)
        step += 1
    except (jaccl.PeerLostError, jaccl.RevokedError):
        # Anything else is a bug to fix, not to survive: it propagates.
        group.revoke()  # every member stops, also one that is idle
        failed = group.agree_failed()  # the same list everywhere
        group = group.shrink()  # the survivors, numbered in the old order
        jaccl.clear_backends()  # forget the old world group
        if group.rank() == 0:
            print(f"step {step} failed: {len(failed)} rank(s) lost, "
                  f"carrying on with {group.size()}", flush=True)
