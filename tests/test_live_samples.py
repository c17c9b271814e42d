"""Live-array samples (memory_growth's series): each is what the program held at its own step boundary, and the
growth read from them is not decided by one sample. Issue 37: under load a JAX run's last boundary, cut when the
session ended (after the loop's function had returned and dropped its arrays), was sampled there: 0 live arrays
ended a series rising by 2 a step, and the run had no memory_growth finding."""
from __future__ import annotations

import json

import pytest

from conftest import ROOT

from ptxla_perf.analysis import memory
from ptxla_perf.model.records import StepRecord

FIXTURES = ROOT / "tests" / "fixtures"


def _steps(points):
    """StepRecords with live samples at (index, arrays) (4 bytes an array), the iterations between unsampled."""
    at = dict(points)
    return [StepRecord(index=i, wall_time_s=0.01, live=(at[i], 4 * at[i]) if i in at else None)
            for i in range(max(at) + 1)]


def test_jax_last_step_cut_at_the_sessions_end_is_not_sampled(tmp_path, monkeypatch):
    """A sample every 4 boundaries whatever a sample costs (as on a loaded machine, where a step is slow beside
    one), 25 steps: boundary 24 is a sampling one and is cut when the session ends, after train() returned."""
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    from ptxla_perf.backends.jax import memory as jax_memory
    from ptxla_perf.session import Session
    monkeypatch.setattr(jax_memory, "_LIVE_SHARE", 1e9)  # a sample never costs more than its share: every 4

    def train(steps):
        step = jax.jit(lambda w: (w - 0.1 * jax.grad(lambda w: jnp.sum(w ** 2))(w), jnp.sum(w)))
        w, kept = jnp.ones((4, 2)), []
        for _ in range(steps):
            w, loss = step(w)
            kept.append(loss)  # one array kept a step
        return float(kept[-1])

    s = Session("jax", report_path=str(tmp_path / "r.json"), port=None, console=False, handle_signals=False)
    s.start()
    try:
        train(25)
    finally:
        report = s.finish()
    sampled = [(st["index"], st["live_arrays"]) for st in report["steps"] if st.get("live_arrays") is not None]
    assert report["summary"]["steps"] == 25 and sampled[-1][0] < 24, sampled
    counts = [n for _, n in sampled]
    assert counts == sorted(counts) and counts[-1] > counts[0], sampled
    assert [f for f in report["findings"] if f["kind"] == "memory_growth"], report["findings"]


def _recorded(name):
    data = json.loads((FIXTURES / name).read_text())
    return _steps([(i, n) for i, n, _ in data["samples"]]), data["warmup"]


def test_recorded_series_with_a_stray_last_sample_still_grows():
    """The failing run's own samples (tests/fixtures/live_samples_last_at_exit.json): 2 arrays a step, then 0 at
    the sample taken after the program's loop. The trend is the loop's 2 a step, and it grows."""
    steps, warmup = _recorded("live_samples_last_at_exit.json")
    g = memory.growth(steps, warmup)
    assert g["samples"] == 48 and g["live_arrays"] == 0
    assert g["arrays_per_step"] == pytest.approx(2.0, abs=0.05) and g["bytes_per_step"] == pytest.approx(8.0, abs=0.2)
    assert memory.grows(g)


@pytest.mark.parametrize("stray", [0, 10_000])
def test_one_stray_sample_at_either_end_does_not_decide_the_growth(stray):
    rising = [(i, 100 + 2 * i) for i in range(0, 200, 8)]
    for points in ([*rising[:-1], (rising[-1][0], stray)], [(rising[0][0], stray), *rising[1:]]):
        g = memory.growth(_steps(points), 0)
        assert g["arrays_per_step"] == pytest.approx(2.0) and memory.grows(g), (points, g)


@pytest.mark.parametrize("counts", [
    [50] * 30,  # flat: a model that keeps what it has
    [50, 80] * 15,  # allocates 30 arrays in a step and frees them in the next, sampled at both
    [50 + i % 8 for i in range(64)],  # a list of every step's loss cleared every 8 steps, sampled every step
    [50 + i % 8 for i in range(64)][:-1] + [2000],  # ...and one stray sample at its end
])
def test_flat_or_sawtooth_counts_do_not_grow(counts):
    g = memory.growth(_steps(list(enumerate(counts))), 1)
    assert not memory.grows(g), g
    assert abs(g["arrays_per_step"]) < 0.5 or g["rising_share"] < 0.75, g


def test_a_steady_rise_reads_as_before():
    """On a steady rise the trend is the rise from the first to the last sample, as it was."""
    g = memory.growth(_steps([(i, 10 + 3 * i) for i in range(0, 40, 4)]), 1)
    assert g["arrays_per_step"] == 3 and g["bytes_per_step"] == 12 and memory.grows(g)
    assert memory.growth(_steps([(0, 10), (5, 20)]), 0)["arrays_per_step"] == 2  # two samples: their slope
