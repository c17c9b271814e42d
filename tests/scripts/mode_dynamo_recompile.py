"""torch.compile(backend="openxla") on a loss function that takes the step number, a Python int, to scale the loss
during warm-up: dynamo guards on the int's value, so a new step number recompiles the function. The profile must
report dynamo's recompile at the function with dynamo's own reason (the guard on `step` that failed)."""
import torch
import torch_xla

torch.manual_seed(0)
device = torch_xla.device()
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loss_fn = torch.nn.CrossEntropyLoss()
data = [(torch.randn(8, 16), torch.randint(0, 4, (8,))) for _ in range(3)]


def warmup_loss(x, y, step):  # `step` is a Python int that changes: dynamo guards on its value
    return loss_fn(model(x), y) * min(1.0, (step + 1) / 4)  # the planted dynamo recompile


compiled_loss = torch.compile(warmup_loss, backend="openxla")
for step in range(6):
    x, y = (t.to(device) for t in data[step % 3])
    optimizer.zero_grad()
    loss = compiled_loss(x, y, step)
    loss.backward()
    optimizer.step()
    torch_xla.sync()
print(f"warm-up loss: {loss.item():.4f}")
