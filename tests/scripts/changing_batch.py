"""Planted problem: the batch size changes every step (a new input shape -> a new graph each step)."""
import torch
import torch_xla

dev = torch_xla.device()
model = torch.nn.Linear(16, 4).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(9):
    x = torch.randn(2 + step, 16).to(dev)  # PLANTED: recompilation (shape changes)
    loss = model(x).sum()
    loss.backward()
    opt.step()
    opt.zero_grad()
    torch_xla.sync()
