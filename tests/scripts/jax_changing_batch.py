"""Planted problem: the batch size changes every step (a new input shape -> a new compile each step)."""
import jax
import jax.numpy as jnp
import numpy as np


@jax.jit
def step(params, x):
    loss_fn = lambda p: jnp.mean((jnp.tanh(x @ p["w1"]) @ p["w2"]) ** 2)
    loss, grads = jax.value_and_grad(loss_fn)(params)
    return jax.tree_util.tree_map(lambda p, g: p - 0.01 * g, params, grads), loss


rng = np.random.default_rng(0)
params = jax.device_put({"w1": rng.standard_normal((16, 32)).astype(np.float32),
                         "w2": rng.standard_normal((32, 4)).astype(np.float32)})
data = jax.device_put(rng.standard_normal((64, 16)).astype(np.float32))
for i in range(10):
    params, loss = step(params, data[: 2 + i])  # PLANTED: recompilation (batch shape changes)
print("done", float(loss) > -1)
