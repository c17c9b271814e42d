"""A JAX training loop whose step is heavy device work (matmuls over 512x512 arrays), dispatched asynchronously.
`wait`: each step waits for its loss (jax.block_until_ready); `donate`: the state is donated to the next call
and the loop reads nothing until the end; `donate_state`: the same, the step returning only the donated state (the
output the profiler's thread watches is the one the next call donates)."""
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


def state_step(w, x):
    return train_step(w, x)[0]


step = jax.jit(state_step if mode == "donate_state" else train_step,
               donate_argnums=(0,) if mode.startswith("donate") else ())
w = jnp.eye(512) * 0.9 + 0.01
x = jnp.linspace(-1.0, 1.0, 512 * 512).reshape(512, 512)
loss = None
for i in range(40):
    if mode == "donate_state":
        w = step(w, x)
    else:
        w, loss = step(w, x)
    if mode == "wait":
        jax.block_until_ready(loss)
print("done", repr(float(loss)) if loss is not None else "-", repr(float(jnp.sum(w))))
