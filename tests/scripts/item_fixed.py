"""Clean twin of item_per_step.py: the loss stays on the device; one read after the loop."""
import torch
import torch_xla

dev = torch_xla.device()
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1)).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
total = torch.zeros((), device=dev)
for step in range(8):
    x = torch.randn(4, 16).to(dev)
    loss = model(x).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    total += loss.detach()
    torch_xla.sync()
print("done", total.item() > -1)
