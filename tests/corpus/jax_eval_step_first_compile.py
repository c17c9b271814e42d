"""Flax Linen TrainState loop with a separately jitted `eval_step`, run over a held-out set at the end of each
epoch: its first call compiles it once (a new function, not a recompile of the train step). Clean.

Issue 9, failure 4 (a first eval-step compile called a recompile).
"""
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax.training import train_state


class Classifier(nn.Module):
    @nn.compact
    def __call__(self, x):
        x = x.reshape((x.shape[0], -1))
        x = nn.Dense(features=32)(x)
        x = nn.relu(x)
        return nn.Dense(features=10)(x)


@jax.jit
def train_step(state, batch):
    def loss_fn(params):
        logits = state.apply_fn({"params": params}, batch["image"])
        return optax.softmax_cross_entropy_with_integer_labels(logits, batch["label"]).mean()
    loss, grads = jax.value_and_grad(loss_fn)(state.params)
    return state.apply_gradients(grads=grads), loss


@jax.jit
def eval_step(state, batch):
    logits = state.apply_fn({"params": state.params}, batch["image"])
    return jnp.sum(jnp.argmax(logits, -1) == batch["label"])


def numpy_iterator(rng, n_batches, batch_size):
    for _ in range(n_batches):
        yield {"image": rng.standard_normal((batch_size, 8, 8, 1)).astype(np.float32),
               "label": rng.integers(0, 10, batch_size).astype(np.int32)}


def main(epochs=2, steps_per_epoch=6, eval_batches=2, batch_size=16):
    rng = np.random.default_rng(0)
    model = Classifier()
    params = model.init(jax.random.PRNGKey(0), jnp.ones((1, 8, 8, 1)))["params"]
    state = train_state.TrainState.create(apply_fn=model.apply, params=params, tx=optax.sgd(1e-2, momentum=0.9))
    for epoch in range(epochs):
        for batch in numpy_iterator(rng, steps_per_epoch, batch_size):
            state, loss = train_step(state, batch)
        correct = 0
        for batch in numpy_iterator(rng, eval_batches, batch_size):
            correct += eval_step(state, batch)  # INFO: new_graph
        print(f"epoch {epoch} loss {jax.device_get(loss):.3f} eval acc {int(correct) / (eval_batches * batch_size):.3f}")


if __name__ == "__main__":
    main()
