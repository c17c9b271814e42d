"""A JAX loop that imports torch_xla after its jitted steps ran (fewer than the 16 calls that decide the step
function, so no boundary is out yet): JAX stays the run's backend (which_backend.py)."""
import jax
import numpy as np

step = jax.jit(lambda w, x: (w - 0.01 * x, (w * x).sum()))
w, x = jax.device_put(np.ones((8, 8), np.float32)), jax.device_put(np.full((8, 8), 0.5, np.float32))
for _ in range(5):
    w, loss = step(w, x)
    print("loss", float(loss) > 0)

import torch_xla  # noqa: E402 - late, for an export utility

print("done", torch_xla.__name__)
