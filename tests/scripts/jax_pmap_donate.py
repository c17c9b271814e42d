"""Data-parallel SGD with `jax.pmap` over the host's devices whose step donates its replicated weights
(`donate_argnums=(0,)`, the pattern of pmap training examples), or not (argv[1] == "keep"). The step returns new
weights of the same shape, so only the "keep" run may be told it donates nothing."""
import sys
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

DONATE = (0,) if sys.argv[1:] != ["keep"] else ()


@partial(jax.pmap, axis_name="devices", donate_argnums=DONATE)
def update(w, x, y):
    def loss_fn(w):
        return jnp.mean((jnp.tanh(x @ w) - y) ** 2)
    loss, g = jax.value_and_grad(loss_fn)(w)
    return w - 0.05 * jax.lax.pmean(g, "devices"), jax.lax.pmean(loss, "devices")


n = jax.local_device_count()
rng = np.random.default_rng(3)
w0 = rng.standard_normal((32, 16)).astype(np.float32) * 0.1
w = jnp.asarray(np.broadcast_to(w0, (n, 32, 16)))  # one replica per device: pmap splits the leading axis
x = jnp.asarray(rng.standard_normal((n, 8, 32)), jnp.float32)
y = jnp.asarray(rng.standard_normal((n, 8, 16)), jnp.float32)
for step in range(12):
    w, loss = update(w, x, y)
print("loss", float(loss[0]))
