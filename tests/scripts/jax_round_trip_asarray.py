"""Planted problem: least squares whose weights are pulled to NumPy every step and passed back in
(`w = step(np.asarray(w), x, y)`): a round trip of the weights each step."""
import jax
import jax.numpy as jnp
import numpy as np


@jax.jit
def step(w, x, y):
    g = jax.grad(lambda w: jnp.mean((x @ w - y) ** 2))(w)
    return w - 0.1 * g


rng = np.random.default_rng(1)
x = jax.device_put(rng.standard_normal((64, 128)).astype(np.float32))
y = jax.device_put(rng.standard_normal((64, 8)).astype(np.float32))
w = jnp.zeros((128, 8))
for i in range(10):
    w = step(np.asarray(w), x, y)  # PLANTED: host_to_device_transfer (weights read back and sent again)
print("done", w.shape)
