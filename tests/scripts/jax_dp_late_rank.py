"""One rank of a two-process data-parallel JAX job that never waits inside its loop (the loss is read once, after
it): argv = PORT RANK. Rank 1 starts its loop late once (it loads its shard for a second) and does plain host work
before every step; rank 0 runs ahead and waits, at its final read, for everything its device did - the all-reduce's
wait for rank 1 at every step and, once, for rank 1's late start."""
import sys
import time

import jax

jax.config.update("jax_cpu_collectives_implementation", "gloo")
port, rank = sys.argv[1], int(sys.argv[2])
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


for i in range(20):
    if rank == 1:
        if i == 1:
            time.sleep(1.0)  # its shard, loaded late: once
        host_work(0.03)
    w, loss = step(w, x, y)
print("rank", rank, "done", float(loss) >= 0)
