"""Planted problem: `if tensor:` on a device tensor (bool() reads it on the host)."""
import torch
import torch_xla

dev = torch_xla.device()
w = torch.randn(16, 16, device=dev)
for step in range(6):
    x = torch.randn(4, 16).to(dev)
    y = (x @ w).relu().mean()
    if y > 100:  # PLANTED: device_to_host_sync
        w = w * 0.5
    torch_xla.sync()
