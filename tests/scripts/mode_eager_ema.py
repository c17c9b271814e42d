"""Eager mode with a torch_xla.compile'd training step, and an exponential moving average of the weights kept
outside it: the EMA update runs eagerly, op by op, on every iteration (two ops per parameter), a large share of the
step for this small model. The profile must say so at the EMA line, as an eager_ops
warning, and never as a lazy-mode graph break."""
import torch
import torch_xla

torch_xla.experimental.eager_mode(True)
torch.manual_seed(0)
device = torch_xla.device()
layers = []
for _ in range(8):
    layers += [torch.nn.Linear(16, 16), torch.nn.ReLU()]
model = torch.nn.Sequential(*layers, torch.nn.Linear(16, 4)).to(device)
ema = [torch.zeros(p.shape, device=device) for p in model.parameters()]
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
for step in range(8):
    x, y = (t.to(device) for t in data[step % 3])
    loss = compiled_step(x, y)
    with torch.no_grad():
        for e, p in zip(ema, model.parameters()):
            e.mul_(0.99).add_(p, alpha=0.01)  # the planted eager ops
print(f"eager mode with an EMA: loss {loss.item():.4f}, ema checksum {sum(e.sum() for e in ema).item():.4f}")
