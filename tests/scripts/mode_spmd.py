"""SPMD data parallelism, in the style of torch_xla's SPMD guide: one process drives a mesh of 4 devices (on the CPU:
CPU_NUM_DEVICES=4 PJRT CPU devices); the batch is sharded along the mesh, the weights are replicated."""
import os

os.environ.setdefault("CPU_NUM_DEVICES", "4")
import numpy as np
import torch
import torch_xla
import torch_xla.distributed.spmd as xs
import torch_xla.runtime as xr

xr.use_spmd()
num_devices = xr.global_runtime_device_count()
mesh = xs.Mesh(np.arange(num_devices), (num_devices, 1), ("data", "model"))
torch.manual_seed(0)
device = torch_xla.device()
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)).to(device)
# mark_sharding returns the XLAShardedTensor that wraps the weight: keep it, to look at the shards later
sharded_weight = xs.mark_sharding(model[0].weight, mesh, ("model", None))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loss_fn = torch.nn.CrossEntropyLoss()
data = [(torch.randn(8, 16), torch.randint(0, 4, (8,))) for _ in range(3)]

for step in range(6):
    x, y = (t.to(device) for t in data[step % 3])
    xs.mark_sharding(x, mesh, ("data", None))
    optimizer.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.step()
    torch_xla.sync()
print(f"spmd over {num_devices} devices: loss {loss.item():.4f}, "
      f"{len(sharded_weight.local_shards)} shards of the first weight")
