"""A benchmark-style loop that waits for the device after every step (`xm.wait_device_ops()`): the time blocked
there is the device's, and the step is device-bound."""
import torch
import torch_xla
import torch_xla.core.xla_model as xm

dev = torch_xla.device()
torch.manual_seed(0)
w = torch.randn(768, 768, device=dev) / 28.0
x = torch.randn(768, 768, device=dev)
for step in range(12):
    x = torch.tanh(x @ w)
    torch_xla.sync()
    xm.wait_device_ops()
print("done", round(float(x.abs().mean()), 4))
