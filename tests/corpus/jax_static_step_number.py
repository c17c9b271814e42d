"""A JAX loop whose jitted step takes the step number as a static argument (to compute a warm-up learning rate
in Python inside the step): every new step number is a new static value and a new compile. Planted mistake:
`static_argnums` on a value that changes every call (pass it as a traced array instead).
"""
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import optax


def init(key):
    k1, k2 = jax.random.split(key)
    return {"dense": {"kernel": jax.random.normal(k1, (12, 24)) * 0.2, "bias": jnp.zeros(24)},
            "out": {"kernel": jax.random.normal(k2, (24, 1)) * 0.2, "bias": jnp.zeros(1)}}


def apply(params, x):
    h = jnp.tanh(x @ params["dense"]["kernel"] + params["dense"]["bias"])
    return h @ params["out"]["kernel"] + params["out"]["bias"]


tx = optax.scale_by_rms()


@partial(jax.jit, static_argnums=(3, 4))
def train_step(params, opt_state, batch, step, warmup):
    lr = 1e-2 * min(1.0, (step + 1) / warmup)
    x, y = batch
    loss, grads = jax.value_and_grad(lambda p: jnp.mean((apply(p, x) - y) ** 2))(params)
    updates, opt_state = tx.update(grads, opt_state, params)
    params = jax.tree_util.tree_map(lambda p, u: p - lr * u, params, updates)
    return params, opt_state, loss


def main(steps=6, batch_size=32):
    rng = np.random.default_rng(0)
    params = init(jax.random.PRNGKey(1))
    opt_state = tx.init(params)
    w_true = rng.standard_normal((12, 1)).astype(np.float32)
    for step in range(steps):
        x = rng.standard_normal((batch_size, 12)).astype(np.float32)
        batch = jax.device_put((x, x @ w_true))
        params, opt_state, loss = train_step(params, opt_state, batch, step, 100)  # PLANTED: recompilation
    print("loss", jax.device_get(loss))


if __name__ == "__main__":
    main()
