"""A Python float that changes every step (fed to torch_xla as device data: no recompile)."""
import torch
import torch_xla

dev = torch_xla.device()
w = torch.randn(16, 16, device=dev)
for step in range(8):
    scale = 0.5 + step * 0.37
    w = (w * scale).tanh()
    torch_xla.sync()
