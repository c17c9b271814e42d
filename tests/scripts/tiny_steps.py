"""Planted problem: many tiny steps, one small elementwise update per sync: launching each graph costs more than
the work in it."""
import torch
import torch_xla

dev = torch_xla.device()
state = torch.zeros(8, device=dev)
for step in range(300):
    state = state * 0.5 + 1.0
    torch_xla.sync()  # PLANTED: launch_bound
print("done", round(float(state[0]), 3))
