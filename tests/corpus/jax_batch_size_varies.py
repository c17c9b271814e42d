"""JAX regression loop fed by a token-budget batcher: each batch holds as many examples as fit a budget, so the batch
size differs on every step from step 0, and the jitted step recompiles for each new size. Planted mistake: the
variable batch size (pad to a fixed size / a few buckets and mask).

Issue 9, failure 2 (real recompiles from step 0 called "expected warm-up"; an eager op blamed instead).
"""
import jax
import jax.numpy as jnp
import numpy as np


def init_params(key, d_in=16, hidden=32):
    k1, k2 = jax.random.split(key)
    return {"w1": jax.random.normal(k1, (d_in, hidden)) * 0.1, "b1": jnp.zeros(hidden),
            "w2": jax.random.normal(k2, (hidden, 1)) * 0.1, "b2": jnp.zeros(1)}


def loss_fn(params, x, y):
    h = jax.nn.relu(x @ params["w1"] + params["b1"])
    return jnp.mean((h @ params["w2"] + params["b2"] - y) ** 2)


@jax.jit
def train_step(params, x, y, lr):
    loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
    return jax.tree_util.tree_map(lambda p, g: p - lr * g, params, grads), loss


def token_budget_batches(rng, steps, budget=256):
    for _ in range(steps):
        seq_len = int(rng.integers(16, 64))
        n = budget // seq_len
        yield rng.standard_normal((n, 16)).astype(np.float32), rng.standard_normal((n, 1)).astype(np.float32)


def main(steps=10):
    rng = np.random.default_rng(0)
    params = init_params(jax.random.PRNGKey(0))
    for step, (x, y) in enumerate(token_budget_batches(rng, steps)):
        x, y = jax.device_put(x), jax.device_put(y)
        params, loss = train_step(params, x, y, 0.05)  # PLANTED: recompilation
    print("final loss", float(loss))


if __name__ == "__main__":
    main()
