"""Small jitted steps fed NumPy batches every call (a data set held in host memory, its batches reused each
epoch), in each way JAX users jit a step: jax.jit, jit with a static argument, nnx.jit, pmap, shard_map. argv[1]:
a JSON path. For each, after 5 warm-up calls, the script counts JAX's C++ dispatch cache misses (a call that left
the C++ fast path for the Python one) over 40 steady calls and writes {style: {"misses", "calls", "probe"}} (probe:
the misses of one call with a new batch shape, which must be one: the counter counts)."""
import json
import sys
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jax._src import test_util as jtu
from jax.sharding import Mesh, PartitionSpec as P

out = sys.argv[1]
rng = np.random.default_rng(0)
n_dev = jax.local_device_count()
mesh = Mesh(np.array(jax.devices()), ("data",))


def init():
    return {f"layer{i}": {"w": jnp.full((8, 8), 0.01), "b": jnp.zeros(8)} for i in range(20)}


def loss_fn(p, x, y):
    h = x
    for layer in p.values():
        h = jnp.tanh(h @ layer["w"] + layer["b"])
    return jnp.mean((h - y) ** 2)


def update(p, x, y, lr=0.1):
    loss, g = jax.value_and_grad(loss_fn)(p, x, y)
    return jax.tree_util.tree_map(lambda a, b: a - lr * b, p, g), loss


@jax.jit
@partial(jax.shard_map, mesh=mesh, in_specs=(P(), P("data"), P("data")), out_specs=(P(), P()))
def sharded_step(p, x, y):
    p, loss = update(p, x, y)
    return p, jax.lax.pmean(loss, "data")


class MLP(nnx.Module):
    def __init__(self, rngs):
        self.layers = nnx.List([nnx.Linear(8, 8, rngs=rngs) for _ in range(20)])

    def __call__(self, x):
        for layer in self.layers:
            x = jnp.tanh(layer(x))
        return x


@nnx.jit
def nnx_step(model, x, y):
    loss, g = nnx.value_and_grad(lambda m: jnp.mean((m(x) - y) ** 2))(model)
    nnx.update(model, jax.tree_util.tree_map(lambda a, b: a - 0.1 * b, nnx.state(model, nnx.Param), g))
    return loss


def style(name):
    """The step of one style, its state, and its batch shape."""
    if name == "pmap":
        return jax.pmap(update), jax.tree_util.tree_map(lambda a: jnp.stack([a] * n_dev), init()), (n_dev, 8, 8)
    if name == "nnx":
        model = MLP(nnx.Rngs(0))
        return (lambda p, x, y: (p, nnx_step(model, x, y))), None, (8 * n_dev, 8)
    step = {"jit": jax.jit(update), "static": partial(jax.jit(update, static_argnames=("lr",)), lr=0.1),
            "shard_map": sharded_step}[name]
    return step, init(), (8 * n_dev, 8)


results = {}
for name in ("jit", "static", "nnx", "pmap", "shard_map"):
    step, params, shape = style(name)
    data = [(rng.standard_normal(shape, dtype=np.float32), rng.standard_normal(shape, dtype=np.float32))
            for _ in range(8)]
    counting = jtu.count_pjit_cpp_cache_miss()
    for i in range(45):
        if i == 5:  # warmed up: count the steady calls
            misses = counting.__enter__()
        params, loss = step(params, *data[i % len(data)])
        if i % 20 == 0:
            print(f"{name} call {i} loss {np.asarray(loss).mean():.6f}")
    count = misses()
    counting.__exit__(None, None, None)
    with jtu.count_pjit_cpp_cache_miss() as probe:  # a new batch shape: one miss
        odd = data[0][0][..., :4, :]
        step(params, odd, odd)
    results[name] = {"misses": count, "calls": 40, "probe": probe()}
with open(out, "w") as f:
    json.dump(results, f)
