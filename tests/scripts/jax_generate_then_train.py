"""A tiny character model in the NNX style of the Flax tutorials: the untrained model generates a few tokens first
(a jitted `generate_step` fed its own output, parameters unchanged), then `train_step` (nnx.jit) trains it for 12
steps. The step function is the training step, whose calls change the parameters; generation is not a step."""
import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

VOCAB, CTX = 16, 8


class CharModel(nnx.Module):
    def __init__(self, rngs):
        self.embed = nnx.Embed(VOCAB, 32, rngs=rngs)
        self.out = nnx.Linear(32 * CTX, VOCAB, rngs=rngs)

    def __call__(self, tokens):
        h = self.embed(tokens)
        return self.out(h.reshape(h.shape[0], -1))


@nnx.jit
def generate_step(model, tokens):
    nxt = jnp.argmax(model(tokens[:, -CTX:]), axis=-1)
    return jnp.concatenate([tokens[:, 1:], nxt[:, None]], axis=1)


@nnx.jit
def train_step(model, optimizer, tokens, targets):
    def loss_fn(model):
        return optax.softmax_cross_entropy_with_integer_labels(model(tokens), targets).mean()
    loss, grads = nnx.value_and_grad(loss_fn)(model)
    optimizer.update(model, grads)
    return loss


model = CharModel(nnx.Rngs(0))
optimizer = nnx.Optimizer(model, optax.adam(1e-2), wrt=nnx.Param)
tokens = jnp.zeros((1, CTX), jnp.int32)
for _ in range(4):
    tokens = generate_step(model, tokens)
print("sample before training:", np.asarray(tokens)[0].tolist())

rng = np.random.default_rng(0)
data = jax.device_put(rng.integers(0, VOCAB, (12, 4, CTX + 1)).astype(np.int32))
for step in range(12):
    batch = data[step]
    loss = train_step(model, optimizer, batch[:, :-1], batch[:, -1])
print("loss", round(float(loss), 3))
