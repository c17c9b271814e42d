"""A Flax Linen classifier with dropout, trained through a `TrainState` whose step counter starts as a Python int,
with train and eval functions jitted from one `apply` via `functools.partial(..., train=True/False)`. After each
epoch an eval pass over 3 batches accumulates the loss and accuracy on the device, and both are read once, after
the pass. Clean: eval's first compile is a new function (not a recompile of training), the per-pass reads are
not per-step costs, and the Python-int step that becomes a device scalar after the first update does not
recompile.
"""
import functools

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax.training import train_state


class MLP(nn.Module):
    @nn.compact
    def __call__(self, x, train: bool):
        x = nn.Dense(32)(x)
        x = nn.relu(x)
        x = nn.Dropout(0.2, deterministic=not train)(x)
        return nn.Dense(4)(x)


def forward(state, params, batch, rng, train):
    logits = state.apply_fn({"params": params}, batch["x"], train=train, rngs={"dropout": rng})
    loss = optax.softmax_cross_entropy_with_integer_labels(logits, batch["y"]).mean()
    return loss, logits


def step(state, batch, rng, train):
    if train:
        (loss, _), grads = jax.value_and_grad(forward, argnums=1, has_aux=True)(state, state.params, batch, rng, True)
        return state.apply_gradients(grads=grads), loss
    loss, logits = forward(state, state.params, batch, rng, False)
    return loss, jnp.sum(jnp.argmax(logits, -1) == batch["y"])


train_step = jax.jit(functools.partial(step, train=True))
eval_step = jax.jit(functools.partial(step, train=False))


def loader(rng, n, batch_size=24):
    for _ in range(n):
        x = rng.standard_normal((batch_size, 10)).astype(np.float32)
        yield {"x": jax.device_put(x), "y": jax.device_put((x[:, :4].argmax(-1)).astype(np.int32))}


def main(epochs=3, steps_per_epoch=5, eval_batches=3):
    data_rng = np.random.default_rng(0)
    key = jax.random.PRNGKey(0)
    model = MLP()
    params = model.init(key, jnp.ones((1, 10)), train=False)["params"]
    state = train_state.TrainState.create(apply_fn=model.apply, params=params, tx=optax.adamw(3e-3))
    for epoch in range(epochs):
        for batch in loader(data_rng, steps_per_epoch):
            key, sub = jax.random.split(key)
            state, loss = train_step(state, batch, sub)
        total_loss, correct = 0.0, 0
        for batch in loader(data_rng, eval_batches):
            loss, hits = eval_step(state, batch, key)  # INFO: new_graph
            total_loss, correct = total_loss + loss, correct + hits
        print(f"epoch {epoch} eval loss {float(total_loss) / eval_batches:.3f} "  # INFO: device_to_host_sync
              f"acc {int(correct) / (24 * eval_batches):.3f}")


if __name__ == "__main__":
    main()
