"""Data-parallel training with `jax.pmap` over the host's devices, each step marked with StepTraceAnnotation (the
pattern of the JAX/Flax ImageNet examples): 8 steps, each one pmapped call."""
import functools

import jax
import jax.numpy as jnp
import numpy as np


@functools.partial(jax.pmap, axis_name="batch")
def p_train_step(w, x, y):
    def loss_fn(w):
        return jnp.mean((x @ w - y) ** 2)
    loss, g = jax.value_and_grad(loss_fn)(w)
    g = jax.lax.pmean(g, "batch")
    return w - 0.1 * g, jax.lax.pmean(loss, "batch")


n = jax.local_device_count()
rng = np.random.default_rng(0)
w = jnp.zeros((n, 8, 1))  # one replica per device: pmap splits the leading axis
xs = jnp.asarray(rng.standard_normal((n, 4, 8)), jnp.float32)
ys = jnp.asarray(rng.standard_normal((n, 4, 1)), jnp.float32)
for step in range(8):
    with jax.profiler.StepTraceAnnotation("train", step_num=step):
        w, loss = p_train_step(w, xs, ys)
print("loss", round(float(loss[0]), 4))
