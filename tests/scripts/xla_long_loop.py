"""A long tiny torch_xla loop (argv[1] steps): an optimizer step and a sync per step, the loss read every 10 steps
(a logging line), one new batch size at step 250 (a compile in the middle): issue 28's folded long run."""
import sys

import torch
import torch_xla

n = int(sys.argv[1]) if len(sys.argv) > 1 else 600
torch.manual_seed(0)
dev = torch_xla.device()
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1)).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
batch = torch.randn(8, 16).to(dev)
odd = torch.randn(12, 16).to(dev)
logged = 0.0
for step in range(n):
    loss = model(odd if step == 250 else batch).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    torch_xla.sync()
    if step % 10 == 0:
        logged += loss.item()  # a logging read every 10 steps
print("done", n, logged > -1)
