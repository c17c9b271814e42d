"""Eager mode with a torch_xla.compile'd training step that reads the loss on the host inside the step (a planted
`.item()`): the read forces the traced graph to run before the step's own sync, which the profile must still
report as a device-to-host sync, while the eager ops outside the step are no graph break."""
import torch
import torch_xla

torch_xla.experimental.eager_mode(True)
torch.manual_seed(0)
device = torch_xla.device()
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loss_fn = torch.nn.CrossEntropyLoss()
data = [(torch.randn(8, 16), torch.randint(0, 4, (8,))) for _ in range(3)]
seen = []


def step_fn(x, y):
    optimizer.zero_grad()
    loss = loss_fn(model(x), y)
    seen.append(loss.item())  # the planted host read, inside the compiled step
    loss.backward()
    optimizer.step()
    return loss


compiled_step = torch_xla.compile(step_fn)
for step in range(5):
    x, y = (t.to(device) for t in data[step % 3])
    loss = compiled_step(x, y)
print(f"eager mode, read in step: last loss {seen[-1]:.4f} of {len(seen)}")
