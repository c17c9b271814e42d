"""Planted problem: a tiny step over many small tensors. Each step folds 512 per-layer statistics (8 floats each)
into a running mean: a graph of a few thousand FLOPs whose launch hands the runtime 512 input buffers, so launching
it costs more than tracing it and far more than the device's work on it."""
import torch
import torch_xla

LAYERS = 512
dev = torch_xla.device()
stats = [torch.full((8,), float(i), device=dev) for i in range(LAYERS)]
running = torch.zeros(8, device=dev)
torch_xla.sync()
for step in range(150):
    running = running * 0.9 + torch.stack(stats).mean(0) * 0.1
    torch_xla.sync()  # PLANTED: launch_bound
print("done", round(float(running[0]), 3))
