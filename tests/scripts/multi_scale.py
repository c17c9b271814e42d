"""Planted problem: multi-scale training as detection loops write it - each step resizes the batch to a random
multiple of the stride with F.interpolate. The inputs keep their shape; the resize's output size is a Python
value baked into the graph, so every new size is a new graph (the resize line is the one to change)."""
import math
import random

import torch
import torch.nn.functional as F
import torch_xla
import torch_xla.core.xla_model as xm


class Detect(torch.nn.Module):
    def __init__(self, anchors=3, outputs=6):
        super().__init__()
        self.na, self.no = anchors, outputs
        self.backbone = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, 2, 1), torch.nn.SiLU(),
                                            torch.nn.Conv2d(8, 16, 3, 2, 1), torch.nn.SiLU())
        self.head = torch.nn.Conv2d(16, anchors * outputs, 1)

    def forward(self, x):
        p = self.head(self.backbone(x))
        bs, _, ny, nx = p.shape
        return p.view(bs, self.na, self.no, ny, nx).permute(0, 1, 3, 4, 2).contiguous()


random.seed(3)
dev = torch_xla.device()
model = Detect().to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
imgsz, gs = 64, 16
for step in range(10):
    imgs = torch.rand(2, 3, imgsz, imgsz).to(dev)
    sz = random.randrange(imgsz // 2, imgsz * 3 // 2 + gs) // gs * gs
    sf = sz / max(imgs.shape[2:])
    if sf != 1:
        ns = [math.ceil(x * sf / gs) * gs for x in imgs.shape[2:]]
        imgs = F.interpolate(imgs, size=ns, mode="bilinear", align_corners=False)  # PLANTED: recompilation
    pred = model(imgs)
    loss = pred.square().mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    xm.mark_step()
print("done")
