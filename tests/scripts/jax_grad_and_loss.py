"""Least squares with two jitted functions of one loss: `jax.jit(jax.grad(loss_fn))` for the update and
`jax.jit(loss_fn)` to log the loss every 4 steps. They share the user's code but are different functions: each
compiles once, neither is a recompile of the other. Clean."""
import jax
import jax.numpy as jnp
import numpy as np


def loss_fn(w, x, y):
    return jnp.mean((x @ w - y) ** 2)


grad_fn = jax.jit(jax.grad(loss_fn))
eval_loss = jax.jit(loss_fn)


def main(steps=12):
    rng = np.random.default_rng(0)
    x = jax.device_put(rng.normal(size=(32, 4)).astype(np.float32))
    y = jax.device_put(rng.normal(size=(32, 1)).astype(np.float32))
    w = jnp.zeros((4, 1))
    for i in range(steps):
        w = w - 0.1 * grad_fn(w, x, y)
        if i % 4 == 3:
            print(i, round(float(eval_loss(w, x, y)), 4))


if __name__ == "__main__":
    main()
