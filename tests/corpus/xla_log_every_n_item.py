"""A plain training loop that logs `loss.item()` every 5 steps (not through a step closure). Clean enough: one
host read every 5 iterations is worth an info with its amortised cost, not a per-step warning.

Issue 9, failure 6 (logging every N steps flagged like a per-step sync).
"""
import torch
import torch.nn as nn
import torch_xla


def main(steps=20, log_every=5, batch_size=32):
    device = torch_xla.device()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 4)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    running = []
    for step in range(steps):
        x = torch.randn(batch_size, 16).to(device)
        y = torch.randint(0, 4, (batch_size,)).to(device)
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        torch_xla.sync()
        if step % log_every == 0:
            running.append(loss.item())  # INFO: device_to_host_sync
            print(f"step {step} loss {running[-1]:.4f}")


if __name__ == "__main__":
    main()
