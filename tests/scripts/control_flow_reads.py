"""Planted problem: host reads whose values decide the loop's control flow, every step - skip a bad step, stop
on divergence (the advice must be about the decision, not about deferring a logged value)."""
import torch
import torch_xla

dev = torch_xla.device()
model = torch.nn.Linear(16, 1).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(8):
    x = torch.randn(8, 16).to(dev)
    loss = model(x).pow(2).mean()
    if torch.isnan(loss):  # SKIP
        continue
    loss.backward()
    opt.step()
    opt.zero_grad()
    if loss.detach() > 1e6:  # STOP
        break
    torch_xla.sync()
print("done")
