"""One loop, run alone (`alone`), in a thread of the program's own (`thread`) or under torch_xla.launch (`launch`,
the default: on the CPU one child, whose function runs in a per-device worker thread). `host`: a heavy pure-Python block every step (host-bound);
`data`: a Dataset whose __getitem__ sleeps, read with 0 workers (input-bound)."""
import sys
import threading
import time

import torch
import torch_xla
from torch.utils.data import DataLoader, Dataset

HOW = sys.argv[1] if len(sys.argv) > 1 else "launch"
WHAT = sys.argv[2] if len(sys.argv) > 2 else "host"
STEPS = 30  # steady steps enough for the 100 Hz sampler to land in the planted block (tests/test_launch_thread.py)


def bookkeeping(step: int) -> int:
    return sum((i * step) % 7 for i in range(300_000))  # PLANTED: host_bound


class SlowSamples(Dataset):
    def __len__(self):
        return 2 * STEPS

    def __getitem__(self, i):
        time.sleep(0.02)  # DATA_LINE: the host work every sample costs
        return torch.full((16,), float(i)), torch.tensor(i % 4)


def train(index):
    dev = torch_xla.device()
    model = torch.nn.Linear(16, 4).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    checks = 0
    if WHAT == "data":
        for x, y in DataLoader(SlowSamples(), batch_size=2):  # LOOP_LINE: input_bound
            x, y = x.to(dev), y.to(dev)
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad()
            torch_xla.sync()
    else:
        x, y = torch.randn(8, 16).to(dev), torch.randint(0, 4, (8,)).to(dev)
        for step in range(STEPS):
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad()
            checks += bookkeeping(step)
            torch_xla.sync()
    print(f"rank {index}: {STEPS} steps", checks >= 0)


if __name__ == "__main__":
    if HOW == "launch":
        torch_xla.launch(train, args=())
    elif HOW == "thread":
        t = threading.Thread(target=train, args=(0,), name="trainer")
        t.start()
        t.join()
    else:
        train(0)
    print("done")
