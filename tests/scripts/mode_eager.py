"""Eager mode, in the style of torch_xla's eager-mode guide: ops run as they are called, and the training step is
wrapped in torch_xla.compile so that it is traced and compiled as one graph."""
import torch
import torch_xla

torch_xla.experimental.eager_mode(True)
torch.manual_seed(0)
device = torch_xla.device()
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loss_fn = torch.nn.CrossEntropyLoss()
data = [(torch.randn(8, 16), torch.randint(0, 4, (8,))) for _ in range(3)]


def step_fn(x, y):
    optimizer.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.step()
    return loss


compiled_step = torch_xla.compile(step_fn)
for step in range(6):
    x, y = (t.to(device) for t in data[step % 3])
    loss = compiled_step(x, y)
print(f"eager mode: loss {loss.item():.4f}, checksum {sum(p.sum() for p in model.parameters()).item():.4f}")
