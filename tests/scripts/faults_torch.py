"""A small torch_xla loop for the fault-injection tests: a DataLoader, a host read every step, its own exit code."""
import sys

import torch
import torch_xla
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
dev = torch_xla.device()
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2)).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(TensorDataset(torch.randn(48, 8), torch.randint(0, 2, (48,))), batch_size=8)
for step, (x, y) in enumerate(loader):
    loss = torch.nn.functional.cross_entropy(model(x.to(dev)), y.to(dev))
    loss.backward()
    opt.step()
    opt.zero_grad()
    torch_xla.sync()
    print(f"step {step} loss {loss.item():.4f}")
print("done", flush=True)
sys.exit(3)
