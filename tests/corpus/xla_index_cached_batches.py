"""A small dataset cached on the device once as one tensor, and each step's batch taken from it with a Python
int (`batches_x[step % n]`): torch_xla bakes the index into the graph as a constant, so each of the n batches
compiles its own graph (then they are cached). Planted mistake: the Python-int index (index with a device
tensor, e.g. `torch.index_select`, or slice a fixed-shape view on the host side).
"""
import torch
import torch.nn as nn
import torch_xla


def main(steps=20, n=5, batch_size=32):
    torch.manual_seed(0)
    device = torch_xla.device()
    model = nn.Sequential(nn.Linear(10, 24), nn.SiLU(), nn.Linear(24, 3)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    batches_x = torch.randn(n, batch_size, 10).to(device)
    batches_y = torch.randint(0, 3, (n, batch_size)).to(device)
    model.train()
    for step in range(steps):
        x, y = batches_x[step % n], batches_y[step % n]  # PLANTED: recompilation
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        torch_xla.sync()
    print(f"final loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
