"""Planted problem: the batches come from a Python generator that does heavy NumPy work per batch (a sort standing in
for decoding and augmentation), on the training thread: the device waits for every batch."""
import jax
import jax.numpy as jnp
import numpy as np


def batches(n: int):
    base = np.random.default_rng(0).standard_normal(2_500_000).astype(np.float32)
    for k in range(n):
        raw = np.sort(base * (k + 1))  # PLANTED: input_bound
        yield raw[:128].reshape(8, 16) / (k + 1)


@jax.jit
def step(w, x):
    loss, g = jax.value_and_grad(lambda w: jnp.mean((x @ w) ** 2))(w)
    return w - 0.01 * g, loss


w = jax.device_put(np.ones((16, 4), np.float32))
for x in batches(24):  # LOOP: the loop pulls from the generator
    w, loss = step(w, jax.device_put(x))
print("done", bool(float(loss) >= 0))
