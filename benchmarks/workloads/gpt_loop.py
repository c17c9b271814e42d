"""Benchmark workload: a nanoGPT-style training loop written the way public JAX scripts are (benchmarks/device_check.py).

Pure JAX + optax: a decoder-only transformer as a dict of arrays, random token batches made with numpy on the
host every step, one jitted `train_step(params, opt_state, x, y)`, the loss printed every `--print-every` steps.
The host runs ahead of the device between prints (asynchronous dispatch), as in a user's loop; `--sync` waits
for every step (`jax.block_until_ready`), the device's own pace: the truth the profiled run is compared with.

The script times itself on one clock whatever wraps it (plain, `ptxla_perf profile`): the wall time from the
second print to the last (both are reads, so the device has caught up at each), per step. When the environment
variable BENCH_JSON names a file, that figure goes there as JSON with the model's parameter count and how many of
those steps' jitted calls missed JAX's C++ dispatch cache (`count_pjit_cpp_cache_miss`: the Python path).
"""
import argparse
import json
import os
import time
from contextlib import nullcontext

import jax
import jax.numpy as jnp
import numpy as np
import optax

try:  # JAX's own counter of calls that left the C++ fast path (the benchmark's instrument, not the user's)
    from jax._src.test_util import count_pjit_cpp_cache_miss
except Exception:  # noqa: BLE001 - absent or moved in this JAX version: no count
    count_pjit_cpp_cache_miss = None

p = argparse.ArgumentParser()
p.add_argument("--layers", type=int, default=2)
p.add_argument("--d-model", type=int, default=64)
p.add_argument("--heads", type=int, default=4)
p.add_argument("--seq", type=int, default=32)
p.add_argument("--batch", type=int, default=8)
p.add_argument("--vocab", type=int, default=256)
p.add_argument("--dtype", default="float32", help="compute dtype (parameters stay float32)")
p.add_argument("--steps", type=int, default=151)
p.add_argument("--print-every", type=int, default=50)
p.add_argument("--sync", action="store_true", help="wait for every step")
args = p.parse_args()
compute_dtype = jnp.dtype(args.dtype)


def init_params(rng):
    """GPT-2's initialisation, drawn with NumPy on the host (a jitted jax.random init costs seconds of CPU compile)."""
    d, v = args.d_model, args.vocab

    def normal(*shape, std=0.02):
        return (rng.standard_normal(shape) * std).astype(np.float32)

    def dense(n_in, n_out):
        return {"w": normal(n_in, n_out), "b": np.zeros((n_out,), np.float32)}

    def norm():
        return {"g": np.ones((d,), np.float32), "b": np.zeros((d,), np.float32)}

    blocks = [{"ln1": norm(), "attn": dense(d, 3 * d), "proj": dense(d, d),
               "ln2": norm(), "fc": dense(d, 4 * d), "out": dense(4 * d, d)} for _ in range(args.layers)]
    return {"wte": normal(v, d), "wpe": normal(args.seq, d, std=0.01), "blocks": blocks, "ln_f": norm(),
            "head": dense(d, v)}


def layer_norm(p, x):
    x = x.astype(jnp.float32)
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return ((x - mean) * jax.lax.rsqrt(var + 1e-5) * p["g"] + p["b"]).astype(compute_dtype)


def linear(p, x):
    return x @ p["w"].astype(compute_dtype) + p["b"].astype(compute_dtype)


def attention(p, x):
    b, t, d = x.shape
    h = args.heads
    q, k, v = jnp.split(linear(p["attn"], x), 3, axis=-1)
    q, k, v = (a.reshape(b, t, h, d // h).transpose(0, 2, 1, 3) for a in (q, k, v))
    att = (q @ k.transpose(0, 1, 3, 2)) * (d // h) ** -0.5
    mask = jnp.tril(jnp.ones((t, t), bool))
    att = jax.nn.softmax(jnp.where(mask, att.astype(jnp.float32), -1e9), axis=-1).astype(compute_dtype)
    y = (att @ v).transpose(0, 2, 1, 3).reshape(b, t, d)
    return linear(p["proj"], y)


def forward(params, idx):
    x = (params["wte"][idx] + params["wpe"][: idx.shape[1]]).astype(compute_dtype)
    for blk in params["blocks"]:
        x = x + attention(blk, layer_norm(blk["ln1"], x))
        x = x + linear(blk["out"], jax.nn.gelu(linear(blk["fc"], layer_norm(blk["ln2"], x))))
    return linear(params["head"], layer_norm(params["ln_f"], x)).astype(jnp.float32)


def loss_fn(params, x, y):
    logits = forward(params, x)
    return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()


optimizer = optax.adamw(3e-4, weight_decay=0.1)


@jax.jit
def train_step(params, opt_state, x, y):
    loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
    updates, opt_state = optimizer.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss


def get_batch(rng):
    data = rng.integers(0, args.vocab, size=(args.batch, args.seq + 1), dtype=np.int32)
    return data[:, :-1], data[:, 1:]


rng = np.random.default_rng(0)
params = jax.device_put(init_params(rng))
opt_state = jax.jit(optimizer.init)(params)
n_params = sum(a.size for a in jax.tree_util.tree_leaves(params))
print(f"parameters: {n_params / 1e6:.2f}M")
bench = os.environ.get("BENCH_JSON")
counting = count_pjit_cpp_cache_miss() if bench and count_pjit_cpp_cache_miss else nullcontext(lambda: None)
printed = []  # (step, wall clock, C++ cache misses so far) after each print: the device has caught up there
with counting as misses:
    for step in range(args.steps):
        x, y = get_batch(rng)
        params, opt_state, loss = train_step(params, opt_state, x, y)
        if args.sync:
            jax.block_until_ready((params, opt_state, loss))
        if step % args.print_every == 0 or step == args.steps - 1:
            print(f"step {step}: loss {float(loss):.4f}")
            printed.append((step, time.perf_counter(), misses()))

if bench:
    (s0, t0, m0), (s1, t1, m1) = printed[1] if len(printed) > 2 else printed[0], printed[-1]
    with open(bench, "w") as f:
        json.dump({"ms_per_step": (t1 - t0) * 1e3 / max(s1 - s0, 1), "timed_steps": s1 - s0,
                   "cpp_cache_misses": None if m1 is None else m1 - m0, "params": int(n_params),
                   "tokens_per_step": args.batch * args.seq, "sync": args.sync}, f)
