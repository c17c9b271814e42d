"""What a profiled JAX step keeps (issue 36): every object a step's record holds that Python's garbage collector
tracks makes a long run's full collections come sooner (one full collection of a JAX process: ~0.1-0.2 s). A steady
step keeps its record alone: what is equal to the step before is shared (records.Shared) - the transfer counts, the
empty lists, and a numpy-fed step's events list, its transfer event and that event's evidence (the adapter finds
the call the same as the one before: transfers._steady)."""
from __future__ import annotations

import copy
import gc
import json
import pickle
import statistics

import pytest

from ptxla_perf.model import records as R

# the record alone: numpy-fed 13 before sharing the counts and the empty lists, 4 before sharing the events; device-fed
# 7 before
KEPT_PER_STEP = {"numpy": 1, "device": 1, "numpy, a read every step": 1}


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
        total = 0.0
        for b in batches:
            w = step(w, b)  # numpy-fed: a fresh host batch each step, a transfer event
            if "read" in fed:
                total += float(w[0, 0])  # a read event every step (4 kept objects a step before sharing it)
        records = list(s.steps)
    finally:
        s.finish()
    assert len(records) >= 30
    gc.collect()  # tuples of numbers are untracked by a collection: what is left is what the records keep
    steady = records[10:30]
    new = [len(_reachable(b) - _reachable(a)) for a, b in zip(steady, steady[1:])]
    assert statistics.median(new) <= KEPT_PER_STEP[fed], new
    kinds = {tuple(e.kind for e in r.events) for r in steady}
    assert kinds == {"numpy": {("host_to_device_transfer",)}, "device": {()},
                     "numpy, a read every step": {("host_to_device_transfer", "device_to_host_sync")}}[fed], kinds


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


def test_a_shared_event_is_never_changed_by_a_repeat():
    """Steady steps share one transfer event (transfers._steady); a second call at the same line in one step adds
    up into a new event, so the shared one and every record holding it keep their own count."""
    pytest.importorskip("jax")
    from ptxla_perf.backends.jax.ledger import Ledger

    loc = R.Location("/u/train.py", 31, "<module>")
    shared = R.Event("host_to_device_transfer", loc, R.TransferEvidence(call="step", bytes=128, transfers=2,
                                                                       arrays=2, origins={"data": 128}))
    led = Ledger(lines=True)
    for _ in range(3):
        led.add(shared)
    (merged,) = led.take()
    assert merged.detail.transfers == 6 and merged is not shared
    assert shared.detail.transfers == 2 and merged.detail.origins == shared.detail.origins
