"""A host read and a CPU-fallback op every step: the figures where fallback copies and the user's reads part."""
import torch
import torch_xla

dev = torch_xla.device()
w = torch.randn(16, 16, device=dev)
total = 0.0
for step in range(10):
    x = torch.randn(8, 16).to(dev)
    y = x @ w
    idx = torch.nonzero(y > 0)  # falls back to the CPU: copies its input to the host
    loss = y.sum() + idx.shape[0]
    total += loss.item()  # the user's own read, every step
    torch_xla.sync()
print(f"steps {step + 1}")
