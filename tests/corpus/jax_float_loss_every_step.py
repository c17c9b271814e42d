"""A JAX/optax loop that appends `float(loss)` to a Python list on every step for a loss curve: each float()
waits for the step to finish and copies the value to the host, so dispatch of the next step cannot run ahead.
Planted mistake: the per-step float() (stack the losses on the device, read them every N steps).
"""
import jax
import jax.numpy as jnp
import numpy as np
import optax


def model(params, x):
    return jax.nn.sigmoid(x @ params["w"] + params["b"])


def bce(params, x, y):
    p = jnp.clip(model(params, x), 1e-6, 1 - 1e-6)
    return -jnp.mean(y * jnp.log(p) + (1 - y) * jnp.log(1 - p))


optimizer = optax.chain(optax.clip_by_global_norm(1.0), optax.adam(1e-2))


@jax.jit
def step_fn(params, opt_state, x, y):
    loss, grads = jax.value_and_grad(bce)(params, x, y)
    updates, opt_state = optimizer.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss


def main(steps=16, batch_size=64):
    rng = np.random.default_rng(0)
    params = {"w": jnp.zeros((10, 1)), "b": jnp.zeros(1)}
    opt_state = optimizer.init(params)
    x_all = jax.device_put(rng.standard_normal((steps * batch_size, 10)).astype(np.float32))
    y_all = jax.device_put((rng.random((steps * batch_size, 1)) > 0.5).astype(np.float32))
    losses = []
    for i in range(steps):
        sl = slice(i * batch_size, (i + 1) * batch_size)
        params, opt_state, loss = step_fn(params, opt_state, x_all[sl], y_all[sl])
        losses.append(float(loss))  # PLANTED: device_to_host_sync
    print("loss curve", np.round(losses[::4], 3))


if __name__ == "__main__":
    main()
