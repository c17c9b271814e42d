"""MNIST-style MLP classifier fed by MpDeviceLoader; xm.optimizer_step; loss logged every 10 steps through
xm.add_step_closure (the pattern the torch_xla docs recommend). Clean.

Issue 9, failure 1 (a step is not an iteration) and failure 6 (closure logging flagged as a per-step sync).
"""
import argparse
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.distributed.parallel_loader as pl


class MLP(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.fc1 = nn.Linear(16 * 16, 64)
        self.fc2 = nn.Linear(64, num_classes)

    def forward(self, x):
        x = F.relu(self.fc1(torch.flatten(x, 1)))
        return F.log_softmax(self.fc2(x), dim=1)


def _log(step, loss, tracker_start):
    print(f"step {step:3d}  loss {loss.item():.4f}  {time.time() - tracker_start:.1f}s", flush=True)


def train(flags):
    torch.manual_seed(1)
    device = torch_xla.device()
    images = torch.randn(flags.batch_size * flags.steps, 1, 16, 16)
    labels = torch.randint(0, 10, (flags.batch_size * flags.steps,))
    train_loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(images, labels),
                                               batch_size=flags.batch_size, shuffle=True, drop_last=True)
    model = MLP().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=flags.lr, momentum=0.9)
    loss_fn = nn.NLLLoss()
    device_loader = pl.MpDeviceLoader(train_loader, device)
    start = time.time()
    model.train()
    for step, (data, target) in enumerate(device_loader):
        optimizer.zero_grad()
        loss = loss_fn(model(data), target)
        loss.backward()
        xm.optimizer_step(optimizer)
        if step % flags.log_steps == 0:
            xm.add_step_closure(_log, args=(step, loss, start))
    print("done")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch_size", type=int, default=16)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--log_steps", type=int, default=10)
    train(parser.parse_args())
