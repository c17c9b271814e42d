"""Synthetic MLP classifier on the XLA device, in each execution mode torch_xla teaches (`recipe.mode`,
docs/modes.md): `lazy` - a plain training loop with StepTrace/Trace annotations; `dynamo` - the model compiled with
`torch.compile(backend="openxla")`, backward and the optimizer step outside it; `eager` - eager mode with the
training step wrapped in `torch_xla.compile`; `spmd` - the same loop with the batch sharded over a mesh of every
device (data parallel; weights replicated)."""
from __future__ import annotations

import os

import torch
import torch_xla
import torch_xla.debug.profiler as xp

MODES = ("lazy", "dynamo", "eager", "spmd")


def run(cfg, session) -> dict:
    mode = cfg.get("mode", "lazy")
    if mode not in MODES:
        raise ValueError(f"recipe.mode={mode!r}: one of {', '.join(MODES)}")
    mesh = _spmd_mesh(cfg) if mode == "spmd" else None
    dev = torch_xla.device()
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(cfg.in_features, cfg.hidden), torch.nn.ReLU(),
        torch.nn.Linear(cfg.hidden, cfg.hidden), torch.nn.ReLU(),
        torch.nn.Linear(cfg.hidden, cfg.classes)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=cfg.lr, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    data = torch.randn(cfg.batch_size * 4, cfg.in_features)
    labels = torch.randint(0, cfg.classes, (cfg.batch_size * 4,))
    session.set_step_info(samples=cfg.batch_size, phase="train")

    def batch(step):
        i = (step % 4) * cfg.batch_size
        x, y = data[i:i + cfg.batch_size].to(dev), labels[i:i + cfg.batch_size].to(dev)
        if mesh is not None:
            import torch_xla.distributed.spmd as xs
            xs.mark_sharding(x, mesh, ("data", None))
        return x, y

    losses = []  # recipe.keep_losses: every step's loss tensor kept (each keeps its device buffer)

    def log(step, loss):
        if cfg.get("keep_losses", False):
            losses.append(loss)
        if cfg.log_every and step % cfg.log_every == 0:
            print(f"step {step} loss {loss.item():.4f}")

    if mode == "dynamo":
        compiled = torch.compile(model, backend="openxla")
        for step in range(cfg.steps):
            x, y = batch(step)
            opt.zero_grad()
            loss = loss_fn(compiled(x), y)
            loss.backward()
            opt.step()
            torch_xla.sync()  # one step
            log(step, loss)
    elif mode == "eager":
        torch_xla.experimental.eager_mode(True)

        def train_step(x, y):
            opt.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
            return loss
        compiled_step = torch_xla.compile(train_step)  # traced and compiled as one graph: one step per call
        try:
            for step in range(cfg.steps):
                x, y = batch(step)  # eager ops, outside the compiled step
                loss = compiled_step(x, y)
                log(step, loss)
        finally:
            torch_xla.experimental.eager_mode(False)
    else:  # lazy, spmd
        for step in range(cfg.steps):
            with xp.StepTrace("train_step", step_num=step):  # its exit calls torch_xla.sync(): one step
                with xp.Trace("data"):
                    x, y = batch(step)
                with xp.Trace("forward"):
                    loss = loss_fn(model(x), y)
                with xp.Trace("backward"):
                    loss.backward()
                with xp.Trace("optimizer"):
                    opt.step()
                    opt.zero_grad()
                log(step, loss)
    final = loss.item()  # one read after the loop: not a finding
    out = {"model": "mlp", "mode": mode, "parameters": sum(p.numel() for p in model.parameters()),
           "final_loss": final, "batch_size": cfg.batch_size}
    if mesh is not None:
        out["mesh_devices"] = len(mesh.device_ids)
    return out


def _spmd_mesh(cfg):
    """SPMD over every device: on the CPU, `spmd_devices` PJRT CPU devices (set before the runtime starts)."""
    import numpy as np
    import torch_xla.distributed.spmd as xs
    import torch_xla.runtime as xr
    if os.environ.get("PJRT_DEVICE", "CPU") == "CPU" and not torch_xla._XLAC._xla_runtime_is_initialized():
        os.environ.setdefault("CPU_NUM_DEVICES", str(int(cfg.get("spmd_devices", 4))))
    xr.use_spmd()
    n = xr.global_runtime_device_count()
    if cfg.batch_size % n:
        raise ValueError(f"recipe.batch_size={cfg.batch_size} must be a multiple of the {n} SPMD devices")
    return xs.Mesh(np.arange(n), (n, 1), ("data", "model"))
