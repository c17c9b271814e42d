"""Planted problem: a DataLoader whose batches start to grow after a few steps (a curriculum, a length-bucketed
sampler): each new batch size uploaded by the loop is a new input shape, a new graph. The recompile is about the
line that uploads the batch, not about the sync that cut the graph."""
import torch
import torch_xla
import torch_xla.core.xla_model as xm
from torch.utils.data import DataLoader, Sampler, TensorDataset


class GrowingBatches(Sampler):
    def __init__(self, sizes):
        self.sizes = sizes

    def __iter__(self):
        start = 0
        for n in self.sizes:
            yield list(range(start, start + n))
            start += n

    def __len__(self):
        return len(self.sizes)


dev = torch_xla.device()
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
sizes = [4, 4, 4, 4, 4, 4, 6, 8, 10, 12, 14, 16]
data = TensorDataset(torch.randn(sum(sizes), 16), torch.randn(sum(sizes), 4))
for x, y in DataLoader(data, batch_sampler=GrowingBatches(sizes)):
    x = x.to(dev)  # PLANTED: recompilation (the batch size changes)
    y = y.to(dev)
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad()
    xm.mark_step()  # CUT
print("done")
