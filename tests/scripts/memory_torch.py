"""torch_xla loops for the memory section. argv[1]: matmul (x @ w on device-resident inputs of known sizes) | keep
(a small training loop that keeps every step's loss tensor in a list) | item (the same loop keeping loss.item())."""
import sys

import torch
import torch_xla

WHAT = sys.argv[1]
M, K, N = 64, 128, 32
dev = torch_xla.device()

if WHAT == "matmul":
    x = torch.randn(M, K).to(dev)
    w = torch.randn(K, N).to(dev)
    for step in range(6):
        y = x @ w
        torch_xla.sync()
    print("sum", float(y.sum()))
else:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    data = [(torch.randn(8, 16).to(dev), torch.randint(0, 4, (8,)).to(dev)) for _ in range(4)]
    losses = []
    for step in range(14):
        xb, yb = data[step % 4]
        loss = torch.nn.functional.cross_entropy(model(xb), yb)
        loss.backward()
        opt.step()
        opt.zero_grad()
        torch_xla.sync()
        if WHAT == "keep":
            losses.append(loss)  # PLANTED: every step's loss tensor stays on the device
        else:
            losses.append(loss.item())
    print("steps", len(losses))
