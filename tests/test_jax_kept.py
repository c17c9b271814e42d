"""What a profiled JAX step keeps (issue 36): every object a step's record holds that Python's garbage collector
tracks makes a long run's full collections come sooner (one full collection of a JAX process: ~0.2 s). A steady
numpy-fed step keeps its record, its events list, its one transfer event and that event's evidence; what is equal
to the step before (the transfer counts, the shapes, the empty lists) is shared (records.Shared)."""
from __future__ import annotations

import copy
import gc
import json
import pickle
import statistics

import pytest

from ptxla_perf.model import records as R

KEPT_PER_STEP = 4  # the record, its events list, the transfer event, its evidence (14 before sharing)


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


def test_a_steady_numpy_fed_step_keeps_four_tracked_objects(tmp_path):
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
        for _ in range(40):
            w = step(w, rng.standard_normal((8, 4)).astype(np.float32))  # a fresh host batch: a transfer event
        records = list(s.steps)
    finally:
        s.finish()
    assert len(records) >= 30
    gc.collect()  # tuples of numbers are untracked by a collection: what is left is what the records keep
    steady = records[10:30]
    new = [len(_reachable(b) - _reachable(a)) for a, b in zip(steady, steady[1:])]
    assert statistics.median(new) <= KEPT_PER_STEP, new
    assert all(r.events and r.events[0].kind == "host_to_device_transfer" for r in steady)


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
