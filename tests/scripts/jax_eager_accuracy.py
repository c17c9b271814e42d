"""Healthy JAX loop in the from-scratch MNIST style: `update` is jitted, `accuracy` is plain jnp ops called on
the whole train and test sets after each epoch. Its eager ops compile on first use (tens of them), then are cached:
never a reason to stop the run, never a warning."""
import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax import grad, jit


def init_params(rng, sizes):
    return [(0.1 * rng.standard_normal((m, n)).astype(np.float32), np.zeros(n, np.float32))
            for m, n in zip(sizes[:-1], sizes[1:])]


def predict(params, x):
    for w, b in params[:-1]:
        x = jnp.tanh(x @ w + b)
    w, b = params[-1]
    logits = x @ w + b
    return logits - jax.nn.logsumexp(logits, axis=1, keepdims=True)


def loss(params, batch):
    x, y = batch
    return -jnp.mean(jnp.sum(predict(params, x) * y, axis=1))


def accuracy(params, batch):  # not jitted: every op dispatches (and compiles once) eagerly
    x, y = batch
    target = jnp.argmax(y, axis=1)
    predicted = jnp.argmax(predict(params, x), axis=1)
    return jnp.mean(predicted == target)


@jit
def update(params, batch):
    grads = grad(loss)(params, batch)
    return [(w - 0.05 * dw, b - 0.05 * db) for (w, b), (dw, db) in zip(params, grads)]


rng = np.random.default_rng(0)
train_x = rng.standard_normal((256, 64)).astype(np.float32)
train_y = np.eye(10, dtype=np.float32)[rng.integers(0, 10, 256)]
test_x = rng.standard_normal((128, 64)).astype(np.float32)
test_y = np.eye(10, dtype=np.float32)[rng.integers(0, 10, 128)]
params = jax.device_put(init_params(rng, [64, 128, 64, 10]))
batches = [jax.device_put((train_x[i:i + 32], train_y[i:i + 32])) for i in range(0, 256, 32)]

for epoch in range(3):
    for batch in batches:
        params = update(params, batch)
    train_acc = accuracy(params, (train_x, train_y))
    test_acc = accuracy(params, (test_x, test_y))
    print(f"Epoch {epoch}: train accuracy {float(train_acc):.3f}, test accuracy {float(test_acc):.3f}")
sys.exit(0)
