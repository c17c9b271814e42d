"""One value for the iterations (issue 39, analysis/iterset.py): each iteration's figures are derived once per
analysis, and the weighing of a long run's folded records lives in one place - the consumers read counts, means,
percentiles and hits from it, never a record's `repeat`."""
from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

import ptxla_perf
from ptxla_perf.analysis import breakdown as B
from ptxla_perf.analysis import fold as FO
from ptxla_perf.analysis.iterset import Iterations
from ptxla_perf.model.records import Location, StepRecord, Transfers
from ptxla_perf.rules.iteration import analyze

SITE = Location("/u/train.py", 30, "<module>")


def _it(i: int, wall: float, data: float = 0.0) -> StepRecord:
    return StepRecord(i, wall, SITE, executions=1, device_to_host=Transfers(0, 0), optimizer_steps=1,
                      backward_calls=1, phase="train", launch_time_s=wall / 4, host_cpu_s=wall / 4,
                      data_wait_s=data)


def _walls(n: int) -> list[float]:
    return [0.01 + 0.001 * ((i * 7) % 13) for i in range(n)]


def test_each_iteration_is_broken_down_once_per_analysis(monkeypatch):
    """The breakdown of an iteration is derived once, however many figures, rows and rules read it."""
    calls: Counter = Counter()
    real = B.components

    def counted(s):
        calls[id(s)] += 1
        return real(s)

    monkeypatch.setattr(B, "components", counted)
    a = analyze([_it(i, w, data=w * 0.6) for i, w in enumerate(_walls(40))], expect_steps=False)
    a.figures.rows()
    a.figures.summary()
    assert any(f.kind == "input_bound" for f in a.findings)  # a rule that reads the parts ran
    assert calls and max(calls.values()) == 1, calls.most_common(3)


def test_folded_records_weigh_as_the_iterations_they_stand_for():
    """Counts, totals, means, the percentiles and hits over folded records are those of the iterations unfolded
    (exact while a record holds at most fold.SAMPLE iterations)."""
    n = 300
    walls = _walls(n)
    folded = FO.Folded(max_records=8)
    folded.add([_it(i, w) for i, w in enumerate(walls)])
    records = folded.expanded()
    assert len(records) < n and any(r.sample is not None for r in records)
    whole, part = Iterations([_it(i, w) for i, w in enumerate(walls)]), Iterations(records)
    assert part.count == whole.count == n
    assert part.total("wall_time_s") == pytest.approx(whole.total("wall_time_s"), rel=1e-9)
    assert part.mean(part.step) == pytest.approx(sum(walls) / n, rel=1e-9)
    a, b = whole.stats("step"), part.stats("step")
    assert a["n"] == b["n"] == n and b["mean"] == pytest.approx(a["mean"], rel=1e-9)
    assert (b["min"], b["max"]) == pytest.approx((a["min"], a["max"]), rel=1e-6)
    for key in ("p50", "p90"):
        assert b[key] == pytest.approx(a[key], rel=1e-6)  # the samples are float32
    slow = lambda d: d["step"]  # noqa: E731
    assert part.hits(slow, 0.016, ("step",))[0] == whole.hits(slow, 0.016, ("step",))[0] == sum(
        w >= 0.016 for w in walls)


def test_only_the_iterations_value_reads_a_records_weight():
    """`.repeat` (how many iterations a record stands for) is read in iterations.py and fold.py only (and the
    record's own definition): every other module asks them."""
    root = Path(ptxla_perf.__file__).parent
    allowed = {"analysis/iterations.py", "analysis/fold.py", "model/records.py"}
    found = sorted(str(p.relative_to(root)) for p in root.rglob("*.py")
                   if re.search(r"\.repeat\b", p.read_text()) and str(p.relative_to(root)) not in allowed)
    assert found == []
