"""A small vision transformer (Flax NNX), data-parallel over a `jax.sharding.Mesh` (8 CPU devices here):
the HLO-op-share case study. The batch is sharded over every mesh axis, parameters are replicated, so XLA adds an
all-reduce of the gradients to each step. With a capture window the report gives the share of executor time in
collectives (all-reduce) and the largest ops; a batch-size sweep shows the share fall as the fusions grow.

    XLA_FLAGS=--xla_force_host_platform_device_count=8 python -m ptxla_perf.run -m +recipe=vit_mesh \\
        recipe.batch_size=16,256 profiler.capture.start_step=3
"""
from __future__ import annotations

import os

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from ptxla_perf.trace.analyses import TopOp


class Block(nnx.Module):
    def __init__(self, dim: int, heads: int, rngs: nnx.Rngs):
        self.ln1 = nnx.LayerNorm(dim, rngs=rngs)
        self.attn = nnx.MultiHeadAttention(num_heads=heads, in_features=dim, decode=False, rngs=rngs)
        self.ln2 = nnx.LayerNorm(dim, rngs=rngs)
        self.fc1 = nnx.Linear(dim, 4 * dim, rngs=rngs)
        self.fc2 = nnx.Linear(4 * dim, dim, rngs=rngs)

    def __call__(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.fc2(jax.nn.gelu(self.fc1(self.ln2(x))))


class ViT(nnx.Module):
    def __init__(self, cfg, rngs: nnx.Rngs):
        self.patch = cfg.patch
        tokens = (cfg.image_size // cfg.patch) ** 2
        self.embed = nnx.Linear(cfg.patch * cfg.patch * cfg.channels, cfg.dim, rngs=rngs)
        self.pos = nnx.Param(jax.random.normal(rngs.params(), (1, tokens, cfg.dim)) * 0.02)
        self.blocks = nnx.List([Block(cfg.dim, cfg.heads, rngs) for _ in range(cfg.depth)]) \
            if hasattr(nnx, "List") else [Block(cfg.dim, cfg.heads, rngs) for _ in range(cfg.depth)]
        self.ln = nnx.LayerNorm(cfg.dim, rngs=rngs)
        self.head = nnx.Linear(cfg.dim, cfg.classes, rngs=rngs)

    def __call__(self, images):
        b, h, w, c = images.shape
        p = self.patch
        x = images.reshape(b, h // p, p, w // p, p, c).transpose(0, 1, 3, 2, 4, 5).reshape(b, -1, p * p * c)
        x = self.embed(x) + self.pos[...]
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.ln(x).mean(axis=1))


def make_mesh(cfg) -> Mesh:
    shape = tuple(int(s) for s in cfg.mesh_shape)
    names = tuple(cfg.mesh_axes)
    n = int(np.prod(shape))
    devices = jax.devices()
    if n > len(devices):
        raise ValueError(f"mesh {shape} needs {n} devices, JAX has {len(devices)} (on the CPU set "
                         "XLA_FLAGS=--xla_force_host_platform_device_count=8 before starting)")
    return Mesh(np.array(devices[:n]).reshape(shape), names)


def run(cfg, session) -> dict:
    mesh = make_mesh(cfg)
    n_dev = mesh.devices.size
    if cfg.batch_size % n_dev:
        raise ValueError(f"batch_size {cfg.batch_size} must be a multiple of the {n_dev} mesh devices")
    data_sharding = NamedSharding(mesh, P(tuple(cfg.mesh_axes)))
    replicated = NamedSharding(mesh, P())
    model = ViT(cfg, nnx.Rngs(cfg.get("seed", 0)))
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    params = jax.device_put(params, replicated)
    rest = jax.device_put(rest, replicated)
    lr = float(cfg.lr)

    @jax.jit
    def train_step(params, rest, images, labels):
        def loss_fn(p):
            logits = nnx.merge(graphdef, p, rest)(images)
            return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), labels[:, None], axis=1))
        loss, grads = jax.value_and_grad(loss_fn)(params)  # grads of a sharded batch: an all-reduce
        return jax.tree.map(lambda p, g: p - lr * g, params, grads), loss

    rng = np.random.default_rng(cfg.get("seed", 0))
    shape = (cfg.batch_size, cfg.image_size, cfg.image_size, cfg.channels)
    batches = [(jax.device_put(rng.standard_normal(shape).astype(np.float32), data_sharding),
                jax.device_put(rng.integers(0, cfg.classes, cfg.batch_size).astype(np.int32), data_sharding))
               for _ in range(cfg.num_batches)]
    if not session.has_capture and cfg.get("capture_start_step") is not None:  # the recipe's own window
        logdir = os.path.join(os.path.dirname(os.path.abspath(session.report_path or "report.json")),
                              "tensorboard")
        # the study reads the all-reduce share from it (extra); on the CPU its collective verdict is rendezvous
        # noise, so this window's analysis is not merged into the report as the runner's window is
        session.open_capture(logdir, int(cfg.capture_start_step), int(cfg.get("capture_num_steps", 3)),
                             analyze=False)
    session.set_step_info(samples=cfg.batch_size, phase="train")
    loss = None
    for step in range(cfg.steps):
        with jax.profiler.StepTraceAnnotation("train", step_num=step):
            images, labels = batches[step % len(batches)]
            params, loss = train_step(params, rest, images, labels)
            jax.block_until_ready(loss)  # a wait, not a copy: step time is compute time, not dispatch time
    final = float(loss)  # one read after the loop: not a finding
    extra = {"model": "vit", "parameters": int(sum(a.size for a in jax.tree.leaves(params))),
             "final_loss": final, "batch_size": cfg.batch_size, "mesh_shape": list(mesh.devices.shape),
             "mesh_axes": list(mesh.axis_names), "devices": n_dev}
    if session.has_capture:
        extra.update(trace_shares(session))
    return extra


def trace_shares(session) -> dict:
    """The all-reduce share and the largest ops of the session's capture (its one analysis, which is also the
    report's `trace` section)."""
    try:
        trace = session.capture_analysis()
    except Exception as exc:  # noqa: BLE001
        return {"trace_error": f"capture failed: {type(exc).__name__}: {exc}"[:300]}
    if trace is None:
        captures = session.profiler.get("captures") or [{}]
        return {"trace_error": captures[-1].get("error") or "the capture window was never reached "
                "(steps < start_step + num_steps?)"}
    coll = trace.collective_share
    ops: list[TopOp] = trace.top_ops
    all_reduce = [o for o in ops if "all-reduce" in o["name"]]
    fusions = [o for o in ops if "fusion" in o["name"] or o["category"] == "fusion"]
    return {"capture": trace.source.to_json(),
            "collective_share": coll.mean,
            "all_reduce_share": round(sum(o["share"] for o in all_reduce), 4) if all_reduce else coll.mean,
            "op_categories": trace.op_categories,
            "largest_fusions": [{"name": o["name"], "share": o["share"],
                                 "self_time_ms_per_device": o["self_time_ms_per_device"],
                                 "occurrences": o["occurrences"]} for o in fusions[:3]],
            "trace_step_time_ms": st.to_json() if (st := trace.step_summary.step_time_ms) else None}
