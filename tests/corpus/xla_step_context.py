"""A loop whose body is wrapped in `torch_xla.step()` (the sync at its exit) and annotated with
`xp.StepTrace`-free `xp.Trace` regions for the profiler; data built on the host and moved per step. Clean.
"""
import torch
import torch.nn as nn
import torch_xla
import torch_xla.debug.profiler as xp


def main(steps=12, batch_size=16):
    device = torch_xla.device()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 2)).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for step in range(steps):
        with torch_xla.step():
            with xp.Trace("input"):
                x = torch.randn(batch_size, 12).to(device)
                y = torch.randint(0, 2, (batch_size,)).to(device)
            with xp.Trace("train_step"):
                optimizer.zero_grad()
                loss = nn.functional.cross_entropy(model(x), y)
                loss.backward()
                optimizer.step()
    print("loss", loss.item())


if __name__ == "__main__":
    main()
