"""Planted problems and their clean twins, through `python -m ptxla_perf profile` on the real torch_xla (CPU).
Each script is profiled once per option set (conftest.profiled) and read by every test that asserts about it."""
from __future__ import annotations

from importlib import metadata

import pytest

from conftest import SCRIPTS, planted_line, warnings_of

# the runs of index_by_step.py and clean_loop.py are shared with test_html_report.py, test_html_browser.py and
# test_multiprocess.py: one pytest-xdist worker runs them all
pytestmark = pytest.mark.xdist_group("txla_scripts")

PLANTED = [  # script, finding kind, calls that made it, severity (docs/report.md: severity policy)
    ("item_per_step.py", "device_to_host_sync", {"item"}, "warning"),
    ("print_loss.py", "device_to_host_sync", {"__repr__", "__format__", "__str__"}, "warning"),
    ("bool_in_loop.py", "device_to_host_sync", {"__bool__"}, "warning"),
    # every 7 steps: caught at a booked step; an infrequent read is info with its amortised cost
    ("log_every_n.py", "device_to_host_sync", {"item"}, "info"),
    ("changing_batch.py", "recompilation", None, "warning"),
    ("index_by_step.py", "recompilation", None, "warning"),
    ("nonzero_in_loop.py", "op_fallback", None, "warning"),
    ("sync_mid_step.py", "graph_break", None, "warning"),
]


