"""Planted problem: a Dataset whose __getitem__ does slow host work (a sleep standing in for decoding and
augmentation), read with 0 workers (or 2: each sample slower, so that two workers still cannot keep up with the
step on a loaded machine): the device waits for every batch."""
import sys
import time

import torch
import torch_xla
from torch.utils.data import DataLoader, Dataset

WORKERS = int(sys.argv[1]) if len(sys.argv) > 1 else 0
SLEEP_S = 0.02 if WORKERS == 0 else 0.06


class SlowImages(Dataset):
    def __len__(self):
        return 24

    def __getitem__(self, i):
        time.sleep(SLEEP_S)  # DATA_LINE: the host work every sample costs
        return torch.full((16,), float(i)), torch.tensor(i % 2)


if __name__ == "__main__":
    dev = torch_xla.device()
    model = torch.nn.Linear(16, 2).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = DataLoader(SlowImages(), batch_size=2, num_workers=WORKERS)
    for x, y in loader:  # PLANTED: input_bound
        x, y = x.to(dev), y.to(dev)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        torch_xla.sync()
    print("trained", len(loader), "steps")
