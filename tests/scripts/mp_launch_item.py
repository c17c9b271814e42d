"""Planted problem under torch_xla.launch: a .item() per batch in the spawned function (MpDeviceLoader loop)."""
import torch
import torch_xla
import torch_xla.distributed.parallel_loader as pl


def _mp_fn(index):
    torch.manual_seed(0)
    dev = torch_xla.device()
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    data = torch.utils.data.TensorDataset(torch.randn(80, 16), torch.randint(0, 4, (80,)))
    loader = pl.MpDeviceLoader(torch.utils.data.DataLoader(data, batch_size=8, drop_last=True), dev)
    total = 0.0
    for x, y in loader:
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        total += loss.item()  # PLANTED: device_to_host_sync
    print(f"rank {index}: 10 batches, mean loss {total / 10:.2f}")


if __name__ == "__main__":
    torch_xla.launch(_mp_fn, args=())
    print("parent done")
