"""Planted problem: torch.nonzero in the loop (no XLA lowering without dynamic shapes: CPU fallback)."""
import torch
import torch_xla

dev = torch_xla.device()
w = torch.randn(16, 16, device=dev)
for step in range(6):
    x = torch.randn(8, 16).to(dev)
    y = x @ w
    idx = torch.nonzero(y > 0)  # PLANTED: op_fallback
    z = y.sum() + idx.shape[0]
    torch_xla.sync()
