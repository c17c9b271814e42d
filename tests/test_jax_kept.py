"""What a profiled JAX step keeps (issue 36): every object a step's record holds that Python's garbage collector
tracks makes a long run's full collections come sooner (one full collection of a JAX process: ~0.2 s). A steady
numpy-fed step keeps its record, its events list, its one transfer event and that event's evidence; what is equal
to the step before (the transfer counts, the shapes, the empty lists) is shared (records.Shared); a step on
device-resident data keeps its record alone."""
from __future__ import annotations

import copy
import gc
import json
import pickle
import statistics

import pytest

from ptxla_perf.model import records as R

# numpy-fed: the record, its events list, the transfer event, its evidence (13 before sharing); device-fed: the
# record alone (7 before)
KEPT_PER_STEP = {"numpy": 4, "device": 1}


def _reachable(rec) -> set[int]:
    """The gc-tracked objects a record holds: through containers and the records module's own classes only."""
    seen: dict[int, object] = {}
    todo = [rec]
    while todo:
        o = todo.pop()
        if id(o) in seen or not gc.is_tracked(o):
            continue
        seen[id(o)] = o
        if isinstance(o, (list, tuple, dict)) or type(o).__module__ == R.__name__:
            todo.extend(gc.get_referents(o))
    return set(seen)


@pytest.mark.parametrize("fed", sorted(KEPT_PER_STEP))
def test_a_steady_step_keeps_only_its_own_record(tmp_path, fed):
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp
    import numpy as np

    from ptxla_perf.session import Session
    s = Session("jax", report_path=str(tmp_path / "r.json"), port=None, console=False, handle_signals=False)
    s.start()
    try:
        step = jax.jit(lambda w, x: (w - 1e-3 * jax.grad(lambda w: jnp.sum((x @ w) ** 2))(w)))
        w = jnp.ones((4, 2))
        rng = np.random.default_rng(0)
        batches = [rng.standard_normal((8, 4)).astype(np.float32) for _ in range(40)]
        if fed == "device":
            batches = [jax.device_put(b) for b in batches]
        for b in batches:
            w = step(w, b)  # numpy-fed: a fresh host batch each step, a transfer event
        records = list(s.steps)
    finally:
        s.finish()
    assert len(records) >= 30
    gc.collect()  # tuples of numbers are untracked by a collection: what is left is what the records keep
    steady = records[10:30]
    new = [len(_reachable(b) - _reachable(a)) for a, b in zip(steady, steady[1:])]
    assert statistics.median(new) <= KEPT_PER_STEP[fed], new
    kinds = {tuple(e.kind for e in r.events) for r in steady}
    assert kinds == ({("host_to_device_transfer",)} if fed == "numpy" else {()}), kinds


def test_shared_list_is_a_list_that_cannot_change():
    shapes = R.shared([[8, 4]], None)
    assert R.shared([[8, 4]], shapes) is shapes and R.shared([[8, 2]], shapes) is not shapes
    assert shapes == [[8, 4]] and isinstance(shapes, list) and json.dumps(shapes) == "[[8, 4]]"
    for change in (lambda: shapes.append(1), lambda: shapes.__setitem__(0, 1), lambda: shapes.sort(),
                   lambda: shapes.__iadd__([1]), lambda: shapes.clear()):
        with pytest.raises(TypeError):
            change()
    assert copy.deepcopy(shapes) == pickle.loads(pickle.dumps(shapes)) == [[8, 4]]
    rec = R.StepRecord(index=0, wall_time_s=0.1, graph_hashes=R.EMPTY, boundaries=R.EMPTY, hot_lines=R.EMPTY)
    assert rec.to_json() == R.StepRecord(index=0, wall_time_s=0.1).to_json()
