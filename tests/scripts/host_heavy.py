"""Planted problem: a heavy pure-Python block every step (per-sample bookkeeping in plain Python, the way a
metrics helper or a hand-written augmentation is often written) keeps the host busy while the device waits."""
import torch
import torch_xla


def bookkeeping(step: int) -> int:
    return sum((i * step) % 7 for i in range(400_000))  # PLANTED: host_bound


dev = torch_xla.device()
model = torch.nn.Linear(16, 4).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(8, 16).to(dev), torch.randint(0, 4, (8,)).to(dev)
checks = 0
for step in range(24):
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad()
    checks += bookkeeping(step)
    torch_xla.sync()
print("done", checks > 0)
