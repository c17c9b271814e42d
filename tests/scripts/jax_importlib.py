"""Backend detection from what the program does: JAX imported by `importlib.import_module` (no import statement
names it). Planted: float(loss) every step."""
import importlib

import numpy as np

jax = importlib.import_module("jax")
step = jax.jit(lambda w, x: (w - 0.01 * x, (w * x).sum()))
w, x = jax.device_put(np.ones((8, 8), np.float32)), jax.device_put(np.full((8, 8), 0.5, np.float32))
total = 0.0
for _ in range(6):
    w, loss = step(w, x)
    total += float(loss)  # PLANTED: device_to_host_sync
print("done", total > 0)
