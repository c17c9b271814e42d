"""A torch_xla loop that imports JAX for a utility, `import jax` sorted first (isort): JAX is imported before
torch_xla, and torch_xla is the run's backend (which_backend.py)."""
import jax
import numpy as np
import torch
import torch_xla

seed = int(jax.random.key_data(jax.random.key(0)).sum())  # the utility: a JAX key's bits as a seed (no step)
torch.manual_seed(seed % 1000)
dev = torch_xla.device()
w = torch.randn(8, 8, device=dev)
for _ in range(5):
    w = (w @ w).tanh()
    torch_xla.sync()
print("done", np.isfinite(w.cpu().numpy()).all())
