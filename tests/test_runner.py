"""The Hydra runner: `python -m ptxla_perf.run +recipe=NAME`, overrides, -m sweeps, reports in Hydra's dirs."""
from __future__ import annotations

from pathlib import Path

import pytest

from conftest import load_report, run_app, warnings_of


def test_recipe_run_writes_report_in_hydra_dir(tmp_path):
    proc = run_app("+recipe=mlp", "recipe.steps=6", "recipe.batch_size=8", "profiler.port=null",
                   "hydra.run.dir=out", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = load_report(tmp_path / "out" / "report.json")
    assert report["run"]["kind"] == "recipe" and report["run"]["recipe"] == "mlp"
    assert report["run"]["config"]["recipe"]["steps"] == 6
    assert "recipe.steps=6" in report["run"]["overrides"]
    assert report["summary"]["steps"] == 6
    assert report["extra"]["model"] == "mlp"
    assert report["summary"]["throughput"]["samples_per_s"] > 0
    assert not warnings_of(report), report["findings"]
    assert "report: out/report.json" in proc.stderr
    log = (tmp_path / "out" / "run.log").read_text()  # Hydra's run.log has the summary (it was empty)...
    assert "ptxla_perf [torch_xla] mlp: 6 steps" in log and "step time" in log
    assert (proc.stdout + proc.stderr).count("step time   p50") == 1  # ...printed once on the console


def test_knob_gives_finding_at_recipe_line(tmp_path):
    proc = run_app("+recipe=mlp", "recipe.steps=6", "recipe.log_every=1", "profiler.port=null",
                   "hydra.run.dir=out", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = load_report(tmp_path / "out" / "report.json")
    f = next(f for f in report["findings"] if f["kind"] == "device_to_host_sync")
    assert f["severity"] == "warning"
    assert f["location"]["file"].endswith(str(Path("recipes", "mlp", "__init__.py")))
    src = Path(f["location"]["file"]).read_text().splitlines()[f["location"]["line"] - 1]
    assert "loss.item()" in src


@pytest.mark.xdist_group("mlp_runs")  # the sweep is shared with test_html_report.py (one xdist worker)
def test_multirun_gives_one_report_per_job(mlp_sweep):
    _, sweep, port = mlp_sweep
    reports = sorted(sweep.glob("*/report.json"))
    assert len(reports) == 2
    sizes = sorted(load_report(r)["run"]["config"]["recipe"]["batch_size"] for r in reports)
    assert sizes == [4, 8]
    # the second job reused the first job's profiler server instead of failing on a busy port
    assert all(load_report(r)["profiler"]["server_port"] == port for r in reports)


@pytest.mark.xdist_group("mlp_runs")  # the sweep is shared with test_html_report.py (one xdist worker)
def test_sweep_table_shows_each_jobs_peak_memory(mlp_sweep):
    """The table's `peak mem` column is each report's summary.peak_bytes (the largest step graph's peak, memory.py),
    read, never recomputed; the printed table and the sweep page show it."""
    from ptxla_perf.model import fmt
    from ptxla_perf import sweep
    proc, root, _ = mlp_sweep
    runs = sweep.read(sorted(root.glob("*/report.json")))
    head, rows = sweep.table_rows(runs)
    col = head.index("peak mem")
    peaks = [r["summary"]["peak_bytes"] for _, r in runs]
    assert all(isinstance(p, int) and p > 0 for p in peaks), peaks
    assert [row[col] for row in rows] == [fmt.nbytes(p) for p in peaks]
    assert peaks == [r["memory"]["peak_bytes"] for _, r in runs]  # the memory section's figure, carried once
    table = proc.stderr[proc.stderr.index("ptxla_perf sweep: 2 run(s)"):]
    assert "peak mem" in table and all(fmt.nbytes(p) in table for p in peaks)
    assert 'data-metric="peak memory"' in (root / "sweep.html").read_text()


def test_unknown_recipe_is_one_line(tmp_path):
    proc = run_app("+recipe=nope", cwd=tmp_path)
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    assert "nope" in proc.stderr


@pytest.mark.xdist_group("mlp_runs")  # the run is shared with test_tensorboard_scalars.py (one xdist worker)
def test_capture_window_by_config_writes_xplane_and_trace_section(mlp_capture_run):
    _, out = mlp_capture_run
    xplanes = list((out / "tensorboard" / "plugins" / "profile").glob("*/*.xplane.pb"))
    assert len(xplanes) == 1
    report = load_report(out / "report.json")
    (cap,) = report["profiler"]["captures"]
    assert cap["start_step"] == 3 and cap["steps_captured"] == 2 and cap["path"] == str(xplanes[0])
    assert report["trace"]["step_summary"]["steps"] >= 2
    assert report["trace"]["top_ops"]
    # the traced steps carry the report's own step numbers (StepTrace counts per annotation name), from step 3
    assert report["trace"]["session"]["numbered_as"] == "session"
    assert [s["step"] for s in report["trace"]["steps"]][:2] == [3, 4]
    assert report["trace"]["session"]["slowdown"] > 0


def test_bad_port_override_is_one_line(tmp_path):
    proc = run_app("+recipe=mlp", "profiler.port=abc", "hydra.run.dir=out", cwd=tmp_path)
    assert proc.returncode == 2
    # the typed config rejects it before anything runs, naming the key (ptxla_perf/config.py)
    assert "Traceback" not in proc.stderr and "profiler.port" in proc.stderr
    assert len([line for line in proc.stderr.splitlines() if line.strip()]) == 1, proc.stderr
