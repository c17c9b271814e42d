"""Clean twin of jax_host_noise.py: NumPy batches from a loader are the only host data (the input pipeline,
expected: info, never a warning); the noise is drawn on the device with jax.random."""
import jax
import jax.numpy as jnp
import numpy as np


@jax.jit
def train_step(w, x, key):
    key, sub = jax.random.split(key)
    noise = jax.random.normal(sub, x.shape)
    def loss_fn(w):
        return jnp.mean((jnp.tanh((x + 0.1 * noise) @ w) - x @ w) ** 2)
    loss, g = jax.value_and_grad(loss_fn)(w)
    return w - 0.05 * g, loss, key


def loader(rng, n):
    for _ in range(n):
        yield rng.standard_normal((16, 64)).astype(np.float32)


w = jax.device_put(np.eye(64, dtype=np.float32))
key = jax.random.PRNGKey(0)
for x in loader(np.random.default_rng(0), 10):
    batch = jnp.asarray(x)  # the batch uploaded eagerly: data
    w, loss, key = train_step(w, batch, key)
print("loss", round(float(loss), 4))
