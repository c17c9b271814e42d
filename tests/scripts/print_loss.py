"""Planted problem: print(loss) inside the loop."""
import torch
import torch_xla

dev = torch_xla.device()
model = torch.nn.Linear(16, 1).to(dev)
for step in range(6):
    x = torch.randn(4, 16).to(dev)
    loss = model(x).pow(2).mean()
    print(loss)  # PLANTED: device_to_host_sync
    torch_xla.sync()
