"""Benchmark workload: a steady 2-layer transformer-encoder training loop on the XLA device.

Prints one line `BENCH {"step_ms": [...]}` with the wall time of every step after the warm-up, timed the same
way whatever wraps the process (plain, `ptxla_perf profile`, PT_XLA_DEBUG_LEVEL=2)."""
import json
import sys
import time

import torch
import torch_xla

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 80
warmup = 10
dev = torch_xla.device()
torch.manual_seed(0)
layer = torch.nn.TransformerEncoderLayer(d_model=128, nhead=4, dim_feedforward=256, batch_first=True)
model = torch.nn.TransformerEncoder(layer, num_layers=2).to(dev)
head = torch.nn.Linear(128, 8).to(dev)
opt = torch.optim.AdamW(list(model.parameters()) + list(head.parameters()), lr=1e-3)
data = [(torch.randn(8, 32, 128), torch.randint(0, 8, (8,))) for _ in range(4)]
times = []
for step in range(steps):
    t0 = time.perf_counter()
    x, y = data[step % 4]
    x, y = x.to(dev), y.to(dev)
    loss = torch.nn.functional.cross_entropy(head(model(x).mean(1)), y)
    loss.backward()
    opt.step()
    opt.zero_grad()
    torch_xla.sync()
    if step >= warmup:
        times.append((time.perf_counter() - t0) * 1e3)
torch_xla._XLAC._xla_wait_device_ops([])
print("BENCH " + json.dumps({"step_ms": times, "loss": loss.item()}))
