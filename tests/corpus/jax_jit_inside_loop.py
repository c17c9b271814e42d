"""A least-squares regression trained with optax where the gradient function is jitted inside the loop
(`jax.jit(jax.value_and_grad(loss_fn))(...)` on every step): each `jax.jit` call makes a new jitted object,
and JAX caches compiled code per object, so every step traces and compiles again.
Planted mistake: the jit inside the loop (jit once, before it).
"""
import jax
import jax.numpy as jnp
import numpy as np
import optax


def predict(params, x):
    return x @ params["w"] + params["b"]


def loss_fn(params, x, y):
    return jnp.mean((predict(params, x) - y) ** 2)


def batches(rng, n, batch_size, w_true):
    for _ in range(n):
        x = rng.standard_normal((batch_size, 6)).astype(np.float32)
        yield jax.device_put(x), jax.device_put(x @ w_true + 0.1)


def main(steps=8, batch_size=32):
    rng = np.random.default_rng(0)
    w_true = rng.standard_normal((6, 1)).astype(np.float32)
    params = {"w": jnp.zeros((6, 1)), "b": jnp.zeros((1,))}
    tx = optax.adam(5e-2)
    opt_state = tx.init(params)
    for i, (x, y) in enumerate(batches(rng, steps, batch_size, w_true)):
        loss, grads = jax.jit(jax.value_and_grad(loss_fn))(params, x, y)  # PLANTED: recompilation
        updates, opt_state = tx.update(grads, opt_state)
        params = optax.apply_updates(params, updates)
        if i % 4 == 0:
            print(f"step {i} loss {float(loss):.4f}")


if __name__ == "__main__":
    main()
