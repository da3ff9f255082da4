# A torch.distributed job on jaccl: every rank all-reduces a tensor.
#   PYTHONPATH=build/torch torchrun --nproc_per_node 2 --redirects 1 --tee 1 \
#       docs/snippets/torch_allreduce.py
import torch
import torch.distributed as dist

import jaccl_torch  # the import registers the "jaccl" backend

dist.init_process_group("jaccl")  # env://: torchrun's RANK, WORLD_SIZE, store
rank, size = dist.get_rank(), dist.get_world_size()
x = torch.full((4,), float(rank + 1))
dist.all_reduce(x)  # SUM
assert x.tolist() == [size * (size + 1) / 2] * 4, x
# One write per line: torchrun starts ranks with python -u, and --tee would
# print half of one rank's line beside the other's.
print(f"rank {rank} of {size}: all_reduce over "
      f"{jaccl_torch.data_plane(dist.group.WORLD)}: {x.tolist()}\n", end="")
dist.destroy_process_group()
