"""torch_xla.launch running until stopped: for Ctrl-C / SIGTERM to the parent (tests/test_multiprocess.py)."""
import os
import sys
import time

import torch
import torch_xla


def _mp_fn(index, pidfile):
    dev = torch_xla.device()
    model = torch.nn.Linear(16, 4).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with open(pidfile, "w") as f:
        f.write(str(os.getpid()))
    step = 0
    while True:
        loss = model(torch.randn(8, 16).to(dev)).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        torch_xla.sync()
        step += 1
        if step == 5:
            print("READY", flush=True)
        time.sleep(0.01)


if __name__ == "__main__":
    torch_xla.launch(_mp_fn, args=(sys.argv[1],))
