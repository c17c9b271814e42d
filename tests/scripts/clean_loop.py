"""A clean loop: data moved to the device each step, fixed shapes, no host reads inside the loop."""
import torch
import torch_xla

dev = torch_xla.device()
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)).to(dev)
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
data = [(torch.randn(8, 16), torch.randint(0, 4, (8,))) for _ in range(4)]
for step in range(10):
    x, y = data[step % 4]
    x, y = x.to(dev), y.to(dev)
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad()
    torch_xla.sync()
print(f"final loss {loss.item():.3f}")
