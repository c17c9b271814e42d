"""A new user's first loop: the loss is read to the host (`.item()`) on every one of 30 steps, to log it."""
import torch
import torch_xla

device = torch_xla.device()
net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1)).to(device)
sgd = torch.optim.SGD(net.parameters(), lr=0.05)
logged = []
for i in range(30):
    batch = torch.randn(6, 8).to(device)
    loss = (net(batch) - 1.0).abs().mean()
    loss.backward()
    sgd.step()
    sgd.zero_grad()
    logged.append(loss.item())  # the mistake: a device-to-host read each step
    torch_xla.sync()
print("last loss", round(logged[-1], 3) > -1)
