"""The step function reached as a module's attribute (`T.train_step`, jitted in another module), called 3 times
in a warm-up loop and then 30 times in the timed loop that reads the loss every 10 steps (issue 36)."""
import jax
import numpy as np

import jax_step_module as T

rng = np.random.default_rng(0)
w = jax.device_put(rng.standard_normal((16, 4)).astype(np.float32))
x = jax.device_put(rng.standard_normal((8, 16)).astype(np.float32))
for _ in range(3):
    w, loss = T.train_step(w, x)  # WARMUP
jax.block_until_ready(w)
for i in range(30):
    w, loss = T.train_step(w, x)  # MAIN
    if i % 10 == 0:
        print(i, float(loss))
print("done")
