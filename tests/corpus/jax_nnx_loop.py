"""Flax NNX: a small MLP, nnx.Optimizer with optax, a jitted train step over batches from a NumPy iterator, and
nnx.MultiMetric averages read once per epoch. Clean.
"""
import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx


class MLP(nnx.Module):
    def __init__(self, din, dhidden, dout, *, rngs: nnx.Rngs):
        self.linear1 = nnx.Linear(din, dhidden, rngs=rngs)
        self.dropout = nnx.Dropout(0.1, rngs=rngs)
        self.linear2 = nnx.Linear(dhidden, dout, rngs=rngs)

    def __call__(self, x):
        return self.linear2(self.dropout(nnx.relu(self.linear1(x))))


def loss_fn(model, batch):
    logits = model(batch["x"])
    return optax.softmax_cross_entropy_with_integer_labels(logits, batch["y"]).mean(), logits


@nnx.jit
def train_step(model, optimizer, metrics, batch):
    grad_fn = nnx.value_and_grad(loss_fn, has_aux=True)
    (loss, logits), grads = grad_fn(model, batch)
    metrics.update(loss=loss, logits=logits, labels=batch["y"])
    optimizer.update(model, grads)


def numpy_batches(rng, steps, batch_size=32):
    for _ in range(steps):
        x = rng.standard_normal((batch_size, 20)).astype(np.float32)
        yield {"x": x, "y": (x.sum(-1) > 0).astype(np.int32)}


def main(epochs=2, steps_per_epoch=10):
    rng = np.random.default_rng(0)
    model = MLP(20, 32, 2, rngs=nnx.Rngs(0))
    optimizer = nnx.Optimizer(model, optax.adamw(1e-3), wrt=nnx.Param)
    metrics = nnx.MultiMetric(accuracy=nnx.metrics.Accuracy(), loss=nnx.metrics.Average("loss"))
    for epoch in range(epochs):
        model.train()
        for batch in numpy_batches(rng, steps_per_epoch):
            train_step(model, optimizer, metrics, batch)
        stats = {k: float(v) for k, v in metrics.compute().items()}  # INFO: device_to_host_sync
        metrics.reset()
        print(f"epoch {epoch}: loss {stats['loss']:.3f} accuracy {stats['accuracy']:.3f}")


if __name__ == "__main__":
    main()
