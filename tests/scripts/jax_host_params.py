"""Planted problem: NumPy parameters passed into a jitted step (copied to the device on every call)."""
import jax
import jax.numpy as jnp
import numpy as np


@jax.jit
def step(params, x):
    loss_fn = lambda p: jnp.mean((jnp.tanh(x @ p["w1"]) @ p["w2"]) ** 2)
    loss, grads = jax.value_and_grad(loss_fn)(params)
    return jax.tree_util.tree_map(lambda p, g: p - 0.01 * g, params, grads), loss


rng = np.random.default_rng(0)
params = {"w1": rng.standard_normal((16, 32)).astype(np.float32),
          "w2": rng.standard_normal((32, 4)).astype(np.float32)}
x = jax.device_put(jnp.ones((8, 16)))
for i in range(8):
    new_params, loss = step(params, x)  # PLANTED: host_to_device_transfer (params stay NumPy)
print("done", float(loss) > -1)
