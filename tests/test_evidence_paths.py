"""Issue 37: nothing measured is lost to one failing part. Every evidence class (records.EVIDENCE) goes through
grouping (iterations.py: iterations of several boundaries stamp each event with its boundary), folding (fold.py),
the report and merge; and our own failure at one evidence type, one rule, one figure or one report section
(faults.py's injection points `evidence.KIND`, `rule.KIND`, `figure.NAME`, `section.NAME`) drops only that part:
the steps and every other finding are kept, the failed point listed."""
from __future__ import annotations

import json
from dataclasses import fields

import pytest

from ptxla_perf.model import faults
from ptxla_perf.pods import merge
from ptxla_perf.analysis import iterations as I
from ptxla_perf.report import assemble as R
from ptxla_perf.rules.iteration import analyze
from ptxla_perf.analysis.fold import Folded
from ptxla_perf.model.records import EVIDENCE, Event, Location, StepRecord, Transfers, evidence_json

SITE = Location("/train.py", 30, "<module>")
LOADER = Location("/train.py", 20, "<module>")
READ = Location("/train.py", 33, "<module>")
ITERATIONS = 12


def _detail(kind: str) -> dict:
    """A little evidence of each kind, as an adapter would give it (a few fields set, the rest defaults)."""
    cls = EVIDENCE[kind]
    names = {f.name for f in fields(cls)}
    d = {"call": "tensor.item"} if "call" in names else {}
    if kind == "spmd":
        d = {"graph": "abc", "devices": 4, "inputs": 3, "sharded_inputs": 1, "collectives": {}}
    if cls.__name__ == "CompileEvidence":
        d = {"key": "site:/train.py:30", "cause": "input_shapes"}
    return d


def _boundaries(kinds, n: int = ITERATIONS, reads_every: int = 1) -> list[StepRecord]:
    """A training loop fed by a loader that syncs before each step (two boundaries per iteration: an idle one at
    the loader's line, then the step's own at the loop's line); a host read every `reads_every` steps; iteration
    1 is an attribution step carrying one event of each of `kinds` on each of its boundaries."""
    out = []
    for i in range(n):
        read = i % reads_every == 0
        loader = StepRecord(index=2 * i, wall_time_s=0.001, site=LOADER, phase=None)
        step = StepRecord(index=2 * i + 1, wall_time_s=0.01, site=SITE, executions=1, optimizer_steps=1,
                          backward_calls=1, compiles=1 if i == 0 else 0, compile_time_s=0.5 if i == 0 else 0.0,
                          cached_compiles=0 if i == 0 else 1, graph_hashes=["g1"],
                          device_to_host=Transfers(1 if read else 0, 4 if read else 0),
                          device_to_host_time_s=0.001 if read else 0.0, attributed=i == 1,
                          launch_time_s=0.001, device_wait_s=0.004, host_cpu_s=0.003)
        if read and i == 1:
            step.events.append(Event("device_to_host_sync", READ, {"call": "tensor.item"}))
        if i == 1:
            for b in (loader, step):
                b.events += [Event(k, READ, _detail(k)) for k in kinds]
        out += [loader, step]
    return out


def _run(**over) -> dict:
    return dict({"kind": "script", "status": "completed", "run_id": "r1", "run_id_source": "env", "rank": 0,
                 "argv": ["train.py"]}, **over)


@pytest.fixture(autouse=True)
def own_faults(monkeypatch):
    """Each test's failures on their own: the process keeps the first of each point only (faults.Faults)."""
    monkeypatch.setattr(faults.FAULTS, "_seen", {})
    monkeypatch.setattr(faults.FAULTS, "_order", [])


@pytest.fixture
def inject(monkeypatch):
    """Make faults.check raise at these points, as PTXLA_PERF_FAULTS does for a whole process."""
    def at(*points: str):
        monkeypatch.setattr(faults, "_INJECT", frozenset(points))
        monkeypatch.setattr(faults, "_ALL", "*" in points)
        monkeypatch.setattr(faults, "_PREFIXES", tuple(p[:-1] for p in points if p.endswith(".*")))
    return at


def _failed(mark: int) -> set[str]:
    return {f.where for f in faults.FAULTS.since(mark)}


