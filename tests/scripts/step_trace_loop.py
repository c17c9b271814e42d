"""A clean loop annotated with StepTrace/Trace (StepTrace's exit is the sync) and a changing Python lr."""
import torch
import torch_xla
import torch_xla.debug.profiler as xp

dev = torch_xla.device()
model = torch.nn.Linear(16, 4).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(10):
    with xp.StepTrace("train_step", step_num=step):
        with xp.Trace("data"):
            x = torch.randn(8, 16).to(dev)
        with xp.Trace("forward"):
            loss = model(x).pow(2).mean()
        loss.backward()
        for group in opt.param_groups:
            group["lr"] = 0.1 / (step + 2)
        opt.step()
        opt.zero_grad()
