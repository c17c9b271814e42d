"""Warm-up compiles as MMF's trainer makes them: the first update creates the optimizer state, the scheduler keeps
the learning rate at exactly 0 for one more update (torch_xla bakes 0 into the graph: a special scalar), then the
rate is a device value and the graph is steady. Optional: steps (argv 1), a loss read every N updates (argv 2)."""
import sys

import torch
import torch_xla

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 6
log_every = int(sys.argv[2]) if len(sys.argv) > 2 else 0
dev = torch_xla.device()
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 2)).to(dev)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda u: max(0, u - 1) / 100)  # linear warm-up, 0 twice
for step in range(steps):
    x, y = torch.randn(8, 16).to(dev), torch.randn(8, 2).to(dev)
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    sched.step()
    opt.zero_grad()
    if log_every and step % log_every == 0:
        print(f"step {step} loss {loss.item():.4f}")
    torch_xla.sync()
print("done")
