"""Reports bounded at any run length (issue 28): a real JAX run past the step-retention bound (lowered through
PTXLA_PERF_STEP_RETENTION so ~300 steps cross it) counts every step in the summary, the findings and the
TensorBoard scalars, keeps the first/last/anomaly steps in full with step_buckets of all, validates, streams every
step to --steps-file, and `view`, `diff` and `merge` read the trimmed report."""
from __future__ import annotations

import json

import pytest

from conftest import SCRIPTS, load_report, run_cli
from ptxla_perf.report import retention
from ptxla_perf.model.summary import StepRow

# long_run is read by every test: one xdist worker, so that each is made once
pytestmark = pytest.mark.xdist_group("long_run")

STEPS = 300
KNOBS = "trim_above=100,first=20,last=20,around=2,bucket_min=50"


@pytest.fixture(scope="module")
def long_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("long")
    report, steps_file, tb = out / "report.json", out / "steps.jsonl", out / "tb"
    proc = run_cli("profile", "--port", "none", "--report", str(report), "--steps-file", str(steps_file),
                   "--tensorboard", str(tb), str(SCRIPTS / "jax_long_run.py"), str(STEPS),
                   PTXLA_PERF_STEP_RETENTION=KNOBS)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out, proc, load_report(report)  # load_report validates against the schema


@pytest.mark.slow
def test_every_step_counted_and_report_trimmed(long_run):
    out, proc, rep = long_run
    assert rep["summary"]["steps"] == STEPS
    ret = rep["run"]["step_retention"]
    assert ret["trimmed"] and ret["total"] == STEPS and ret["kept"] == len(rep["steps"]) < STEPS
    idx = [s["index"] for s in rep["steps"]]
    assert idx[:20] == list(range(20)) and idx[-20:] == list(range(STEPS - 20, STEPS))
    assert {148, 149, 150, 151, 152}.issubset(idx)  # around the compile of the new shape at step 150
    buckets = rep["step_buckets"]
    assert sum(b["count"] for b in buckets) == STEPS and buckets[0]["first"] == 0 and buckets[-1]["last"] == STEPS - 1
    assert sum(b["host_reads"] for b in buckets) >= STEPS - 5
    reads = [f for f in rep["findings"] if f["kind"] == "device_to_host_sync"]
    assert reads and reads[0]["severity"] == "warning"
    assert "steps" in proc.stderr and "in full" in proc.stderr  # said once on the console


@pytest.mark.slow
def test_steps_file_has_every_step(long_run):
    out, _, rep = long_run
    lines = [json.loads(line) for line in (out / "steps.jsonl").read_text().splitlines()]
    assert [d["index"] for d in lines] == list(range(len(lines))) and len(lines) >= STEPS
    assert rep["run"]["step_retention"]["steps_file"] == str(out / "steps.jsonl")


@pytest.mark.slow
def test_tensorboard_counts_every_step(long_run):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    out, _, _ = long_run
    acc = EventAccumulator(str(out / "tb"), size_guidance={"tensors": 0})
    acc.Reload()
    assert [e.step for e in acc.Tensors("ptxla_perf/compiles")] == list(range(STEPS))


@pytest.mark.slow
def test_view_diff_merge_read_trimmed(long_run, tmp_path):
    out, _, rep = long_run
    path = out / "report.json"
    v = run_cli("view", str(path))
    assert v.returncode == 0, v.stderr[-2000:]
    d = run_cli("diff", str(path), str(path))
    assert d.returncode == 0, d.stderr[-2000:]
    other = dict(rep, run=dict(rep["run"], rank=1))  # the same run as a second rank's report
    (tmp_path / "report.rank1.json").write_text(json.dumps(other))
    merged = tmp_path / "merged.json"
    m = run_cli("merge", str(path), str(tmp_path / "report.rank1.json"), "--force", "--report", str(merged))
    assert m.returncode == 0, m.stderr[-2000:]
    assert load_report(merged)["summary"]["steps"] >= STEPS
    page = (out / "report.html").read_text()
    assert "trimmed" in page
    from ptxla_perf.html import charts  # the timeline's step labels are the kept steps' own indices
    ticks = [k for _, k in charts.x_ticks(len(rep["steps"]))]
    assert any(rep["steps"][k]["index"] != k for k in ticks)
    assert all(f'%">{rep["steps"][k]["index"]}</span>' in page for k in ticks)
    from ptxla_perf.notebook import load
    nb = load(str(path))
    assert len(nb.steps) == len(rep["steps"]) and nb.summary.steps == STEPS


def test_plan_keeps_every_step_at_the_bound():
    """At the bound nothing is trimmed; above it the first/last and the steps around an anomaly are kept, and the
    buckets cover every step."""
    rows = [StepRow(i, "train", i > 0, int(i in (0, 25)), False, 0.01, 0.0, 0.01, 1, 1) for i in range(50)]
    assert retention.plan(rows, [], retention.Retention(trim_above=50), 0.01) is None
    plan = retention.plan(rows, [], retention.Retention(trim_above=10, first=5, last=5, bucket_min=10), 0.01)
    assert plan.keep == [0, 1, 2, 3, 4, 23, 24, 25, 26, 27, 45, 46, 47, 48, 49]
    assert [b["count"] for b in plan.buckets] == [10] * 5 and sum(b["host_reads"] for b in plan.buckets) == 50
    assert plan.info["total"] == 50 and plan.info["kept"] == 15
