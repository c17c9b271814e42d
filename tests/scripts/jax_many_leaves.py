"""Tiny jitted steps over a parameter tree of many small arrays: dispatching the call dominates each step."""
import jax
import jax.numpy as jnp

params = {f"layer{i}": {"w": jnp.ones((4, 4)), "b": jnp.zeros(4)} for i in range(150)}


@jax.jit
def train_step(params, x):
    loss = lambda p: sum(jnp.sum((x @ l["w"] + l["b"]) ** 2) for l in p.values())
    grads = jax.grad(loss)(params)
    return jax.tree_util.tree_map(lambda p, g: p - 1e-3 * g, params, grads)


x = jnp.ones((2, 4))
for step in range(200):
    params = train_step(params, x)  # PLANTED: launch_bound
print("done", float(params["layer0"]["b"][0]))
