"""torchft-style elastic training with DDP on the jaccl backend: train, lose
a rank, shrink to the survivors, redo the failed step on them, carry on
(docs/failures.md, "Elastic groups").

    PYTHONPATH=build/torch build/tools/jaccl-run --elastic -n 4 -- \\
        /usr/bin/python3 examples/python/elastic_ddp.py \\
        --init tcp://127.0.0.1:29600 --steps 8 --kill-rank 2 --kill-step 4

jaccl-run --elastic lets the survivors run on when a rank dies (torchrun
would stop them all). --kill-rank SIGKILLs itself at the start of
--kill-step. Each step trains on one fixed global batch (the same whatever
the group's size) split evenly among the current members, from equal
initial weights, so the averaged gradient and hence every loss printed is
the same as in a run that started with the survivors only (the test,
torch/tests/test_elastic.py, compares the two runs).
"""
import argparse
import gc
import os
import signal
from datetime import timedelta

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import jaccl_torch  # registers the "jaccl" backend

GLOBAL_BATCH = 24  # divisible by 4, 3, 2 and 1 members


def batch(step, rank, size):
    """This member's share of step's global batch."""
    g = torch.Generator().manual_seed(1000 + step)
    x = torch.randn(GLOBAL_BATCH, 8, generator=g, dtype=torch.float64)
    y = x.sum(dim=1, keepdim=True).sin()
    share = GLOBAL_BATCH // size
    return x[rank * share:(rank + 1) * share], y[rank * share:(rank + 1) * share]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--init", default="env://",
                    help="torch init method (env:// under torchrun)")
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--kill-rank", type=int, default=-1)
    ap.add_argument("--kill-step", type=int, default=-1)
    args = ap.parse_args()
    rank = int(os.environ.get("JACCL_RANK", os.environ.get("RANK", "0")))
    size = int(os.environ.get("JACCL_SIZE", os.environ.get("WORLD_SIZE", "1")))
    dist.init_process_group("jaccl", init_method=args.init, rank=rank,
                            world_size=size, timeout=timedelta(seconds=30))
    pg = dist.group.WORLD

    torch.manual_seed(0)  # equal initial weights on every rank
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(),
                                torch.nn.Linear(16, 1)).double()
    net = DDP(model, process_group=pg)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    # The weights after `step` steps, for the last two steps: after a
    # failure the survivors restart from the earliest step one of them did
    # not finish, and a rank may have finished one step more than another.
    # (Plain SGD keeps no state; with momentum or Adam, save
    # opt.state_dict() beside the weights.)
    saved = {0: {k: v.clone() for k, v in model.state_dict().items()}}

    step = 0
    while step < args.steps:
        if rank == args.kill_rank and step == args.kill_step:
            os.kill(os.getpid(), signal.SIGKILL)  # a crash, no goodbye
        try:
            x, y = batch(step, pg.rank(), pg.size())
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(net(x), y)
            loss.backward()  # DDP averages the gradients over pg
            opt.step()
            total = loss.detach().clone()
            dist.all_reduce(total, group=pg)
            if pg.rank() == 0:
                print(f"step {step}: {pg.size()} ranks, loss "
                      f"{total.item() / pg.size():.12f}", flush=True)
            step += 1
            saved = {step - 1: saved.get(step - 1),
                     step: {k: v.clone() for k, v in model.state_dict().items()}}
        except RuntimeError as e:
            # A failed DDP backward reaches Python as a RuntimeError with
            # jaccl's message; a failed op as jaccl_torch.<Kind>Error.
            if isinstance(e, jaccl_torch.Error) and \
                    e.kind not in ("PeerLost", "Revoked"):
                raise  # not a lost peer: a bug to fix, not to survive
            print(f"rank {rank}: step {step} failed: {type(e).__name__}: {e}",
                  flush=True)
            jaccl_torch.revoke(pg)  # every member stops, also one idle
            failed = jaccl_torch.agree_failed(pg)  # the same everywhere
            if not failed:
                raise  # nobody died: not ours to survive
            new_pg = jaccl_torch.shrink(pg)  # survivors, in the old order
            # Redo the earliest step a survivor did not finish, from the
            # weights every survivor had before it.
            first = torch.tensor([step])
            dist.all_reduce(first, op=dist.ReduceOp.MIN, group=new_pg)
            step = int(first.item())
            model.load_state_dict(saved[step])
            # DDP is rebuilt on the new group; the old one (and its hooks)
            # must go first.
            del net
            gc.collect()
            pg = new_pg
            net = DDP(model, process_group=pg)
            if pg.rank() == 0:
                print(f"step {step}: lost rank(s) {failed}, carrying on with "
                      f"{pg.size()}", flush=True)
    print(f"rank {rank}: done", flush=True)
    del net  # DDP sits in reference cycles that hold its group
    gc.collect()
    dist.destroy_process_group()  # every group, the failed world too


if __name__ == "__main__":
    main()
