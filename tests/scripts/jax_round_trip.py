"""Planted problem: the parameters go to the host after every step (`jax.device_get`, e.g. to keep a copy for a
checkpoint) and the host copies are what the next step gets: a round trip each step, not input data. The
batches are NumPy (the input pipeline: expected)."""
import jax
import jax.numpy as jnp
import numpy as np


def init(rng, sizes=(32, 64, 4)):
    return {f"w{i}": (rng.standard_normal((m, n)) / np.sqrt(m)).astype(np.float32)
            for i, (m, n) in enumerate(zip(sizes[:-1], sizes[1:]))}


@jax.jit
def train_step(params, x, y):
    def loss_fn(p):
        h = jnp.tanh(x @ p["w0"])
        return jnp.mean((h @ p["w1"] - y) ** 2)
    loss, grads = jax.value_and_grad(loss_fn)(params)
    return jax.tree_util.tree_map(lambda p, g: p - 0.05 * g, params, grads), loss


rng = np.random.default_rng(0)
params = jax.device_put(init(rng))
data = [(rng.standard_normal((8, 32)).astype(np.float32), rng.standard_normal((8, 4)).astype(np.float32))
        for _ in range(4)]
for step in range(10):
    x, y = data[step % 4]
    params, loss = train_step(params, x, y)  # PLANTED: host_to_device_transfer (round trip of the parameters)
    params = jax.device_get(params)  # a host copy every step, handed back to the next step
print("loss", round(float(loss), 4))
