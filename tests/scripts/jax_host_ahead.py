"""A device-bound JAX loop the host runs ahead of: large matmuls fed a NumPy batch each step, the loss printed
every N steps (the only reads), as public training scripts log. `wait` (argv[1]): the same loop waiting for every
step's loss (the truth of its step time). The script times its own steady steps (from the first print on: a
whole number of print periods) and writes {"ms_per_step", "steps"} to argv[2]."""
import json
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

mode, out = sys.argv[1], sys.argv[2]
every, steps, n = 10, 40, 384


def loss_fn(w, x):
    for _ in range(6):
        x = jnp.tanh(x @ w)
    return jnp.mean(x ** 2)


@jax.jit
def train_step(w, x):
    loss, g = jax.value_and_grad(loss_fn)(w, x)
    return w - 1e-3 * g, loss


rng = np.random.default_rng(0)
w = jnp.eye(n) * 0.9 + 0.01
start = None
for step in range(steps + 1):
    batch = rng.standard_normal((n, n), dtype=np.float32)  # the host's next batch
    w, loss = train_step(w, batch)
    if mode == "wait":
        loss.block_until_ready()
    if step % every == 0:
        print(f"step {step} loss {float(loss):.5f}")
        if start is None:
            start = time.perf_counter()
elapsed = time.perf_counter() - start
with open(out, "w") as f:
    json.dump({"ms_per_step": elapsed / steps * 1e3, "steps": steps}, f)
