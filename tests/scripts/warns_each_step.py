"""A small torch_xla loop whose own code warns on every step (a deprecated helper, as real code often does):
Python prints it once per line. Under `profile` the output must be the same, once, and `__file__` the same."""
import warnings

import torch
import torch_xla
import torch_xla.core.xla_model as xm


def scale(x):
    warnings.warn("scale() is deprecated; use x * 2", DeprecationWarning, stacklevel=2)
    return x * 2


def main(steps=8):
    print("file", __file__)
    device = torch_xla.device()
    model = torch.nn.Linear(4, 2).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(8, 4, device=device)
    for _ in range(steps):
        opt.zero_grad()
        loss = scale(model(x)).pow(2).mean()
        loss.backward()
        opt.step()
        xm.mark_step()
    print("done")


if __name__ == "__main__":
    main()
