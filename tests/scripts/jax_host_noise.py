"""Planted problems: values the loop makes on the host each step. A denoising step gets its noise from
`np.random.normal` (drawn on the host, copied in: avoidable, draw it with jax.random), and a schedule is built as a
Python list and uploaded eagerly with `jnp.array` outside any jitted function. The NumPy batches are data."""
import jax
import jax.numpy as jnp
import numpy as np


@jax.jit
def train_step(w, x, noise, hparams):
    lr, sigma = hparams[0], hparams[1]
    def loss_fn(w):
        return jnp.mean((jnp.tanh((x + sigma * noise) @ w) - x @ w) ** 2)
    loss, g = jax.value_and_grad(loss_fn)(w)
    return w - lr * g, loss


rng = np.random.default_rng(0)
w = jax.device_put(np.eye(64, dtype=np.float32))
batches = [rng.standard_normal((16, 64)).astype(np.float32) for _ in range(3)]
base_lr = 0.05
for i in range(10):
    x = batches[i % 3]
    noise = np.random.normal(size=x.shape).astype(np.float32)
    hparams = jnp.array([base_lr * 0.97 ** i, 0.1])  # PLANTED-2: host_to_device_transfer (eager upload of a list)
    w, loss = train_step(w, x, noise, hparams)  # PLANTED: host_to_device_transfer (host-drawn noise)
print("loss", round(float(loss), 4))
