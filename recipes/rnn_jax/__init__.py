"""Flax NNX RNN on synthetic sequences: the host-to-device case study.

`variant=initial` keeps the model state and the batches in host memory (NumPy), as the studied loop did: every
jitted step copies all of them to the device, and the updated state is pulled back to the host.
`variant=fixed` puts state and batches on the device once, before the loop; the loss is read once, after it.
Define jitted functions inside `run()`: the session wraps `jax.jit` only after it starts.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx


class SeqModel(nnx.Module):
    def __init__(self, features: int, hidden: int, rngs: nnx.Rngs):
        self.hidden = hidden
        self.rnn = nnx.RNN(nnx.SimpleCell(features, hidden, rngs=rngs))
        self.head = nnx.Linear(hidden, 1, rngs=rngs)

    def __call__(self, x):
        h = self.rnn(x, initial_carry=jnp.zeros((x.shape[0], self.hidden), x.dtype))
        return self.head(h[:, -1])[:, 0]


def make_data(cfg, rng: np.random.Generator):
    n = cfg.batch_size * cfg.num_batches
    x = rng.standard_normal((n, cfg.seq_len, cfg.features)).astype(np.float32)
    y = x[:, :, 0].mean(axis=1).astype(np.float32)  # target: the running mean of feature 0
    return [(x[i:i + cfg.batch_size], y[i:i + cfg.batch_size]) for i in range(0, n, cfg.batch_size)]


def run(cfg, session) -> dict:
    if cfg.variant not in ("initial", "fixed"):
        raise ValueError(f"recipe.variant must be initial or fixed, not {cfg.variant!r}")
    model = SeqModel(cfg.features, cfg.hidden, nnx.Rngs(cfg.get("seed", 0)))
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    lr = float(cfg.lr)

    def train_step(params, x, y):
        def loss_fn(p):
            return jnp.mean((nnx.merge(graphdef, p, rest)(x) - y) ** 2)
        loss, grads = jax.value_and_grad(loss_fn)(params)
        return jax.tree.map(lambda p, g: p - lr * g, params, grads), loss
    # recipe.donate (variant fixed): the step writes the new parameters into the old ones' buffers
    donate = (0,) if cfg.variant == "fixed" and cfg.get("donate", True) else ()
    train_step = jax.jit(train_step, donate_argnums=donate)

    batches = make_data(cfg, np.random.default_rng(cfg.get("seed", 0)))
    if cfg.variant == "initial":
        params = jax.tree.map(np.asarray, params)  # the model state lives in host memory
    else:
        params = jax.device_put(params)
        batches = jax.device_put(batches)  # explicit, once, before the loop: not a finding
    batch_bytes = sum(a.nbytes for a in batches[0])
    state_bytes = sum(np.dtype(a.dtype).itemsize * int(np.prod(a.shape)) for a in jax.tree.leaves(params))
    session.set_step_info(samples=cfg.batch_size, phase="train")
    loss = None
    for step in range(cfg.steps):
        with jax.profiler.StepTraceAnnotation("train", step_num=step):
            x, y = batches[step % len(batches)]
            params, loss = train_step(params, x, y)
            if cfg.variant == "initial":
                params = jax.tree.map(np.asarray, params)  # back to the host, as the studied loop did
            elif cfg.get("block_each_step", True):
                # JAX dispatches asynchronously: without this, step time is dispatch time. A wait, not a copy.
                jax.block_until_ready(loss)
    final = float(loss)  # one read after the loop: not a finding
    return {"model": "nnx.RNN(SimpleCell)", "variant": cfg.variant, "final_loss": final,
            "batch_size": cfg.batch_size, "seq_len": cfg.seq_len, "parameters": int(
                sum(int(np.prod(a.shape)) for a in jax.tree.leaves(params))),
            "batch_bytes": int(batch_bytes), "state_bytes": int(state_bytes),
            **throughput(session, batch_bytes)}


def throughput(session, batch_bytes: int) -> dict:
    """Compile time of the first steps apart from the steady step time; us/sample and MB/s of input data."""
    from ptxla_perf.model import summary_keys as K
    analysis = session.analysis()
    steady = analysis.steady
    first = [{"step": s.index, "wall_time_s": round(s.wall_time_s, 4), "compile_time_s": round(s.compile_time_s, 4),
              "compiles": s.compiles} for s in analysis.train[:max(analysis.warmup, 1)]]
    out: dict = {"first_steps": first}
    if steady:
        summary = analysis.figures.summary().to_json()  # the report's own figures (figures.py), not a second derivation
        st, tp = summary[K.STEP_TIME], summary[K.THROUGHPUT]
        out.update(steady_step_time_ms=round(st["p50"] * 1e3, 4),
                   us_per_sample=round(tp["us_per_sample"], 3) if "us_per_sample" in tp else None,
                   mb_per_s=round(batch_bytes / st["mean"] / 1e6, 3) if st["mean"] else None,
                   host_to_device_bytes_per_step=int(sum(s.host_to_device.bytes or 0 for s in steady)
                                                     / len(steady)))
    return out
