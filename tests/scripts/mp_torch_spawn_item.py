"""Planted problem under torch.multiprocessing.spawn (the DDP examples' launcher): 2 workers, each training on the
XLA CPU device with a .item() per step."""
import sys

import torch
import torch.multiprocessing as mp
import torch_xla


def train(rank, world_size, steps):
    torch.manual_seed(rank)
    dev = torch_xla.device()
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    x, y = torch.randn(8, 16).to(dev), torch.randint(0, 4, (8,)).to(dev)
    total = 0.0
    for _ in range(steps):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        torch_xla.sync()
        total += loss.item()  # PLANTED: device_to_host_sync
    print(f"rank {rank}/{world_size}: {steps} steps")


if __name__ == "__main__":
    mp.spawn(train, args=(2, 8), nprocs=2)
    print("parent done")
    sys.exit(5)
