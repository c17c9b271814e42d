"""A detector-style torch_xla loop with multi-scale training (as `--multi-scale` in YOLO-style trainers): every two
steps the batch is resized to a new random size with `F.interpolate` in the training loop (line marked PLANTED).
The loss builds a grid from the prediction's size (`torch.arange(w)`), so its ops change shape too, downstream of
the resize. Each new size recompiles the step; the size is set at the PLANTED line, not inside the loss."""
import random

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch_xla

dev = torch_xla.device()
torch.manual_seed(0)
random.seed(0)


class TinyDetector(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.head = nn.Conv2d(8, 2, 1)

    def forward(self, x):
        return self.head(F.relu(self.conv(x)))


def grid_loss(pred):
    h, w = pred.shape[-2:]
    xs = torch.arange(w, device=pred.device, dtype=pred.dtype) / w  # the cell grid, sized from the prediction
    ys = torch.arange(h, device=pred.device, dtype=pred.dtype) / h
    target = torch.stack(torch.broadcast_tensors(xs[None, :], ys[:, None]))
    return ((pred - target) ** 2).mean()


model = TinyDetector().to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
imgs = torch.rand(2, 3, 32, 32).to(dev)
sizes = [16, 24, 20]
for step in range(16):
    ns = sizes[(step // 2) % len(sizes)] if step >= 2 else 32
    batch = F.interpolate(imgs, size=(ns, ns), mode="bilinear", align_corners=False) if ns != 32 else imgs  # PLANTED
    opt.zero_grad()
    loss = grid_loss(model(batch))
    loss.backward()
    opt.step()
    torch_xla.sync()
print("loss", round(loss.item(), 4))
