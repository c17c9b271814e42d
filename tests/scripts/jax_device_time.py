"""A JAX training loop whose step is heavy device work (matmuls over 512x512 arrays), dispatched asynchronously.
`wait`: each step waits for its loss (jax.block_until_ready); `donate`: the state is donated to the next call
and the loop reads nothing until the end (the sampled steps' outputs are watched while they are donated)."""
import sys
import warnings

import jax
import jax.numpy as jnp

warnings.simplefilter("always")  # a "Some donated buffers were not usable" warning would show in stderr
mode = sys.argv[1] if len(sys.argv) > 1 else "wait"


def loss_fn(w, x):
    for _ in range(4):
        x = jnp.tanh(x @ w)
    return jnp.mean(x ** 2)


def train_step(w, x):
    loss, g = jax.value_and_grad(loss_fn)(w, x)
    return w - 1e-2 * g, loss


step = jax.jit(train_step, donate_argnums=(0,) if mode == "donate" else ())
w = jnp.eye(512) * 0.9 + 0.01
x = jnp.linspace(-1.0, 1.0, 512 * 512).reshape(512, 512)
for i in range(40):
    w, loss = step(w, x)
    if mode == "wait":
        jax.block_until_ready(loss)
print("done", repr(float(loss)), repr(float(jnp.sum(w))))
