"""A JAX loop in the style of many training examples: per-step metrics gathered in a `defaultdict(list)`, appended
with the step's device scalars (loss, accuracy) and never read back during the loop. argv[1]: dict (a local
`defaultdict(list)`; the line marked PLANTED adds to it) | attr (the same dict held by a `History` dataclass that
the loop's `history.log(...)` fills, at the line marked LOGGED). The live arrays grow by 2 per step, 8 bytes: a
growth worth an `info`. argv[2] == "weights": each step's weights (64x32 float32, 8 KiB) are logged too, a
growth that fills gigabytes in a long run: a warning."""
import sys
from collections import defaultdict
from dataclasses import dataclass, field

import jax
import jax.numpy as jnp
import numpy as np

MODE = sys.argv[1] if len(sys.argv) > 1 else "dict"
WEIGHTS = sys.argv[2:] == ["weights"]


@dataclass
class History:
    metrics: dict = field(default_factory=lambda: defaultdict(list))

    def log(self, **values):
        for name, value in values.items():
            self.metrics[name].append(value)  # LOGGED: kept as device arrays


@jax.jit
def train_step(w, x, y):
    def loss_fn(w):
        logits = x @ w
        return jnp.mean((logits - y) ** 2), logits
    (loss, logits), g = jax.value_and_grad(loss_fn, has_aux=True)(w)
    acc = jnp.mean((logits > 0) == (y > 0))
    return w - 0.1 * g, loss, acc


def main():
    rng = np.random.default_rng(0)
    w = jnp.asarray(rng.standard_normal((64, 32)).astype(np.float32) * 0.1)
    x = jnp.asarray(rng.standard_normal((4096, 64)).astype(np.float32))
    y = jnp.asarray(rng.standard_normal((4096, 32)).astype(np.float32))
    history = History()
    metrics = defaultdict(list)
    # live arrays are counted at least every 64 steps however long a count takes against a step (backends/jax/
    # memory.py), and memory_growth needs 4 rises in a row after a first sample, then a boundary to find the holder:
    # 520 steps give 8 samples whatever the machine's load (160 gave 3 at times; 330, 5-6, missed it once at load ~5)
    for step in range(520):
        w, loss, acc = train_step(w, x, y)
        w.block_until_ready()  # each step waits for its weights (as loops that time their steps do)
        logged = {"loss": loss, "acc": acc, **({"w": w} if WEIGHTS else {})}
        if MODE == "attr":
            history.log(**logged)
            continue
        for name, value in logged.items():
            metrics[name].append(value)  # PLANTED: every step's device scalars stay alive in the dict's lists
    kept = history.metrics if MODE == "attr" else metrics
    print("mean loss", float(jnp.mean(jnp.stack(kept["loss"]))))


if __name__ == "__main__":
    main()
