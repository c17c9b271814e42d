"""Flax-example-style MNIST MLP: a jitted `update` over NumPy batches (the last batch of the epoch is smaller, so
`update` compiles once more for it), and a non-jitted `accuracy()` over the whole epoch at its end (each jnp op in
it compiles once on first use). Nothing here costs time every step: the expected findings are infos.

Issue 9, failure 4 (first eager compiles called recompiles; the real recompile of `update` not reported).
"""
import jax
import jax.numpy as jnp
import numpy as np
import optax


def init_mlp(key, sizes=(64, 32, 10)):
    params = []
    for k, (m, n) in zip(jax.random.split(key, len(sizes) - 1), zip(sizes[:-1], sizes[1:])):
        params.append((jax.random.normal(k, (m, n)) * jnp.sqrt(2.0 / m), jnp.zeros(n)))
    return params


def predict(params, x):
    for w, b in params[:-1]:
        x = jax.nn.relu(x @ w + b)  # ALSO-LINE: eager_compile
    w, b = params[-1]
    return x @ w + b  # ALSO-LINE: eager_compile


def loss_fn(params, x, y):
    return optax.softmax_cross_entropy_with_integer_labels(predict(params, x), y).mean()


optimizer = optax.sgd(0.05, momentum=0.9)


@jax.jit
def update(params, opt_state, x, y):
    loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
    updates, opt_state = optimizer.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss


def accuracy(params, x, y):
    return jnp.mean(jnp.argmax(predict(params, x), axis=1) == y)  # ALSO-LINE: eager_compile


def batches(x, y, batch_size):
    for i in range(0, len(x), batch_size):
        yield x[i:i + batch_size], y[i:i + batch_size]


def main(epochs=1, batch_size=32, n=32 * 8 + 12):
    rng = np.random.default_rng(0)
    x_train = rng.standard_normal((n, 64)).astype(np.float32)
    y_train = rng.integers(0, 10, n)
    params = init_mlp(jax.random.PRNGKey(0))
    opt_state = optimizer.init(params)
    for epoch in range(epochs):
        for x, y in batches(x_train, y_train, batch_size):
            params, opt_state, loss = update(params, opt_state, x, y)  # INFO: recompilation
        acc = accuracy(params, x_train, y_train)  # INFO: eager_compile
        print(f"epoch {epoch} train acc {float(acc):.3f} last loss {float(loss):.3f}")


if __name__ == "__main__":
    main()
