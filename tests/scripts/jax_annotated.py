"""A clean loop whose steps are marked with jax.profiler.StepTraceAnnotation, plus a python-list argument."""
import jax
import jax.numpy as jnp
import numpy as np


@jax.jit
def step(w, x, scale):
    loss, g = jax.value_and_grad(lambda w: jnp.mean(jnp.tanh(x @ w) ** 2))(w)
    return w - 0.1 * g * jnp.asarray(scale).sum(), loss


w = jax.device_put(np.eye(16, dtype=np.float32))
x = jax.device_put(np.ones((8, 16), np.float32))
for i in range(6):
    with jax.profiler.StepTraceAnnotation("train", step_num=i):
        w, loss = step(w, x, [0.5, 0.5])  # PLANTED: host_to_device_transfer (a Python list argument)
print(float(loss))
