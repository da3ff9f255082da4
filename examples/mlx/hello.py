# An unchanged MLX program on jaccl: run it with
#   jaccl-run -n 2 -- /usr/bin/python3 examples/mlx/hello.py
import mlx.core as mx

world = mx.distributed.init(backend="jaccl", strict=True)
x = mx.distributed.all_sum(mx.arange(4) * (world.rank() + 1))
print(f"rank {world.rank()} of {world.size()}: {x.tolist()}")
