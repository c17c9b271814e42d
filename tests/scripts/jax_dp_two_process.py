"""One rank of a two-process data-parallel JAX job (jax.distributed on localhost, gloo CPU collectives, one CPU
device each): argv = PORT RANK [SLOW_RANK [SLOW_MS [STEPS [READ_EVERY]]]]. The slow rank does plain host work before
each step; with READ_EVERY, every rank reads the loss on the host every READ_EVERY steps (a logging line)."""
import sys
import time

import jax

jax.config.update("jax_cpu_collectives_implementation", "gloo")
port, rank = sys.argv[1], int(sys.argv[2])
slow_rank = int(sys.argv[3]) if len(sys.argv) > 3 else -1
slow_s = (float(sys.argv[4]) if len(sys.argv) > 4 else 30.0) / 1e3
steps = int(sys.argv[5]) if len(sys.argv) > 5 else 14
read_every = int(sys.argv[6]) if len(sys.argv) > 6 else 0
jax.distributed.initialize(coordinator_address=f"localhost:{port}", num_processes=2, process_id=rank)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402

mesh = Mesh(np.array(jax.devices()), ("data",))
rep, shard = NamedSharding(mesh, P()), NamedSharding(mesh, P("data"))
w0 = np.ones((64, 1), np.float32)
w = jax.make_array_from_callback(w0.shape, rep, lambda i: w0[i])
x_local = np.random.default_rng(rank).standard_normal((32, 64)).astype(np.float32)
x = jax.make_array_from_process_local_data(shard, x_local)
y = jax.make_array_from_process_local_data(shard, (x_local @ w0 * 0.5).astype(np.float32))


@jax.jit
def step(w, x, y):
    loss, grad = jax.value_and_grad(lambda w: jnp.mean((x @ w - y) ** 2))(w)  # the gradient: a mean over ranks
    return w - 0.01 * grad, loss


def host_work(seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:  # plain Python work, no JAX
        sum(range(200))


for i in range(steps):
    if rank == slow_rank:
        host_work(slow_s)
    w, loss = step(w, x, y)
    jax.block_until_ready(loss)
    if read_every and i % read_every == 0:
        loss_now = float(loss)
print("rank", rank, "done", float(loss) >= 0)
