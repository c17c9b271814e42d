"""Planted problem: a .item() on the loss inside the loop (device-to-host sync every step)."""
import torch
import torch_xla

dev = torch_xla.device()
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1)).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
total = 0.0
for step in range(8):
    x = torch.randn(4, 16).to(dev)
    loss = model(x).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    total += loss.item()  # PLANTED: device_to_host_sync
    torch_xla.sync()
print("done", total > -1)
