"""Gradient accumulation: 2 micro-batches per optimizer update, a torch_xla.sync() after each micro-batch (keeps
each graph small), optimizer.step() + zero_grad every 2nd micro-batch. Clean. A report's step must be one update.
"""
import torch
import torch.nn as nn
import torch_xla


def main(updates=10, accum_steps=2, micro_batch=8):
    device = torch_xla.device()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 48), nn.ReLU(), nn.Linear(48, 48), nn.ReLU(), nn.Linear(48, 1)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    n = updates * accum_steps * micro_batch
    dataset = torch.utils.data.TensorDataset(torch.randn(n, 16), torch.randn(n, 1))
    loader = torch.utils.data.DataLoader(dataset, batch_size=micro_batch, drop_last=True)
    model.train()
    optimizer.zero_grad()
    for i, (x, y) in enumerate(loader):
        x, y = x.to(device), y.to(device)
        loss = nn.functional.smooth_l1_loss(model(x), y) / accum_steps
        loss.backward()
        if (i + 1) % accum_steps == 0:
            optimizer.step()
            optimizer.zero_grad()
        torch_xla.sync()
    print("done")


if __name__ == "__main__":
    main()
