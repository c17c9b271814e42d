"""A long tiny JAX loop (argv[1] steps, default 300) with float(loss) every step (a planted device_to_host_sync) and
one new batch shape at step 150 (a compile in the middle): issue 28's step retention."""
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
total = 0.0
for i in range(n):
    w, loss = step(w, big if i == 150 else small)
    total += float(loss)  # PLANTED: device_to_host_sync
print("done", n, total > -1)
