"""Loops for the MFU-basis tests (issue 18): python mfu_programs.py PROGRAM [STEPS] [SIZE].

independent: the same product of the same inputs each step, never read: torch_xla's sync returns before the
device finishes, the graphs queue behind each other, the wall step time is the host's dispatch time.
dependent: W = W - lr * x.T @ (x @ W) each step: each graph needs the one before, the device's work per step is
a few ms on a CPU."""
import sys

import torch
import torch_xla

PROGRAM = sys.argv[1]
STEPS = int(sys.argv[2]) if len(sys.argv) > 2 else 20
N = int(sys.argv[3]) if len(sys.argv) > 3 else 512
dev = torch_xla.device()
torch.manual_seed(0)
if PROGRAM == "independent":
    a, b = torch.randn(N, N).to(dev), torch.randn(N, N).to(dev)
    for _ in range(STEPS):
        y = a @ b
        torch_xla.sync()
else:
    x, w = torch.randn(N, N).to(dev) / N, torch.randn(N, N).to(dev)
    for _ in range(STEPS):
        w = w - 0.01 * (x.T @ (x @ w))
        torch_xla.sync()
