"""jax.distributed.initialize() must come before anything starts a JAX backend (e.g. a profiler server)."""
import sys

import jax
import jax.numpy as jnp

jax.distributed.initialize(coordinator_address=f"localhost:{sys.argv[1]}", num_processes=1, process_id=0)
step = jax.jit(lambda w, x: w - 0.1 * x.mean() * w)
w = jnp.ones(4)
for i in range(6):
    w = step(w, jnp.ones(4))
print("done", jax.process_count(), float(w[0]) < 1)