@pytest.mark.parametrize("script,kind,calls,severity", PLANTED, ids=[p[0] for p in PLANTED])
def test_planted_problem_found_at_its_line(profiled, script, kind, calls, severity):
    path = SCRIPTS / script
    proc, report, _ = profiled(path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    found = [f for f in report["findings"] if f["kind"] == kind and f["severity"] == severity]
    assert found, f"no {kind} {severity}; findings: {[(f['kind'], f['severity']) for f in report['findings']]}"
    if severity == "info":
        assert not [f for f in warnings_of(report) if f["kind"] == kind]
    f = found[0]
    assert f["location"] is not None, f
    assert f["location"]["file"] == str(path)
    assert f["location"]["line"] == planted_line(path), f
    assert "ptxla_perf" not in f["location"]["file"].replace(str(SCRIPTS), "")
    if calls:
        assert set(f["evidence"]["calls"]) & calls, f["evidence"]
    # the console summary names the finding and the line
    assert kind in proc.stderr and f"{script}:{planted_line(path)}" in proc.stderr


def test_recompilation_evidence_says_what_changed(profiled):
    report = profiled(SCRIPTS / "changing_batch.py").report
    f = next(f for f in report["findings"] if f["kind"] == "recompilation")
    assert f["evidence"]["cause"] == "input_shapes"
    assert any("input shape" in d for d in f["evidence"]["differences"])
    assert report["summary"]["recompiles_after_warmup"] >= 3

    report = profiled(SCRIPTS / "index_by_step.py").report
    f = next(f for f in report["findings"] if f["kind"] == "recompilation")
    assert f["evidence"]["cause"] == "constant"
    assert any("slice" in d for d in f["evidence"]["differences"]), f["evidence"]


def test_op_fallback_names_the_op(profiled):
    report = profiled(SCRIPTS / "nonzero_in_loop.py").report
    assert report["summary"]["fallback_ops"].get("aten::nonzero", 0) >= 6
    f = next(f for f in report["findings"] if f["kind"] == "op_fallback")
    assert f["evidence"]["op"] == "aten::nonzero"
    assert not [f for f in report["findings"] if f["kind"] == "device_to_host_sync" and f["severity"] == "warning"]


@pytest.mark.parametrize("script", ["item_fixed.py", "clean_loop.py", "step_trace_loop.py", "mp_loader_loop.py"])
def test_clean_loop_has_no_warnings(profiled, script):
    proc, report, _ = profiled(SCRIPTS / script)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert warnings_of(report) == [], [(f["kind"], f["message"]) for f in warnings_of(report)]
    s = report["summary"]
    assert s["recompiles_after_warmup"] == 0
    assert s["device_to_host_per_step"] == 0
    assert s["fallback_ops"] == {}
    assert report["run"]["status"] == "completed"
    # the one read after the loop is recorded as such, never as a step
    if script == "item_fixed.py":
        assert report["run"]["after_last_step"]["device_to_host"] >= 1


def test_changing_python_float_does_not_recompile(profiled):
    """torch_xla 2.9 feeds Python floats as device data: a new value is not a new graph."""
    report = profiled(SCRIPTS / "changing_float.py").report
    assert report["summary"]["recompiles_after_warmup"] == 0
    assert not warnings_of(report)


def test_step_records_carry_the_counters(profiled):
    report = profiled(SCRIPTS / "item_per_step.py").report
    steps = report["steps"]
    assert len(steps) == 8
    assert all(s["device_to_host_transfers"]["count"] >= 1 for s in steps)
    assert all("boundaries" not in s and s["executions"] >= 1 for s in steps)  # one sync per step
    assert steps[0]["compiles"] >= 1 and steps[0]["compile_time_s"] > 0
    assert sum(s["compiles"] for s in steps[3:]) == 0
    assert all(s["site"]["line"] == planted_line(SCRIPTS / "item_per_step.py") + 1 for s in steps)
    assert report["environment"]["versions"]["torch_xla"] == metadata.version("torch_xla")  # 2.8 in make test-compat
    assert report["environment"]["device_kind"] == "CPU"


def test_mp_device_loader_marks_the_steps(profiled):
    report = profiled(SCRIPTS / "mp_loader_loop.py").report
    # 10 batches: the loader's own mark_step ends each one; it also syncs once before the first batch and once
    # when exhausted - boundaries that run nothing, kept inside the first and last iteration
    assert report["summary"]["steps"] == 10 and len(report["steps"]) == 10
    assert all(s["executions"] == 1 for s in report["steps"])
    assert report["summary"]["boundaries"] == 12
    assert len(report["steps"][0]["boundaries"]) == 2 and len(report["steps"][-1]["boundaries"]) == 2
    assert report["summary"]["warmup_steps"] >= 1
    assert report["summary"]["recompiles_after_warmup"] == 0


@pytest.mark.parametrize("script,kind", [("item_per_step.py", "device_to_host_sync"),
                                         ("index_by_step.py", "recompilation")])
def test_attribution_always_and_off(profiled, script, kind):
    path = SCRIPTS / script
    report = profiled(path, "--attribution", "always").report
    f = next((f for f in warnings_of(report) if f["kind"] == kind), None)
    # (a compat leg at load ~5 once had no such warning: say what the report had, to tell why)
    assert f is not None, ([(x["kind"], x["severity"], x["count"], x["message"][:200]) for x in report["findings"]],
                           report["summary"]["steps"], report["run"].get("status"), report.get("profiler_errors"))
    assert f["location"]["line"] == planted_line(path)
    assert all(s["attributed"] for s in report["steps"])
    # off: counters only; the problem is still reported, without a line
    report = profiled(path, "--attribution", "off").report
    f = next(f for f in warnings_of(report) if f["kind"] == kind)
    assert not any(s["attributed"] for s in report["steps"])
    assert f["location"] is None or f["location"]["line"] != planted_line(path)


def test_script_without_steps_says_so(profile, tmp_path):
    script = tmp_path / "no_sync.py"
    script.write_text("import torch, torch_xla\n"
                      "x = torch.ones(3, device=torch_xla.device())\n"
                      "print(x.sum().item())\n")
    proc, report = profile(script)
    assert proc.returncode == 0
    assert [f["kind"] for f in warnings_of(report)] == ["no_steps"]
    assert report["summary"]["steps"] == 0
