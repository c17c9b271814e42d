"""A loop slow enough to capture from while it runs: 0.02 s of sleep per step, as many steps as argv[1] says."""
import sys
import time

import torch
import torch_xla

device = torch_xla.device()
weights = torch.randn(32, 32, device=device)
for i in range(int(sys.argv[1]) if len(sys.argv) > 1 else 300):
    batch = torch.randn(16, 32).to(device)
    out = (batch @ weights).tanh().mean()
    torch_xla.sync()
    time.sleep(0.02)
print("done")
