"""Per-example gradients with `jax.vmap` called outside any jitted function (as in many tutorials), whose
per-example function builds a one-element index with `jnp.array([0])`: under an un-jitted vmap that is a real
host->device upload, 4 bytes, every step (line marked PLANTED). Its cost is the eager dispatch, microseconds a
step, so it is worth an `info`, said in time, not a warning. argv[1] == "bulk": each step also uploads a Python
list of 20,000 numbers (line marked BULK), whose conversion and upload take most of the step: a warning."""
import sys

import jax
import jax.numpy as jnp
import numpy as np


def example_loss(w, x, y):
    first = jnp.array([0])  # PLANTED: a new device array from a Python list, each call
    pred = jnp.take(x @ w, first)
    return jnp.sum((pred - y) ** 2)


per_example_grads = jax.vmap(jax.grad(example_loss), in_axes=(None, 0, 0))
update = jax.jit(lambda w, g: w - 0.01 * g.mean(0))

rng = np.random.default_rng(1)
w = jnp.asarray(rng.standard_normal((8, 1)).astype(np.float32))
xs = jnp.asarray(rng.standard_normal((4, 8)).astype(np.float32))
ys = jnp.asarray(rng.standard_normal((4,)).astype(np.float32))
BULK = sys.argv[1:] == ["bulk"]
for step in range(24):
    grads = per_example_grads(w, xs, ys)
    if BULK:
        mask = jnp.array([1.0] * 20_000)  # BULK: a long Python list made and uploaded every step
        grads = grads * mask[0]
    w = update(w, grads)
print("done", float(jnp.sum(w)))
