"""Tensor parallelism in the Megatron style with torch_xla SPMD: a column-parallel linear layer (its weight split
along the output features) feeding a row-parallel one (split along the input features), on a 2 x 2 mesh of
("data", "model"); batches come through MpDeviceLoader, sharded along "data"; 20 iterations, the loss printed every
8. On the CPU: CPU_NUM_DEVICES=4 PJRT CPU devices. `--plain`: the same loop on one device, nothing sharded (the
run the SPMD one is compared with)."""
import os
import sys

os.environ.setdefault("CPU_NUM_DEVICES", "4")
import numpy as np
import torch
import torch.nn as nn
import torch_xla
import torch_xla.distributed.parallel_loader as pl
import torch_xla.distributed.spmd as xs
import torch_xla.runtime as xr

PLAIN = "--plain" in sys.argv
if not PLAIN:
    xr.use_spmd()

STEPS, LOG_EVERY, BATCH, HIDDEN, FFN = 20, 8, 8, 16, 64


class ParallelMLP(nn.Module):
    """h -> 4h -> h, the transformer's feed-forward block, sharded as Megatron-LM shards it."""

    def __init__(self, hidden: int, ffn: int):
        super().__init__()
        self.up = nn.Linear(hidden, ffn)  # column parallel
        self.down = nn.Linear(ffn, hidden)  # row parallel
        self.head = nn.Linear(hidden, 4)

    def shard(self, mesh: xs.Mesh) -> None:
        xs.mark_sharding(self.up.weight, mesh, ("model", None))
        xs.mark_sharding(self.up.bias, mesh, ("model",))
        xs.mark_sharding(self.down.weight, mesh, (None, "model"))

    def forward(self, x):
        return self.head(torch.relu(self.down(torch.nn.functional.gelu(self.up(x)))))


def main() -> None:
    n = 1 if PLAIN else xr.global_runtime_device_count()
    mesh = None if PLAIN else xs.Mesh(np.arange(n), (n // 2, 2), ("data", "model"))
    torch.manual_seed(0)
    device = torch_xla.device()
    model = ParallelMLP(HIDDEN, FFN).to(device)
    if mesh is not None:
        model.shard(mesh)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    data = torch.utils.data.TensorDataset(torch.randn(STEPS * BATCH, HIDDEN), torch.randint(0, 4, (STEPS * BATCH,)))
    loader = pl.MpDeviceLoader(torch.utils.data.DataLoader(data, batch_size=BATCH, drop_last=True), device,
                               input_sharding=None if PLAIN else xs.ShardingSpec(mesh, ("data", None)))
    model.train()
    for step, (x, y) in enumerate(loader):
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        torch_xla.sync()
        if step % LOG_EVERY == 0:
            print(f"step {step} loss {loss.item():.4f}")
    print(f"done: {step + 1} steps" + ("" if PLAIN else f" on a {n // 2}x2 mesh"))


if __name__ == "__main__":
    main()
