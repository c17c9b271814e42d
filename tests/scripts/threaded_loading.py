"""Loading that runs in another thread than the loop: a Dataset whose __getitem__ does slow host work (a sleep
standing in for decoding), read by torch_xla's MpDeviceLoader (argv 1 "mp", its loader thread iterates the
DataLoader) or by the user's own prefetching generator (argv 1 "prefetch": a thread fills a queue, the loop takes
from it). The loop waits for every batch; the time is spent at DATA_LINE, in the loader's thread. After each
training pass (3 epochs), a short evaluation pass reads its accuracy once (a host read after the loop)."""
import queue
import sys
import threading
import time

import torch
import torch_xla
import torch_xla.distributed.parallel_loader as pl
from torch.utils.data import DataLoader, Dataset

HOW = sys.argv[1] if len(sys.argv) > 1 else "mp"


class SlowRecords(Dataset):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        time.sleep(0.01)  # DATA_LINE: the host work every sample costs
        return torch.full((16,), float(i % 7)), torch.tensor(i % 2)


def prefetched(batches, depth=2):
    """Batches made in a thread of their own, `depth` ahead of the loop."""
    q = queue.Queue(depth)

    def fill():
        for b in batches:
            q.put(b)
        q.put(None)
    threading.Thread(target=fill, daemon=True).start()
    while (b := q.get()) is not None:
        yield b


if __name__ == "__main__":
    dev = torch_xla.device()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 2)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    batches = DataLoader(SlowRecords(96), batch_size=4, drop_last=True)
    for epoch in range(3):
        if HOW == "mp":
            loader = pl.MpDeviceLoader(batches, dev, loader_prefetch_size=2, device_prefetch_size=1)
        else:
            loader = ((x.to(dev), y.to(dev)) for x, y in prefetched(batches))
        model.train()
        for x, y in loader:  # PLANTED: input_bound
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad()
            if HOW != "mp":
                torch_xla.sync()
        model.eval()
        correct = torch.zeros((), device=dev)
        with torch.no_grad():
            for x, y in pl.MpDeviceLoader(DataLoader(SlowRecords(16), batch_size=8), dev):
                correct += (model(x).argmax(1) == y).sum()
        print(f"epoch {epoch} accuracy {correct.item() / 16:.2f}")  # EVAL_READ: once per evaluation pass
