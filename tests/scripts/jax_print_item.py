"""Planted problem: reading the loss on the host every step, with print() and .item()."""
import jax
import jax.numpy as jnp
import numpy as np


@jax.jit
def step(w, x):
    loss, g = jax.value_and_grad(lambda w: jnp.mean(jnp.tanh(x @ w) ** 2))(w)
    return w - 0.1 * g, loss


w = jax.device_put(np.eye(16, dtype=np.float32))
x = jax.device_put(np.ones((8, 16), np.float32))
for i in range(8):
    w, loss = step(w, x)
    print("loss", loss)  # PLANTED: device_to_host_sync
    best = loss.item()  # PLANTED-2: device_to_host_sync
