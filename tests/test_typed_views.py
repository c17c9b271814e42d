"""Typed to the edge (issue 26): one device-to-host count, one compile count and one step time followed from the
adapter's records (a real torch_xla run) through the typed values (values.Summary, values.StepRow) to every view -
the console, the report JSON, the HTML page, the TensorBoard event file, `diff` and `merge` - and they agree.
"Step time" is one figure: each iteration's wall time net of its compile time, so TensorBoard's `step_time_ms`
equals the summary's definition on the steps that compiled, and the raw wall time has its own tag. Reports written
before 0.5.0 (the gross count under `device_to_host`, no per-step `step_time_s`) read back to the same values."""
from __future__ import annotations

import copy
import html
import json
from pathlib import Path

import pytest

from conftest import ROOT, SCRIPTS, cli_env, load_report, run_cli
from ptxla_perf.model import fmt
from ptxla_perf.analysis.figures import median
from ptxla_perf.model.summary import StepRow, Summary, rows_from_json

# the module's run is read by several tests: one xdist worker, so that each is made once
pytestmark = pytest.mark.xdist_group("typed_views")

SCRIPT = SCRIPTS / "item_per_step.py"  # a .item() every step: one host read per step; warm-up steps compile


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("typed")
    report, tb = tmp / "report.json", tmp / "tb"
    proc = run_cli("profile", "--port", "none", "--report", str(report), "--tensorboard", str(tb), str(SCRIPT),
                   cwd=tmp)
    assert proc.returncode == 0 and report.exists(), proc.stderr[-3000:]
    return proc, load_report(report), report, tb


def _net(step: dict) -> float:
    """An iteration's step time computed here from the adapter's raw figures (figures.step_time_s's rule)."""
    own = (step.get("own_time_us") or 0.0) / 1e6 if (step["compiles"] or step.get("attributed")) else 0.0
    return max(step["wall_time_s"] - step["compile_time_s"] - own, 0.0)


def test_records_to_typed_values(run):
    _, rep, _, _ = run
    s = Summary.from_json(rep["summary"])
    rows = rows_from_json(rep["steps"])
    train = [r for r in rows if r.train]
    raw = {st["index"]: st for st in rep["steps"]}
    # compiles: the adapter's per-iteration counts sum to the summary's
    assert s.compiles == sum(st["compiles"] for st in rep["steps"]) == sum(r.compiles for r in rows) > 0
    # device-to-host: the gross transfers under their own name, the host reads net of fallback copies
    gross = sum(raw[r.index]["device_to_host_transfers"]["count"] for r in train)
    assert "device_to_host" not in rep["steps"][0]  # the gross count no longer shares the host reads' name
    assert s.device_to_host_transfers == gross == sum(r.device_to_host_transfers for r in train) >= s.steps == 8
    assert s.device_to_host == sum(r.host_reads for r in train) >= s.steps  # no fallback here: reads = transfers
    assert s.device_to_host_per_step == pytest.approx(s.device_to_host / s.steps)
    # step time: per iteration net of compile, the summary's p50 over the steady ones
    for r in rows:
        assert r.step_time_s == pytest.approx(_net(raw[r.index]), abs=1e-12)
    assert any(r.compiles and r.wall_time_s - r.step_time_s >= 0.5 * r.compile_time_s > 0 for r in rows)
    steady = [r.step_time_s for r in rows if r.steady]
    assert len(steady) == s.step_time_s.n == s.steady_steps
    assert s.step_time_s.p50 == pytest.approx(median(steady), rel=1e-9)
    # the roofline's observed step time is the summary's p50
    roof = rep["roofline"]
    if roof.get("flops_per_step") is not None:
        assert roof["observed_step_time_s"] == pytest.approx(s.step_time_s.p50, rel=1e-9)


def test_console_and_html_say_the_same(run):
    proc, rep, path, _ = run
    s = Summary.from_json(rep["summary"])
    console = proc.stderr
    assert f"p50 {fmt.ms(s.step_time_s.p50)}" in console
    assert f"compiles    {s.compiles} (" in console
    assert f"device->host/step {fmt.num(s.device_to_host_per_step, 2, keep_int=False)}" in console
    page = html.unescape(path.with_name("report.html").read_text())
    assert fmt.ms(s.step_time_s.p50, 2) in page and "host reads / step" in page
    # the timeline plots each step's step time (net of compile) and says its wall time apart
    for r in rows_from_json(rep["steps"]):
        tip = (f"step {r.index} ({r.phase or 'train'}): step time {fmt.ms(r.step_time_s, 2)} "
               f"(wall time {fmt.ms(r.wall_time_s, 2)}")
        assert tip in page, tip
        assert f"host reads {r.host_reads}" in page


