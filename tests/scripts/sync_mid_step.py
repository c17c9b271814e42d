"""Planted problem: a torch_xla.sync() between forward and backward splits every iteration in two graphs."""
import torch
import torch_xla

dev = torch_xla.device()
model = torch.nn.Linear(16, 4).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(6):
    x = torch.randn(4, 16).to(dev)
    loss = model(x).sum()
    torch_xla.sync()  # PLANTED: graph_break
    loss.backward()
    opt.step()
    opt.zero_grad()
    torch_xla.sync()
