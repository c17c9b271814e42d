"""Planted problem under xmp.spawn: a .item() per batch in the spawned function (MpDeviceLoader loop)."""
import sys

import torch
import torch_xla
import torch_xla.distributed.parallel_loader as pl
import torch_xla.distributed.xla_multiprocessing as xmp


def _mp_fn(index, batches):
    torch.manual_seed(0)
    dev = torch_xla.device()
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    data = torch.utils.data.TensorDataset(torch.randn(8 * batches, 16), torch.randint(0, 4, (8 * batches,)))
    loader = pl.MpDeviceLoader(torch.utils.data.DataLoader(data, batch_size=8, drop_last=True), dev)
    losses = []
    for x, y in loader:
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())  # PLANTED: device_to_host_sync
    print(f"rank {index}: {len(losses)} batches, first loss {losses[0]:.2f}")


if __name__ == "__main__":
    xmp.spawn(_mp_fn, args=(10,))
    print("parent done")
    sys.exit(4)  # the script's own exit code comes through the tool unchanged
