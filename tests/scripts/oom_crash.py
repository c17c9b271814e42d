"""A run that dies out of device memory after a few steps: the error XLA raises (its text read from a file named
on the command line, written in the format XLA prints on TPU or GPU) ends the script as it would."""
import sys
from pathlib import Path

import torch
import torch_xla

dev = torch_xla.device()
w = torch.randn(32, 32, device=dev)
for step in range(4):
    w = (w @ w).tanh()
    torch_xla.sync()
print("steps done", step + 1)
raise RuntimeError(Path(sys.argv[1]).read_text())
