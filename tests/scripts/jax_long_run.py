"""A long tiny JAX loop (argv[1] steps, default 300) with float(loss) every step (a planted device_to_host_sync) and
one new batch shape at step 150 (a compile in the middle): issue 28's step retention. With argv[2] `numpy`, each
step is fed a fresh NumPy batch (an implicit host->device copy every call: JAX's usual input pipeline)."""
import sys

import jax
import jax.numpy as jnp
import numpy as np


@jax.jit
def step(w, x):
    loss, g = jax.value_and_grad(lambda w: jnp.mean(jnp.tanh(x @ w) ** 2))(w)
    return w - 0.01 * g, loss


n = int(sys.argv[1]) if len(sys.argv) > 1 else 300
rng = np.random.default_rng(0)
w = jax.device_put(rng.standard_normal((16, 4)).astype(np.float32))
small = jax.device_put(rng.standard_normal((8, 16)).astype(np.float32))
big = jax.device_put(rng.standard_normal((12, 16)).astype(np.float32))
fresh = len(sys.argv) > 2 and sys.argv[2] == "numpy"
total = 0.0
for i in range(n):
    if fresh:
        x = rng.standard_normal((12 if i == 150 else 8, 16)).astype(np.float32)
    else:
        x = big if i == 150 else small
    w, loss = step(w, x)
    total += float(loss)  # PLANTED: device_to_host_sync
print("done", n, total > -1)
