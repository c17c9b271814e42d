"""Planted problem: indexing a device tensor with the step number bakes a new constant into every graph."""
import torch
import torch_xla

dev = torch_xla.device()
table = torch.randn(32, 16, device=dev)
w = torch.randn(16, 16, device=dev)
for step in range(10):
    row = table[step]  # PLANTED: recompilation
    out = (row @ w).relu().sum()
    torch_xla.sync()
