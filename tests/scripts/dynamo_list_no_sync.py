"""torch.compile training over a plain list of batches (no DataLoader) with no torch_xla.sync() anywhere in the
loop: the compiled step is called once per batch. With `break`, the compiled function prints a line between its
forward and its backward: a graph break, so each call runs its graphs in two pieces. With `accum`, gradient
accumulation: the compiled function (forward and backward) is called on two micro-batches of each batch and the
optimizer steps outside it, once per batch."""
import sys

import torch
import torch_xla

torch.manual_seed(0)
device = torch_xla.device()
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
loss_fn = torch.nn.CrossEntropyLoss()
batches = [(torch.randn(8, 16), torch.randint(0, 4, (8,))) for _ in range(12)]
graph_break, accum = "break" in sys.argv[1:], "accum" in sys.argv[1:]


def train_step(x, y):
    optimizer.zero_grad()
    loss = loss_fn(model(x), y)
    if graph_break:
        print("forward done")
    loss.backward()
    optimizer.step()
    return loss


def micro_step(x, y):
    loss = loss_fn(model(x), y) / 2
    loss.backward()
    return loss


compiled_step = torch.compile(train_step, backend="openxla")
compiled_micro = torch.compile(micro_step, backend="openxla")
for x, y in batches:
    if accum:
        for xm, ym in zip(x.chunk(2), y.chunk(2)):
            loss = compiled_micro(xm.to(device), ym.to(device))
        optimizer.step()
        optimizer.zero_grad()
    else:
        loss = compiled_step(x.to(device), y.to(device))
print(f"batches {len(batches)} loss {loss.item():.4f}")
