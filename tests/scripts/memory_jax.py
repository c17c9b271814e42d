"""A JAX loop that threads its parameters through a jitted step. argv[1]: donate | nodonate (donate_argnums=0 or
nothing donated); argv[2]: keep (every step's loss array kept in a list: memory grows) | item (a Python float
kept instead) | none. The loss has a (512, 512) intermediate at the line marked BIG (1 MiB, float32: the
program's largest buffers). Prints XLA's own memory analysis of the step's program after the loop (EXPECTED ...)."""
import json
import sys

import jax
import jax.numpy as jnp
import numpy as np

DONATE = sys.argv[1] == "donate"
KEEP = sys.argv[2] if len(sys.argv) > 2 else "none"


def loss_fn(params, x, y):
    h = jnp.tanh(x @ params["w1"])
    a = x.reshape(512, 4)  # the batch's features, as 512 tokens of 4
    mixed = jax.nn.softmax(a @ a.T, axis=-1) @ a  # BIG: a (512, 512) score matrix, the program's largest temporary
    return jnp.mean((h @ params["w2"] - y) ** 2) + 1e-3 * jnp.mean(mixed ** 2)


def train_step(params, x, y):
    loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
    return jax.tree_util.tree_map(lambda p, g: p - 0.01 * g, params, grads), loss


step = jax.jit(train_step, donate_argnums=(0,) if DONATE else ())
rng = np.random.default_rng(0)
params = jax.device_put({"w1": rng.standard_normal((64, 128)).astype(np.float32) * 0.1,
                         "w2": rng.standard_normal((128, 8)).astype(np.float32) * 0.1})
x = jax.device_put(rng.standard_normal((32, 64)).astype(np.float32))
y = jax.device_put(np.zeros((32, 8), np.float32))
losses = []
# growth needs 4 live-array samples after warm-up, and the sampler spaces them by their cost (at most every 64
# steps on a loaded machine): a kept loss runs long enough for that
for i in range(300 if KEEP == "keep" else 28):
    params, loss = step(params, x, y)
    if KEEP == "keep":
        losses.append(loss)  # PLANTED: every step's loss array stays on the device
    elif KEEP == "item":
        losses.append(float(loss))
print("final loss", float(loss))
m = step.lower(params, x, y).compile().memory_analysis()
print("EXPECTED " + json.dumps({"argument_bytes": m.argument_size_in_bytes, "output_bytes": m.output_size_in_bytes,
                                "alias_bytes": m.alias_size_in_bytes, "temp_bytes": m.temp_size_in_bytes}))
