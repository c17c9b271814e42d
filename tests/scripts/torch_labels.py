"""A small torch_xla classifier loop (the style of the MNIST examples): forward, backward, SGD step and one
`torch_xla.sync()` per step at the line marked PLANTED, the loss read once after the loop. The page must name the
step graph by that line, not by its hash; the console says which device figure is a wait."""
import torch
import torch.nn as nn
import torch_xla

dev = torch_xla.device()
torch.manual_seed(0)
model = nn.Sequential(nn.Flatten(), nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10)).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
images = torch.randn(16, 1, 8, 8).to(dev)
labels = torch.randint(0, 10, (16,)).to(dev)
for step in range(12):
    opt.zero_grad()
    loss = nn.functional.cross_entropy(model(images), labels)
    loss.backward()
    opt.step()
    torch_xla.sync()  # PLANTED: the step's one graph runs here
print("loss", round(loss.item(), 4))
