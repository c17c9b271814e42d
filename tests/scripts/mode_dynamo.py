"""torch.compile(backend="openxla") training, in the style of torch_xla's dynamo guide: first a compiled model with
backward and the optimizer step outside it, then a compiled whole training step. Prints the losses and dynamo's own
graph counts, which must not change when the run is profiled."""
import torch
import torch_xla
from torch._dynamo.utils import counters

torch.manual_seed(0)
device = torch_xla.device()
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loss_fn = torch.nn.CrossEntropyLoss()
data = [(torch.randn(8, 16), torch.randint(0, 4, (8,))) for _ in range(3)]

compiled_model = torch.compile(model, backend="openxla")
for step in range(4):
    x, y = (t.to(device) for t in data[step % 3])
    optimizer.zero_grad()
    loss = loss_fn(compiled_model(x), y)
    loss.backward()
    optimizer.step()
    torch_xla.sync()
print(f"compiled model: loss {loss.item():.4f}")


def train_step(model, x, y, optimizer):
    optimizer.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.step()
    return loss


compiled_step = torch.compile(train_step, backend="openxla")
for step in range(4):
    x, y = (t.to(device) for t in data[step % 3])
    loss = compiled_step(model, x, y, optimizer)
    torch_xla.sync()
print(f"compiled step: loss {loss.item():.4f}")
print(f"dynamo: {counters['stats']['unique_graphs']} graphs, {sum(counters['graph_break'].values())} graph breaks")
