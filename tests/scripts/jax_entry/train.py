"""The training loop main.py runs: the program's JAX import is here. Planted: float(loss) every step."""
import jax
import numpy as np


@jax.jit
def step(params, x):
    loss_fn = lambda p: jax.numpy.mean((jax.numpy.tanh(x @ p["w1"]) @ p["w2"]) ** 2)
    loss, grads = jax.value_and_grad(loss_fn)(params)
    return jax.tree_util.tree_map(lambda p, g: p - 0.01 * g, params, grads), loss


def main(steps: int) -> int:
    rng = np.random.default_rng(0)
    params = jax.device_put({"w1": rng.standard_normal((16, 32)).astype(np.float32),
                             "w2": rng.standard_normal((32, 4)).astype(np.float32)})
    x = jax.device_put(rng.standard_normal((8, 16)).astype(np.float32))
    total = 0.0
    for _ in range(steps):
        params, loss = step(params, x)
        total += float(loss)  # PLANTED: device_to_host_sync
    print("done", total > -1)
    return 0
