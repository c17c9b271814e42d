"""ImageNet-style epochs through torch_xla's MpDeviceLoader (issue 31): a training loop, then an evaluation loop with
autograd on that adds its correct predictions up on the device, and the result read once after the loop -
`correct.item()` (`item`) or through `xm.mesh_reduce` (`mesh`). One training step an epoch: the read after the pass
must not look like a read in most training iterations.

    python mp_train_eval.py [item|mesh] [EPOCHS]
"""
import sys

import torch
import torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.distributed.parallel_loader as pl

how = sys.argv[1] if len(sys.argv) > 1 else "mesh"
epochs = int(sys.argv[2]) if len(sys.argv) > 2 else 4
dev = torch_xla.device()
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.05)
train = torch.utils.data.TensorDataset(torch.randn(8, 16), torch.randint(0, 4, (8,)))
test = torch.utils.data.TensorDataset(torch.randn(48, 16), torch.randint(0, 4, (48,)))
train_loader = pl.MpDeviceLoader(torch.utils.data.DataLoader(train, batch_size=8, drop_last=True), dev)
test_loader = pl.MpDeviceLoader(torch.utils.data.DataLoader(test, batch_size=8, drop_last=True), dev)
for epoch in range(epochs):
    model.train()
    for x, y in train_loader:
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        xm.optimizer_step(opt)
    model.eval()
    correct, total = torch.zeros((), device=dev), 0
    for x, y in test_loader:
        correct += model(x).argmax(1).eq(y).sum()
        total += y.shape[0]
    if how == "item":
        accuracy = 100.0 * correct.item() / total  # PLANTED: the pass's result, read once after its loop
    else:
        accuracy = xm.mesh_reduce("accuracy", 100.0 * correct.item() / total, lambda v: sum(v) / len(v))  # PLANTED
    print(f"epoch {epoch} accuracy {accuracy:.1f}")
