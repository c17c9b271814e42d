"""A JAX loop run in a thread of the program's own (`thread`, the default) or in the main thread (`main`), with a
heavy pure-Python block every step: host-bound either way."""
import sys
import threading

import jax
import jax.numpy as jnp
import numpy as np


@jax.jit
def train_step(w, x):
    loss, g = jax.value_and_grad(lambda w: jnp.mean((x @ w) ** 2))(w)
    return w - 0.01 * g, loss


def bookkeeping(step: int) -> int:
    return sum((i * step) % 7 for i in range(300_000))  # PLANTED: host_bound


def train():
    w = jnp.eye(16)
    x = np.ones((8, 16), np.float32)
    checks = 0
    for step in range(30):  # steady steps enough for the sampler to land in the planted block
        w, loss = train_step(w, x)
        checks += bookkeeping(step)
    print("loss", round(float(loss), 4), checks >= 0)


if __name__ == "__main__":
    if (sys.argv[1] if len(sys.argv) > 1 else "thread") == "thread":
        t = threading.Thread(target=train, name="trainer")
        t.start()
        t.join()
    else:
        train()
    print("done")
