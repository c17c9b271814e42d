"""Benchmark workload (benchmarks/overhead.py): a jitted JAX training step fed a fresh numpy batch every call.

    python jax_step.py small|large|small-device [STEPS]

`small`: a 20-layer MLP (40 parameter leaves, width 64, batch 32): ~0.2 ms per call, launch-bound - what JAX's
dispatch path costs shows here. `large`: two large matmuls and their gradients (batch 128, 512 -> 2048 -> 512,
1.6 GFLOP per call): device-bound. `small-device`: the small step fed from a pool of 64 batches put on the device
before the loop (a prefetching input pipeline's way): nothing to upload in the step. Each a read (the loss) every
50 calls, as a logging line would.

The script times itself, the same way whatever wraps it: after 20 warm-up calls (the same loop) and a wait for
the device, the wall time of STEPS steady calls up to the device's end, per call, and how many of those calls missed JAX's C++
dispatch cache (`count_pjit_cpp_cache_miss`: a miss takes the Python path). Both go as JSON to the file the
environment variable BENCH_JSON names (`ptxla_perf profile` runs the script in its own process, so only the script
can count its own calls).
"""
import itertools
import json
import os
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
from jax._src.test_util import count_pjit_cpp_cache_miss

size = sys.argv[1] if len(sys.argv) > 1 else "small"
steps = int(sys.argv[2]) if len(sys.argv) > 2 else (30 if size == "large" else 300)
warmup = 20
rng = np.random.default_rng(0)
if size in ("small", "small-device"):
    widths, batch = [16] + [64] * 19 + [1], 32
else:
    widths, batch = [512, 2048, 512], 128
params = [{"w": jnp.asarray(rng.standard_normal((a, b)).astype(np.float32) / np.sqrt(a)),
           "b": jnp.zeros((b,), jnp.float32)} for a, b in zip(widths[:-1], widths[1:])]


def loss_fn(params, x, y):
    for layer in params[:-1]:
        x = jax.nn.relu(x @ layer["w"] + layer["b"])
    out = x @ params[-1]["w"] + params[-1]["b"]
    return jnp.mean((out - y) ** 2)


@jax.jit
def step(params, x, y):
    loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
    return jax.tree_util.tree_map(lambda p, g: p - 1e-3 * g, params, grads), loss


def host_batch():
    return (rng.standard_normal((batch, widths[0])).astype(np.float32),
            rng.standard_normal((batch, widths[-1])).astype(np.float32))


if size == "small-device":
    pool = [jax.device_put(host_batch()) for _ in range(64)]
    jax.block_until_ready(pool)
    batch_of = itertools.cycle(pool).__next__
else:
    batch_of = host_batch


with count_pjit_cpp_cache_miss() as misses:  # one loop, warm-up included: the loop that trains is the one timed
    for i in range(warmup + steps):
        if i == warmup:
            jax.block_until_ready(params)
            t0, missed0 = time.perf_counter(), misses()
        params, loss = step(params, *batch_of())
        if i % 50 == 0:
            print(f"call {i}: loss {float(loss):.4f}")
    jax.block_until_ready(params)
    elapsed, missed = time.perf_counter() - t0, misses() - missed0
print(f"{steps} calls, {elapsed * 1e3 / steps:.3f} ms per call, {missed} C++ cache misses")
if os.environ.get("BENCH_JSON"):
    with open(os.environ["BENCH_JSON"], "w") as f:
        json.dump({"ms_per_step": elapsed * 1e3 / steps, "steps": steps, "cpp_cache_misses": missed,
                   "leaves": len(jax.tree_util.tree_leaves(params))}, f)
