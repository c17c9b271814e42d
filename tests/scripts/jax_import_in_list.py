"""Backend detection from what the program does: this script's only JAX import is `import time, numpy as np, jax`
(the old text match saw no `import jax` line and took it for a torch_xla script). Planted: float(loss) every step.
The first line says whether a framework was loaded before the script's own import (never, under profile)."""
import sys
print("frameworks before the import:", sorted(m for m in ("jax", "torch", "torch_xla") if m in sys.modules))
import time, numpy as np, jax


@jax.jit
def step(params, x):
    loss_fn = lambda p: jax.numpy.mean((jax.numpy.tanh(x @ p["w1"]) @ p["w2"]) ** 2)
    loss, grads = jax.value_and_grad(loss_fn)(params)
    return jax.tree_util.tree_map(lambda p, g: p - 0.01 * g, params, grads), loss


rng = np.random.default_rng(0)
params = jax.device_put({"w1": rng.standard_normal((16, 32)).astype(np.float32),
                         "w2": rng.standard_normal((32, 4)).astype(np.float32)})
x = jax.device_put(rng.standard_normal((8, 16)).astype(np.float32))
t0, total = time.perf_counter(), 0.0
for i in range(8):
    params, loss = step(params, x)
    total += float(loss)  # PLANTED: device_to_host_sync
print("done", total > -1, time.perf_counter() >= t0)