def _scalars(tb: Path) -> dict[str, dict[int, float]]:
    """The event file's scalars as TensorBoard reads them: tag -> step -> value."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.util.tensor_util import make_ndarray
    ea = EventAccumulator(str(tb))
    ea.Reload()
    return {tag: {e.step: float(make_ndarray(e.tensor_proto)) for e in ea.Tensors(tag)}
            for tag in ea.Tags()["tensors"]}


def test_tensorboard_step_time_is_the_summarys_definition(run):
    _, rep, _, tb = run
    tags = _scalars(tb)
    rows = [r for r in rows_from_json(rep["steps"]) if r.train]
    step, wall = tags["ptxla_perf/step_time_ms"], tags["ptxla_perf/wall_time_ms"]
    assert sorted(step) == [r.index for r in rows]
    for r in rows:  # float32 in the event file
        assert step[r.index] == pytest.approx(r.step_time_s * 1e3, rel=1e-5, abs=1e-6)
        assert wall[r.index] == pytest.approx(r.wall_time_s * 1e3, rel=1e-5)
        assert tags["ptxla_perf/compiles"][r.index] == r.compiles
        assert tags["ptxla_perf/device_to_host"][r.index] == r.host_reads
    compiled = [r for r in rows if r.compiles]
    assert compiled and all(step[r.index] < wall[r.index] for r in compiled)  # compile time is not step time
    steady = sorted(step[r.index] for r in rows if r.steady)
    assert median(steady) == pytest.approx(Summary.from_json(rep["summary"]).step_time_s.p50 * 1e3, rel=1e-5)


def _diff_rows(a: Path, b: Path) -> dict[str, dict]:
    res = run_cli("diff", str(a), str(b), "--format", "json")
    assert res.returncode == 0, res.stderr[-2000:]
    return {r["name"]: r for r in json.loads(res.stdout)["rows"]}


def test_diff_and_merge_read_the_same_figures(run, tmp_path):
    _, rep, path, _ = run
    s = Summary.from_json(rep["summary"])
    rows = _diff_rows(path, path)
    assert rows["compiles"]["a"] == s.compiles
    assert rows["device_to_host"]["a"] == s.device_to_host
    assert rows["device_to_host_transfers"]["a"] == s.device_to_host_transfers
    assert rows["step_time_p50"]["a"] == pytest.approx(s.step_time_s.p50)
    # merge: this report and a copy as rank 1; steps and summary are rank 0's, each process row its own
    other = copy.deepcopy(rep)
    other["run"]["rank"] = 1
    other["environment"]["process_index"] = 1
    second = tmp_path / "rank1.json"
    second.write_text(json.dumps(other))
    merged = tmp_path / "merged.json"
    res = run_cli("merge", str(path), str(second), "--report", str(merged), cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-2000:]
    m = load_report(merged)
    ms = Summary.from_json(m["summary"])
    assert (ms.compiles, ms.device_to_host, ms.device_to_host_transfers) == \
        (s.compiles, s.device_to_host, s.device_to_host_transfers)
    assert ms.step_time_s == s.step_time_s
    for p in m["processes"]:
        assert p["compiles"] == s.compiles and p["device_to_host_per_step"] == s.device_to_host_per_step
        assert p["step_time_s"]["p50"] == s.step_time_s.p50


def _as_040(rep: dict) -> dict:
    """The report as 0.4.0 wrote it: the gross count under `steps[].device_to_host`, no per-step step time, the
    summary's bytes under their old names and no gross count in the summary."""
    old = copy.deepcopy(rep)
    for st in old["steps"]:
        st["device_to_host"] = st.pop("device_to_host_transfers")
        del st["step_time_s"]
    sm = old["summary"]
    sm["device_to_host_bytes"] = sm.pop("device_to_host_transfer_bytes")
    sm["device_to_host_bytes_per_step"] = sm.pop("device_to_host_transfer_bytes_per_step")
    del sm["device_to_host_transfers"], sm["device_to_host_transfers_per_step"]
    old["tool_version"] = "0.4.0"
    return old


