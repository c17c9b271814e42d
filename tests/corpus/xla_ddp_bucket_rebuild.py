"""DistributedDataParallel with the `xla` process-group backend (one process on the CPU), gradient_as_bucket_view.
Clean. DDP's reducer rebuilds its buckets after the first iterations, which compiles one more graph a couple of
iterations in and never again: a one-off, not a recompilation problem.

Issue 9, failure 2 (a one-off compile after a compile-free step reported as a recompilation warning).
"""
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.distributed.xla_backend  # noqa: F401  registers the "xla" backend
from torch.nn.parallel import DistributedDataParallel as DDP


class MLP(nn.Module):
    def __init__(self, d_in=32, hidden=64, d_out=8):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d_in, hidden), nn.GELU(), nn.Linear(hidden, hidden), nn.GELU(),
                                 nn.Linear(hidden, d_out))

    def forward(self, x):
        return self.net(x)


def main(epochs=1, steps_per_epoch=12, batch_size=16):
    dist.init_process_group("xla", init_method="xla://")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch_xla.device()
    torch.manual_seed(42)
    model = MLP().to(device)
    ddp_model = DDP(model, gradient_as_bucket_view=True)
    optimizer = torch.optim.AdamW(ddp_model.parameters(), lr=1e-3)
    loss_fn = nn.MSELoss()
    # each rank sees its own shard of a synthetic regression set
    g = torch.Generator().manual_seed(rank)
    xs = torch.randn(steps_per_epoch * batch_size, 32, generator=g)
    ys = torch.randn(steps_per_epoch * batch_size, 8, generator=g)
    for epoch in range(epochs):
        ddp_model.train()
        for i in range(steps_per_epoch):
            x = xs[i * batch_size:(i + 1) * batch_size].to(device)
            y = ys[i * batch_size:(i + 1) * batch_size].to(device)
            optimizer.zero_grad()
            loss = loss_fn(ddp_model(x), y)
            loss.backward()
            optimizer.step()
            torch_xla.sync()
        if rank == 0:
            print(f"epoch {epoch} world {world} loss {loss.item():.4f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
