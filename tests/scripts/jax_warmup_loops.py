"""The loop that trains is the loop that counts (issue 36): argv[1] picks what runs before (or beside) the main
training loop of 30 calls that reads the loss every 10 steps.
- warmup: 3 calls of train_step from another line, then the timed loop.
- warmup_fn: the warm-up in a helper function (its own line), then the timed loop.
- eval_first: argv[2] calls of eval_step (no gradients) over a validation set, then training.
- infer: no training: 3 warm-up calls of eval_step, then 30 from the timed loop (the steps of an inference loop).
- eval_static: the timed loop, with train_step(..., train=False) called from another line every 10 steps (the
  same jitted function; that program computes no gradients: evaluation, not steps).
- eval_grad_loop: the timed loop, with a loop of 3 calls of train_step over held-out data every 10 steps, its
  results dropped (a program that computes gradients, run over fixed parameters: evaluation, not steps)."""
import sys
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np


@partial(jax.jit, static_argnames=("train",))
def train_step(w, x, train=True):
    loss_fn = lambda w: jnp.mean(jnp.tanh(x @ w) ** 2)  # noqa: E731
    if not train:
        return w, loss_fn(w)
    loss, g = jax.value_and_grad(loss_fn)(w)
    return w - 0.01 * g, loss


@jax.jit
def eval_step(w, x):
    return jnp.mean(jnp.tanh(x @ w) ** 2)


def warm_up(w, x, n=3):
    for _ in range(n):
        w, _ = train_step(w, x, train=True)
    return jax.block_until_ready(w)


mode = sys.argv[1]
rng = np.random.default_rng(0)
w = jax.device_put(rng.standard_normal((16, 4)).astype(np.float32))
x = jax.device_put(rng.standard_normal((8, 16)).astype(np.float32))
if mode == "warmup":
    for _ in range(3):
        w, loss = train_step(w, x, train=True)  # WARMUP
    jax.block_until_ready(w)
elif mode == "warmup_fn":
    w = warm_up(w, x)
elif mode == "eval_first":
    total = 0.0
    for _ in range(int(sys.argv[2])):
        total += float(eval_step(w, x))  # EVAL
    print("validation loss", total)
elif mode == "infer":
    for _ in range(3):
        eval_step(w, x)  # WARMUP
    for i in range(30):
        val = eval_step(w, x + i)  # INFER
        if i % 10 == 0:
            print(i, float(val))
for i in range(30 if mode != "infer" else 0):
    w, loss = train_step(w, x, train=True)  # MAIN
    if i % 10 == 0:
        print(i, float(loss))
        if mode == "eval_static":
            _, val = train_step(w, x, train=False)  # EVAL
            print("val", float(val))
        elif mode == "eval_grad_loop":
            for _ in range(3):
                _, val = train_step(w, -x, train=True)  # EVAL
            print("val", float(val))
print("done")
