"""A regression loop that prints the loss in the middle of every step (before backward): the print reads the
tensor, which runs the forward graph early; backward + update are a second graph. Planted mistake: print(loss).

Issue 9, failure 5 (a graph break nobody reports).
"""
import torch
import torch.nn as nn
import torch_xla


def main(steps=12):
    device = torch_xla.device()
    torch.manual_seed(3)
    model = nn.Sequential(nn.Linear(8, 32), nn.SiLU(), nn.Linear(32, 1)).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    true_w = torch.randn(8, 1)
    for step in range(steps):
        x = torch.randn(32, 8)
        y = x @ true_w + 0.1 * torch.randn(32, 1)
        x, y = x.to(device), y.to(device)
        loss = nn.functional.mse_loss(model(x), y)
        print("step", step, "loss", loss)  # PLANTED: device_to_host_sync
        opt.zero_grad()
        loss.backward()
        opt.step()
        torch_xla.sync()


if __name__ == "__main__":
    main()
