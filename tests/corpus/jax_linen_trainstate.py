"""Flax Linen MLP + TrainState + optax.adamw with a warmup-cosine schedule, batches from a NumPy iterator put on the
device by a small prefetch helper, metrics pulled with jax.device_get every 5 steps. Clean.
"""
import collections

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax.training import train_state


class MLP(nn.Module):
    features: tuple = (64, 64, 4)

    @nn.compact
    def __call__(self, x, train: bool = True):
        for f in self.features[:-1]:
            x = nn.gelu(nn.Dense(f)(x))
            x = nn.LayerNorm()(x)
        return nn.Dense(self.features[-1])(x)


def create_state(rng, lr_schedule):
    model = MLP()
    params = model.init(rng, jnp.ones((1, 24)))["params"]
    return train_state.TrainState.create(apply_fn=model.apply, params=params, tx=optax.adamw(lr_schedule))


@jax.jit
def train_step(state, batch):
    def loss_fn(params):
        logits = state.apply_fn({"params": params}, batch["x"])
        return optax.softmax_cross_entropy_with_integer_labels(logits, batch["y"]).mean(), logits
    (loss, logits), grads = jax.value_and_grad(loss_fn, has_aux=True)(state.params)
    metrics = {"loss": loss, "accuracy": jnp.mean(jnp.argmax(logits, -1) == batch["y"])}
    return state.apply_gradients(grads=grads), metrics


def prefetch_to_device(iterator, size=2):
    queue = collections.deque()
    for batch in iterator:
        queue.append(jax.device_put(batch))
        if len(queue) == size:
            yield queue.popleft()
    while queue:
        yield queue.popleft()


def data_iterator(seed, steps, batch_size=32):
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        x = rng.standard_normal((batch_size, 24)).astype(np.float32)
        yield {"x": x, "y": (x[:, :4].argmax(-1)).astype(np.int32)}


def main(steps=20, log_every=5):
    schedule = optax.warmup_cosine_decay_schedule(0.0, 3e-3, warmup_steps=4, decay_steps=steps)
    state = create_state(jax.random.PRNGKey(0), schedule)
    history = []
    for step, batch in enumerate(prefetch_to_device(data_iterator(0, steps))):
        state, metrics = train_step(state, batch)
        if (step + 1) % log_every == 0:
            metrics = jax.device_get(metrics)  # INFO: device_to_host_sync
            history.append(metrics)
            print(f"step {step + 1}: loss {metrics['loss']:.3f} acc {metrics['accuracy']:.3f}")


if __name__ == "__main__":
    main()
