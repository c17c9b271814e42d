"""Small jitted steps fed NumPy batches every call (a data set held in host memory, its batches reused each epoch), each way JAX users jit one (argv[1]: jit, static, nnx, pmap,
shard_map); argv[2]: a JSON path. After 5 warm-up calls, the script counts JAX's C++ dispatch cache misses
(a call that left the C++ fast path for the Python one) over 40 steady calls and writes {"misses", "calls", "probe"} (probe: the misses of one call with a new batch shape,
which must be one: the counter works)."""
import json
import sys
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from jax._src import test_util as jtu

mode, out = sys.argv[1], sys.argv[2]
rng = np.random.default_rng(0)
n_dev = jax.local_device_count()
params = {f"layer{i}": {"w": jnp.full((8, 8), 0.01), "b": jnp.zeros(8)} for i in range(20)}


def loss_fn(p, x, y):
    h = x
    for layer in p.values():
        h = jnp.tanh(h @ layer["w"] + layer["b"])
    return jnp.mean((h - y) ** 2)


def update(p, x, y, lr=0.1):
    loss, g = jax.value_and_grad(loss_fn)(p, x, y)
    return jax.tree_util.tree_map(lambda a, b: a - lr * b, p, g), loss


if mode == "jit":
    step = jax.jit(update)
elif mode == "static":
    step = jax.jit(update, static_argnames=("lr",))
elif mode == "pmap":
    params = jax.tree_util.tree_map(lambda a: jnp.stack([a] * n_dev), params)  # one copy per device
    step = jax.pmap(update)
elif mode == "shard_map":
    from jax.sharding import Mesh, PartitionSpec as P
    mesh = Mesh(np.array(jax.devices()), ("data",))

    @jax.jit
    @partial(jax.shard_map, mesh=mesh, in_specs=(P(), P("data"), P("data")), out_specs=(P(), P()))
    def step(p, x, y):
        p, loss = update(p, x, y)
        return p, jax.lax.pmean(loss, "data")
elif mode == "nnx":
    from flax import nnx

    class MLP(nnx.Module):
        def __init__(self, rngs):
            self.layers = nnx.List([nnx.Linear(8, 8, rngs=rngs) for _ in range(20)])

        def __call__(self, x):
            for layer in self.layers:
                x = jnp.tanh(layer(x))
            return x

    model = MLP(nnx.Rngs(0))

    @nnx.jit
    def nnx_step(model, x, y):
        loss, g = nnx.value_and_grad(lambda m: jnp.mean((m(x) - y) ** 2))(model)
        nnx.update(model, jax.tree_util.tree_map(lambda a, b: a - 0.1 * b, nnx.state(model, nnx.Param), g))
        return loss


shape = (n_dev, 8, 8) if mode == "pmap" else (8 * n_dev, 8)
data = [(rng.standard_normal(shape, dtype=np.float32), rng.standard_normal(shape, dtype=np.float32))
        for _ in range(8)]
if mode == "nnx":
    step = lambda p, x, y: (p, nnx_step(model, x, y))  # noqa: E731 - the model's state lives in `model`
elif mode == "static":
    step = partial(step, lr=0.1)

counting = jtu.count_pjit_cpp_cache_miss()
for i in range(45):
    if i == 5:  # warmed up: count the steady calls
        misses = counting.__enter__()
    params, loss = step(params, *data[i % len(data)])
    if i % 10 == 0:
        print(f"call {i} loss {np.asarray(loss).mean():.6f}")
count = misses()
counting.__exit__(None, None, None)
with jtu.count_pjit_cpp_cache_miss() as probe:  # the counter is live: a new batch shape is one miss
    odd = data[0][0][..., :4, :]
    step(params, odd, odd)
with open(out, "w") as f:
    json.dump({"misses": count, "calls": 40, "probe": probe()}, f)
