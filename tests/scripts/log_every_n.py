"""Planted problem: the loss is printed every 7 steps (an intermittent device-to-host sync)."""
import torch
import torch_xla

dev = torch_xla.device()
model = torch.nn.Linear(16, 1).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(22):
    loss = model(torch.randn(4, 16).to(dev)).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    if step % 7 == 0:
        print(f"step {step} loss {loss.item():.4f}")  # PLANTED: device_to_host_sync
    torch_xla.sync()
