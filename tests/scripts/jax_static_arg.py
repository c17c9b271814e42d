"""Planted problem: a static argument that changes every step (each new value compiles a new program)."""
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np


@partial(jax.jit, static_argnames=("n_layers",))
def step(params, x, n_layers):
    def loss_fn(p):
        h = x
        for _ in range(n_layers):
            h = jnp.tanh(h @ p["w"])
        return jnp.mean(h ** 2)
    loss, grads = jax.value_and_grad(loss_fn)(params)
    return jax.tree_util.tree_map(lambda p, g: p - 0.01 * g, params, grads), loss


rng = np.random.default_rng(0)
params = jax.device_put({"w": rng.standard_normal((16, 16)).astype(np.float32) * 0.1})
x = jax.device_put(rng.standard_normal((8, 16)).astype(np.float32))
for i in range(10):
    params, loss = step(params, x, n_layers=1 + i)  # PLANTED: recompilation (static argument changes)
print("done", float(loss) > -1)