@pytest.mark.parametrize("kind", sorted(EVIDENCE))
def test_every_evidence_class_is_grouped_with_its_boundary(kind):
    """Iterations of two boundaries: each event keeps its evidence (its type, its fields) and is stamped with the
    boundary it came from (SpmdEvidence had no `boundary`: one spmd event took the whole report)."""
    mark = faults.FAULTS.mark()
    its = I.group(_boundaries([kind]))
    assert I.count(its) == ITERATIONS
    evs = [e for e in its[1].events if e.kind == kind]
    assert {e.detail.boundary for e in evs} == {2, 3}
    assert all(type(e.detail) is EVIDENCE[kind] for e in evs)
    assert all(evidence_json(e.detail).items() >= _detail(kind).items() for e in evs)
    assert _failed(mark) == set()


def test_every_evidence_class_goes_through_folding_the_report_and_merge(tmp_path):
    """All evidence classes in one run, long enough to fold: the report has every step and every event, no
    profiler error; two ranks of it merge."""
    mark = faults.FAULTS.mark()
    kinds = sorted(EVIDENCE)
    bounds = _boundaries(kinds, n=80)
    folded = Folded(max_records=8)
    held = folded.take(bounds, window=10)
    assert folded.records and len(held) < len(bounds)
    a = analyze(held, folded=folded)
    assert I.count(a.iterations) == 80 and I.count(a.train) == 80
    assert {e.kind for e in a.iterations[1].events} == set(kinds)

    paths = []
    for rank in (0, 1):
        rep = R.build(backend="torch_xla", run=_run(rank=rank), env=dict(R.environment({}), process_index=rank,
                                                                          process_count=2), steps=bounds)
        R.validate(rep)
        assert len(rep["steps"]) == 80 and rep["summary"]["steps"] == 80
        assert {e["kind"] for e in rep["steps"][1]["events"]} == set(kinds)
        path = tmp_path / f"report.rank{rank}.json"
        R.write(rep, str(path), html=False)
        paths.append(path)
    merged = merge.merge([json.loads(p.read_text()) for p in paths], [str(p) for p in paths])
    R.validate(merged)
    assert len(merged["steps"]) == 80 and len(merged["processes"]) == 2
    assert {e["kind"] for e in merged["steps"][1]["events"]} == set(kinds)
    assert _failed(mark) == set()


def _report(bounds) -> dict:
    return R.build(backend="torch_xla", run=_run(), env=R.environment({}), steps=bounds)


def _kinds(rep) -> set[str]:
    return {f["kind"] for f in rep["findings"]}


@pytest.mark.parametrize("kind", sorted(EVIDENCE))
def test_a_fault_at_one_evidence_type_drops_only_its_events(inject, kind):
    """`evidence.KIND` fails: that kind's events are left out, the steps, the other events and the findings they
    make are kept, and the point is recorded (the report's profiler_errors)."""
    other = "device_to_host_sync" if kind != "device_to_host_sync" else "op_fallback"
    bounds = _boundaries([kind, other])
    inject(f"evidence.{kind}")
    mark = faults.FAULTS.mark()
    rep = _report(bounds)
    assert _failed(mark) == {f"evidence.{kind}"}
    assert rep["summary"]["steps"] == ITERATIONS and len(rep["steps"]) == ITERATIONS
    events = {e["kind"] for e in rep["steps"][1]["events"]}
    assert kind not in events and other in events
    assert "recompilation" not in _kinds(rep) and rep["summary"]["compiles"] == 1


def test_a_fault_in_one_rule_leaves_the_steps_and_the_other_findings(inject):
    """`rule.device_to_host_sync` fails: that rule is listed as not judged, its finding is missing; the steps,
    the figures and the other rules' findings (the compile's warm-up, the spmd story) are as without the fault."""
    bounds = _boundaries(["spmd"])
    clean = _report(bounds)
    assert {"device_to_host_sync", "spmd"} <= _kinds(clean)
    inject("rule.device_to_host_sync")
    mark = faults.FAULTS.mark()
    rep = _report(bounds)
    assert _failed(mark) == {"rule.device_to_host_sync"}
    assert _kinds(rep) == _kinds(clean) - {"device_to_host_sync"}
    assert "device_to_host_sync" in {n["kind"] for n in rep["rules"]["not_judged"]}
    assert rep["steps"] == clean["steps"] and rep["summary"]["steps"] == ITERATIONS