def test_reports_of_040_read_back_to_the_same_values(run, tmp_path):
    _, rep, path, _ = run
    old = _as_040(rep)
    assert Summary.from_json(old["summary"]) == Summary.from_json(rep["summary"]).with_fields(
        {"device_to_host_transfers": None, "device_to_host_transfers_per_step": None})
    assert rows_from_json(old["steps"]) == rows_from_json(rep["steps"])
    old_path = tmp_path / "old.json"
    old_path.write_text(json.dumps(old))
    rows = _diff_rows(old_path, path)  # the old report's gross count comes from its steps
    for name in ("compiles", "device_to_host", "device_to_host_transfers", "device_to_host_transfer_bytes",
                 "step_time_p50"):
        assert rows[name]["status"] == "same", rows[name]
    assert run_cli("view", str(old_path), "--out", str(tmp_path / "old.html")).returncode == 0
    res = run_cli("merge", str(old_path), "--report", str(tmp_path / "m.json"), cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-2000:]
    merged = load_report(tmp_path / "m.json")  # written with today's keys, the old ones read
    assert merged["summary"]["device_to_host_transfer_bytes"] == rep["summary"]["device_to_host_transfer_bytes"]


@pytest.mark.parametrize("name", ["report_item.json", "report_fixed.json", "report_fallback.json"])
def test_early_reports_in_the_fixtures_still_load(name, tmp_path):
    """Reports written by 0.1.0 (tests/fixtures/metrics): view, diff and merge read them."""
    path = ROOT / "tests" / "fixtures" / "metrics" / name
    rep = json.loads(path.read_text())
    s = Summary.from_json(rep["summary"])
    assert s.steps == rep["summary"]["steps"] and s.compiles == rep["summary"]["compiles"]
    rows = rows_from_json(rep["steps"], s.warmup_steps)
    assert [r.device_to_host_transfers for r in rows] == [st["device_to_host"]["count"] for st in rep["steps"]]
    assert any(r.steady for r in rows)
    assert run_cli("view", str(path), "--out", str(tmp_path / "v.html")).returncode == 0
    assert _diff_rows(path, path)["compiles"]["status"] == "same"
    res = run_cli("merge", str(path), "--report", str(tmp_path / "m.json"), cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-2000:]


def test_a_captures_trace_section_typed_to_the_views(jax_window_capture, tmp_path):
    """The capture's `trace` section (trace_section.TraceSection) from the analysis to the report JSON, the HTML
    page and the sweep table: the report holds its JSON, each view reads the same typed figures back, and a 0.4.0
    form of it (findings without origin or cost) reads back to the same values."""
    from ptxla_perf import html as H, sweep
    from ptxla_perf.report import assemble as R
    from ptxla_perf.trace import analyze_trace
    from ptxla_perf.trace.section import TraceSection
    sec = analyze_trace(jax_window_capture)
    assert TraceSection.from_json(sec.to_json()) == sec
    rep = R.with_trace(R.build(backend="jax", run={"kind": "trace", "status": "completed"}, env=R.environment({}),
                               steps=[]), sec)
    assert rep["trace"] == sec.to_json() and TraceSection.from_json(rep["trace"]) == sec
    page = H._trace(rep)
    ss = sec.step_summary
    assert f"{ss.steps} steps traced, {ss.steady_steps} steady" in page and ss.steps == 6
    assert all(html.escape(o["name"]) in page for o in sec.top_ops[:15])
    assert sweep._extra(rep, "all_reduce_share") == sec.collective_share.mean > 0
    old = copy.deepcopy(rep)
    for f in old["trace"]["findings"] + old["findings"]:
        f.pop("origin", None), f.pop("cost", None)
    back = TraceSection.from_json(old["trace"])
    assert [(f.kind, f.origin, f.severity) for f in back.findings] == [(f.kind, f.origin, f.severity)
                                                                       for f in sec.findings]
    assert back.step_summary == ss and back.collective_share == sec.collective_share
    assert H._trace(old) == page
    path = tmp_path / "old.json"
    path.write_text(json.dumps(old))
    assert run_cli("view", str(path), "--out", str(tmp_path / "old.html")).returncode == 0
