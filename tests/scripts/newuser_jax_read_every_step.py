"""The new user's first loop under JAX: the loss is read to the host (`float(loss)`) on every one of 30 steps."""
import jax
import jax.numpy as jnp


@jax.jit
def step(w, x):
    loss, g = jax.value_and_grad(lambda w: jnp.mean(jnp.abs(jnp.tanh(x @ w) - 1.0)))(w)
    return w - 0.05 * g, loss


w = jnp.ones((8, 1)) * 0.1
key = jax.random.PRNGKey(0)
logged = []
for i in range(30):
    key, sub = jax.random.split(key)
    w, loss = step(w, jax.random.normal(sub, (6, 8)))
    logged.append(float(loss))  # the mistake: a device-to-host read each step
print("last loss", round(logged[-1], 3) > -1)
