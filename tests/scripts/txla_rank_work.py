"""One "rank" of a synchronous torch_xla job, single process: argv = HOST_MS SIZE. The slow rank does
HOST_MS of plain host work before each step; the others stand for ranks waiting at the collective - they wait on
the device (xm.wait_device_ops) about as long, here for a SIZE x SIZE matmul of their own."""
import sys
import time

import torch
import torch_xla
import torch_xla.core.xla_model as xm

host_s, n = float(sys.argv[1]) / 1e3, int(sys.argv[2])
dev = torch_xla.device()
torch.manual_seed(0)
w = torch.randn(n, n, device=dev) / n ** 0.5
x = torch.randn(n, n, device=dev)
for step in range(14):
    end = time.perf_counter() + host_s
    while time.perf_counter() < end:  # plain Python work, no torch
        sum(range(200))
    x = torch.tanh(x @ w)
    torch_xla.sync()
    xm.wait_device_ops()
print("done", round(float(x.abs().mean()), 4))
