"""The roofline worked example, at CPU scale: one big matmul per step, or a mock transformer layer's FFW block.

"TPU Profiling: When Math Meets Reality": x[32,1024,8192] @ W[8192,32768] is 2*B*T*D*F = 17.59 TFLOPs, 89.3 ms
at v5e's 197 TFLOP/s; the trace said 94.1 ms (~95% MFU). Here the same arithmetic runs at a size a CPU steps through
in milliseconds, and the report's `roofline` section does the division: FLOPs per step from XLA's own cost
analysis (checked against the analytic count printed here), achieved TFLOP/s, MFU, predicted vs observed.
"""
from __future__ import annotations


def analytic_flops(cfg) -> float:
    """Matmul FLOPs per step: 2*B*T*D*F for the projection; the trained FFW block runs it 5 times (forward: x@W1,
    h@W2; backward: dH, dW2, dW1 - x needs no gradient)."""
    one = 2.0 * cfg.batch * cfg.seq * cfg.d_model * cfg.d_ff
    return one * (5 if cfg.mode == "ffw" else 1)


def run(cfg, session) -> dict:
    if cfg.mode not in ("matmul", "ffw"):
        raise SystemExit(f"ptxla_perf: error: recipe.mode must be matmul or ffw, not {cfg.mode!r}")
    flops = analytic_flops(cfg)
    session.say(f"matmul recipe ({cfg.mode}, {cfg.get('backend', 'torch_xla')}): x[{cfg.batch},{cfg.seq},"
                f"{cfg.d_model}] @ W[{cfg.d_model},{cfg.d_ff}]; analytic matmul FLOPs per step "
                f"{flops:.4g} ({'10' if cfg.mode == 'ffw' else '2'}*B*T*D*F)")
    session.set_step_info(samples=cfg.batch, tokens=cfg.batch * cfg.seq, phase="train")
    if cfg.get("backend", "torch_xla") == "jax":
        _run_jax(cfg)
    else:
        _run_torch_xla(cfg)
    return {"model": f"matmul/{cfg.mode}", "analytic_flops_per_step": flops, "batch_size": cfg.batch,
            "shape": {"B": cfg.batch, "T": cfg.seq, "D": cfg.d_model, "F": cfg.d_ff}, "dtype": cfg.dtype}


def _run_torch_xla(cfg) -> None:
    import torch
    import torch_xla
    import torch_xla.core.xla_model as xm
    dev = torch_xla.device()
    dtype = getattr(torch, cfg.dtype)
    torch.manual_seed(0)
    x = torch.randn(cfg.batch, cfg.seq, cfg.d_model, dtype=dtype).to(dev)
    w1 = torch.randn(cfg.d_model, cfg.d_ff, dtype=dtype).mul_(cfg.d_model ** -0.5).to(dev).requires_grad_(cfg.mode == "ffw")
    wait = xm.wait_device_ops if cfg.get("wait_each_step", True) else (lambda: None)
    if cfg.mode == "matmul":
        for _ in range(cfg.steps):
            y = x @ w1
            torch_xla.sync()  # one step: the matmul's graph is launched here...
            wait()  # ...and runs asynchronously: steps that do not depend on each other would time only dispatch
        return
    w2 = torch.randn(cfg.d_ff, cfg.d_model, dtype=dtype).mul_(cfg.d_ff ** -0.5).to(dev).requires_grad_()
    opt = torch.optim.SGD([w1, w2], lr=1e-3)
    for _ in range(cfg.steps):
        y = torch.nn.functional.gelu(x @ w1) @ w2
        loss = y.float().pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        torch_xla.sync()
        wait()


def _run_jax(cfg) -> None:
    import jax
    import jax.numpy as jnp
    dtype = getattr(jnp, cfg.dtype)
    k1, k2, k3 = jax.random.split(jax.random.PRNGKey(0), 3)
    x = jax.random.normal(k1, (cfg.batch, cfg.seq, cfg.d_model), dtype)
    w1 = jax.random.normal(k2, (cfg.d_model, cfg.d_ff), dtype) * cfg.d_model ** -0.5
    wait = jax.block_until_ready if cfg.get("wait_each_step", True) else (lambda v: v)
    if cfg.mode == "matmul":
        step = jax.jit(lambda x, w: x @ w)
        for _ in range(cfg.steps):
            wait(step(x, w1))  # each step waits: wall time is device time, not dispatch
        return
    w2 = jax.random.normal(k3, (cfg.d_ff, cfg.d_model), dtype) * cfg.d_ff ** -0.5

    def loss(params, x):
        a, b = params
        return jnp.mean(jnp.square((jax.nn.gelu(x @ a) @ b).astype(jnp.float32)))

    @jax.jit
    def train_step(params, x):
        grads = jax.grad(loss)(params, x)
        return tuple(p - 1e-3 * g for p, g in zip(params, grads))
    params = (w1, w2)
    for _ in range(cfg.steps):
        params = wait(train_step(params, x))
