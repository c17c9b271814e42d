"""Flax's MNIST example shape, tiny: each iteration makes two jitted calls, `grads = apply_model(...)` then
`state = update_model(state, grads)`; after each epoch `apply_model` runs once more on the test set. Every
iteration is one training step with two phases (not a training step plus an evaluation)."""
import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import linen as nn
from flax.training import train_state


class MLP(nn.Module):
    @nn.compact
    def __call__(self, x):
        x = nn.relu(nn.Dense(32)(x))
        return nn.Dense(10)(x)


@jax.jit
def apply_model(state, images, labels):
    def loss_fn(params):
        logits = state.apply_fn({"params": params}, images)
        loss = optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()
        return loss, logits
    (loss, logits), grads = jax.value_and_grad(loss_fn, has_aux=True)(state.params)
    accuracy = jnp.mean(jnp.argmax(logits, -1) == labels)
    return grads, loss, accuracy


@jax.jit
def update_model(state, grads):
    return state.apply_gradients(grads=grads)


def train_epoch(state, train_x, train_y, batch_size, rng):
    perms = rng.permutation(len(train_x))[: len(train_x) // batch_size * batch_size].reshape(-1, batch_size)
    losses = []
    for perm in perms:
        grads, loss, accuracy = apply_model(state, train_x[perm], train_y[perm])
        state = update_model(state, grads)
        losses.append(loss)
    return state, float(np.mean(jax.device_get(losses)))


rng = np.random.default_rng(0)
train_x = rng.standard_normal((96, 16)).astype(np.float32)
train_y = rng.integers(0, 10, 96).astype(np.int32)
test_x = rng.standard_normal((32, 16)).astype(np.float32)
test_y = rng.integers(0, 10, 32).astype(np.int32)
model = MLP()
params = model.init(jax.random.PRNGKey(0), jnp.ones((1, 16)))["params"]
state = train_state.TrainState.create(apply_fn=model.apply, params=params, tx=optax.sgd(0.1, 0.9))
for epoch in range(2):
    state, train_loss = train_epoch(state, train_x, train_y, 16, rng)
    _, test_loss, test_accuracy = apply_model(state, test_x, test_y)
    print(f"epoch {epoch}: train loss {train_loss:.3f}, test loss {float(test_loss):.3f}")
