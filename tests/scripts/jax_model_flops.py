"""A small transformer-style block (attention + MLP) trained under `ptxla_perf.profile()` in-process; the loop
tells the session its model FLOPs per step, 6 x parameters x tokens, through `set_step_info(model_flops=...)`.
argv[1]: where to write the report. Prints MODEL_FLOPS <the figure given>."""
import sys

import jax
import jax.numpy as jnp
import numpy as np

import ptxla_perf

D, T, B = 32, 16, 4  # width, sequence length, batch


def init(rng):
    def w(*shape):
        return jnp.asarray(rng.standard_normal(shape).astype(np.float32) / np.sqrt(shape[0]))
    return {"qkv": w(D, 3 * D), "out": w(D, D), "up": w(D, 4 * D), "down": w(4 * D, D)}


def block(p, x):
    q, k, v = jnp.split(x @ p["qkv"], 3, axis=-1)
    att = jax.nn.softmax(q @ k.transpose(0, 2, 1) / np.sqrt(D), axis=-1)
    x = x + (att @ v) @ p["out"]
    return x + jax.nn.gelu(x @ p["up"]) @ p["down"]


@jax.jit
def train_step(p, x):
    loss, g = jax.value_and_grad(lambda p: jnp.mean((block(p, x) - x) ** 2))(p)
    return jax.tree_util.tree_map(lambda a, b: a - 1e-3 * b, p, g), loss


rng = np.random.default_rng(0)
params = init(rng)
x = jnp.asarray(rng.standard_normal((B, T, D)).astype(np.float32))
n_params = sum(a.size for a in jax.tree_util.tree_leaves(params))
model_flops = 6 * n_params * B * T
with ptxla_perf.profile("jax", report_path=sys.argv[1], display=False) as prof:
    prof.session.set_step_info(samples=B, tokens=B * T, model_flops=model_flops)
    for step in range(20):
        params, loss = train_step(params, x)
        loss.block_until_ready()
print("MODEL_FLOPS", model_flops)
