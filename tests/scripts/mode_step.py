"""The torch_xla.step() context manager around each training step (it syncs on exit), then a few steps that end in
an explicit torch_xla.sync()."""
import torch
import torch_xla

torch.manual_seed(0)
device = torch_xla.device()
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loss_fn = torch.nn.CrossEntropyLoss()
data = [(torch.randn(8, 16), torch.randint(0, 4, (8,))) for _ in range(3)]

for step in range(4):
    with torch_xla.step():
        x, y = (t.to(device) for t in data[step % 3])
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
print(f"torch_xla.step(): loss {loss.item():.4f}")
for step in range(4):
    x, y = (t.to(device) for t in data[step % 3])
    optimizer.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.step()
    torch_xla.sync()
print(f"torch_xla.sync(): loss {loss.item():.4f}")
