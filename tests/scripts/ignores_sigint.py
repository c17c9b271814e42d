"""A JAX loop that runs until told to stop: writes argv[1] at its fourth step, ends once argv[2] exists. For a
program started with SIGINT ignored (nohup, a background job): a Ctrl-C is ignored, profiled or not."""
import pathlib
import sys
import time

import jax
import jax.numpy as jnp

ready, done = map(pathlib.Path, sys.argv[1:3])
step_fn = jax.jit(lambda w: jnp.tanh(w @ w))
w = jnp.ones((8, 8))
step = 0
for step in range(3000):
    w = step_fn(w)
    value = float(w[0, 0])
    if step == 3:
        ready.write_text("x")
    if step > 3 and done.exists():
        break
    time.sleep(0.01)
print(f"ended by itself after step {step}")
