"""Synthetic MLP classifier on the XLA device: a plain training loop with StepTrace/Trace annotations."""
from __future__ import annotations

import torch
import torch_xla
import torch_xla.debug.profiler as xp


def run(cfg, session) -> dict:
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
    losses = []  # recipe.keep_losses: every step's loss tensor kept (each keeps its device buffer)
    for step in range(cfg.steps):
        with xp.StepTrace("train_step", step_num=step):  # its exit calls torch_xla.sync(): one step
            with xp.Trace("data"):
                i = (step % 4) * cfg.batch_size
                x = data[i:i + cfg.batch_size].to(dev)
                y = labels[i:i + cfg.batch_size].to(dev)
            with xp.Trace("forward"):
                loss = loss_fn(model(x), y)
            with xp.Trace("backward"):
                loss.backward()
            with xp.Trace("optimizer"):
                opt.step()
                opt.zero_grad()
            if cfg.get("keep_losses", False):
                losses.append(loss)
            if cfg.log_every and step % cfg.log_every == 0:
                print(f"step {step} loss {loss.item():.4f}")
    final = loss.item()  # one read after the loop: not a finding
    return {"model": "mlp", "parameters": sum(p.numel() for p in model.parameters()), "final_loss": final,
            "batch_size": cfg.batch_size}
