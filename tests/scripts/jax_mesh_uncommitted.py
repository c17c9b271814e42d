"""Planted problem: batches made with jnp (uncommitted, on device 0) fed to a step sharded over a mesh."""
import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

mesh = Mesh(np.array(jax.devices()), ("data",))
w = jax.device_put(jnp.eye(16), NamedSharding(mesh, P()))


@jax.jit
def step(w, x):
    loss, g = jax.value_and_grad(lambda w: jnp.mean(jnp.tanh(x @ w) ** 2))(w)
    return w - 0.1 * g, loss


batches = [jnp.ones((len(jax.devices()) * 2, 16)) * i for i in range(3)]
for i in range(6):
    w, loss = step(w, batches[i % 3])  # PLANTED: host_to_device_transfer (uncommitted array resharded)
print(float(loss))