@pytest.mark.parametrize("point,gone", [("figure.step_time_s", "step_time_s"),
                                        ("figure.throughput", None),
                                        ("figure.time_breakdown", "time_breakdown"),
                                        ("section.sources", None),
                                        ("section.rank_digest", None),
                                        ("analysis.compiles", None)])
def test_a_fault_in_one_figure_or_section_drops_only_it(inject, point, gone):
    bounds = _boundaries(["spmd"])
    clean = _report(bounds)
    inject(point)
    mark = faults.FAULTS.mark()
    rep = _report(bounds)
    assert _failed(mark) == {point}
    assert rep["summary"]["steps"] == ITERATIONS and len(rep["steps"]) == ITERATIONS
    assert "device_to_host_sync" in _kinds(rep) and "spmd" in _kinds(rep)
    if gone is not None:
        assert clean["summary"].get(gone) is not None and rep["summary"].get(gone) is None
    if point == "section.rank_digest":
        assert "rank_digest" in clean and "rank_digest" not in rep
    if point == "analysis.compiles":
        assert rep["summary"]["compiles"] == clean["summary"]["compiles"]


@pytest.mark.parametrize("point", ["merge.rank_rules", "merge.rank_wait", "merge.heatmap", "merge.memory"])
def test_a_fault_in_one_section_of_a_merge_drops_only_it(inject, point):
    """A merged report's own sections each on their own: the failed one is missing, the ranks' steps, rows and
    findings are kept, and the merged report lists the failure (profiler_errors and its profiler_error finding)."""
    reps = [R.build(backend="torch_xla", run=_run(rank=rank), env=dict(R.environment({}), process_index=rank,
                                                                        process_count=2), steps=_boundaries(["spmd"]))
            for rank in (0, 1)]
    clean = merge.merge(json.loads(json.dumps(reps)))
    inject(point)
    merged = merge.merge(json.loads(json.dumps(reps)))
    R.validate(merged)
    assert [e["where"] for e in merged["profiler_errors"]] == [point]
    assert "profiler_error" in _kinds(merged) and "profiler_error" not in _kinds(clean)
    assert merged["steps"] == clean["steps"] and len(merged["processes"]) == 2
    assert {"device_to_host_sync", "spmd"} <= _kinds(merged)


def test_an_event_that_cannot_be_written_drops_only_itself(monkeypatch):
    """A bug of ours writing one event's evidence (not injected: a real exception) leaves that event out of
    steps[].events; the step, its other events and the findings stay."""
    from ptxla_perf.model import records
    real = records.Event.to_json

    def to_json(self):
        if self.kind == "spmd":
            raise TypeError("not serializable")
        return real(self)
    monkeypatch.setattr(records.Event, "to_json", to_json)
    mark = faults.FAULTS.mark()
    rep = _report(_boundaries(["spmd"]))
    assert _failed(mark) == {"evidence.spmd"}
    assert len(rep["steps"]) == ITERATIONS
    assert {e["kind"] for e in rep["steps"][1]["events"]} == {"device_to_host_sync"}
    assert {"device_to_host_sync", "spmd"} <= _kinds(rep)


def test_a_finding_that_cannot_be_written_or_a_failed_trim_drops_only_it(inject):
    from ptxla_perf.report import retention
    bounds = _boundaries(["spmd"])
    clean = _report(bounds)
    inject("finding.device_to_host_sync", "section.retention")
    rep = R.build(backend="torch_xla", run=_run(), env=R.environment({}), steps=bounds,
                  retention=retention.Retention.of({}))
    assert _failed(0) == {"finding.device_to_host_sync", "section.retention"}
    assert _kinds(rep) == _kinds(clean) - {"device_to_host_sync"}
    assert len(rep["steps"]) == ITERATIONS and rep["summary"] == dict(clean["summary"], **{
        "findings_by_severity": rep["summary"]["findings_by_severity"]})
