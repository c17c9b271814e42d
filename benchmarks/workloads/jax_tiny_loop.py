"""A tiny jitted JAX training step, argv[1] times (benchmarks/long_run.py): as many steps per second as this
machine gives, with a host read every 100 steps (a logging line) and no other host work. Prints the wall clock at
the loop's end, so the benchmark can time what comes after it (the profiler's finish)."""
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np


@jax.jit
def step(w, x):
    loss, g = jax.value_and_grad(lambda w: jnp.mean(jnp.tanh(x @ w) ** 2))(w)
    return w - 0.01 * g, loss


n = int(sys.argv[1])
rng = np.random.default_rng(0)
w = jax.device_put(rng.standard_normal((16, 4)).astype(np.float32))
x = jax.device_put(rng.standard_normal((8, 16)).astype(np.float32))
for i in range(n):
    w, loss = step(w, x)
    if i % 100 == 0:
        loss = float(loss)
jax.block_until_ready(w)
print("LOOP_END", time.time(), flush=True)
