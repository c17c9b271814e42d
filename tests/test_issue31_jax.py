"""Issue 31 on JAX loops written for it (tests/scripts/): growth held in a dict of lists or a dataclass's dict is
found and named (item 3); growth and eager uploads are rated by what they cost, not by being there (item 4);
`pmap(..., donate_argnums=...)` is known to donate (item 5); the roofline's utilisation is HFU, with model-FLOPs
MFU beside it where the model FLOPs are given (item 8)."""
from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import SCRIPTS, cli_env, load_report, planted_line

# the `profiled` runs are read by several tests each: one xdist worker, so that each is made once
pytestmark = pytest.mark.xdist_group("issue31_jax")

pytest.importorskip("jax")

METRICS = SCRIPTS / "jax_metrics_dict.py"
VMAP = SCRIPTS / "jax_vmap_upload.py"


def _kinds(report, kind):
    return [f for f in report["findings"] if f["kind"] == kind]


def _run(profiled, script, *args):
    run = profiled(script, "--backend", "jax", args=args)
    assert run.proc.returncode == 0, run.proc.stderr[-3000:]
    return run


@pytest.mark.parametrize("mode, holder, tag", [("dict", "metrics[", "PLANTED"),
                                               ("attr", "history.metrics[", "LOGGED")])
def test_growth_in_a_dict_of_lists_is_found_at_the_line_that_adds(profiled, mode, holder, tag):
    run = _run(profiled, METRICS, mode)
    (f,) = _kinds(run.report, "memory_growth")
    ev = f["evidence"]
    assert ev["holder_found"] is True and ev["holder"].startswith(holder), ev
    assert ev["holder"].endswith(("['loss']", "['acc']")), ev
    assert f["location"]["line"] == planted_line(METRICS, tag), f
    # two float32 scalars a step: megabytes in a million steps, nothing a device notices
    assert f["severity"] == "info", f
    assert ev["projected_steps"] == 1_000_000 and 0 < ev["projected_bytes"] < 2 ** 30, ev
    assert "1,000,000-step run keeps" in f["message"]


def test_growth_of_kept_weights_is_a_warning_naming_the_biggest_list(profiled):
    run = _run(profiled, METRICS, "dict", "weights")
    (f,) = _kinds(run.report, "memory_growth")
    ev = f["evidence"]
    assert f["severity"] == "warning" and ev["holder"] == "metrics['w']", f
    assert ev["shapes"] == ["[64, 32]"] and ev["projected_bytes"] >= 2 ** 30, ev
    assert f["location"]["line"] == planted_line(METRICS), f


def _rated_by_its_time(f: dict) -> None:
    """An eager upload's severity follows its measured dispatch time (eager_upload_min_s and _share of the step).
    What that time is on this machine is the load's: the verdicts on recorded steps are test_timing_verdicts.py's."""
    ev = f["evidence"]
    costly = ev["seconds_per_iteration"] >= 0.001 and ev["share_of_step"] >= 0.1
    assert f["severity"] == ("warning" if costly else "info"), f


def test_tiny_eager_upload_in_an_unjitted_vmap_is_info_said_in_time(profiled):
    run = _run(profiled, VMAP)
    (f,) = _kinds(run.report, "host_to_device_transfer")
    assert f["location"]["line"] == planted_line(VMAP), f
    _rated_by_its_time(f)
    ev = f["evidence"]
    assert ev["bytes_per_iteration"] == 4 and ev["seconds_per_iteration"] > 0, ev
    assert " per iteration (" in f["message"] and "an eager dispatch each" in f["message"], f["message"]


def test_eager_upload_that_takes_the_step_is_a_warning(profiled):
    run = _run(profiled, VMAP, "bulk")
    by_line = {f["location"]["line"]: f for f in _kinds(run.report, "host_to_device_transfer")}
    bulk, tiny = by_line[planted_line(VMAP, "BULK")], by_line[planted_line(VMAP)]
    assert bulk["evidence"]["bytes_per_iteration"] > tiny["evidence"]["bytes_per_iteration"] == 4, by_line
    for f in (bulk, tiny):
        _rated_by_its_time(f)


PMAP = SCRIPTS / "jax_pmap_donate.py"


def test_pmap_that_donates_is_not_told_it_donates_none(profiled):
    run = _run(profiled, PMAP)
    (g,) = [g for g in run.report["memory"]["graphs"] if g["id"] == "update"]
    assert g["alias_bytes"] > 0 and g["donates"] is True, g
    assert not _kinds(run.report, "missing_donation")


def test_pmap_that_keeps_its_weights_is_told(profiled):
    run = _run(profiled, PMAP, "keep")
    (f,) = _kinds(run.report, "missing_donation")
    assert f["evidence"]["argument"] == ["w"] and f["evidence"]["shapes"][0][-2:] == [32, 16], f


CLEAN = SCRIPTS / "jax_clean.py"
BLOCK = SCRIPTS / "jax_model_flops.py"


def test_model_flops_given_by_set_step_info_give_mfu_beside_hfu(tmp_path):
    out = tmp_path / "report.json"
    proc = subprocess.run([sys.executable, str(BLOCK), str(out)], cwd=tmp_path, env=cli_env(), capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    given = float(next(ln for ln in proc.stdout.splitlines() if ln.startswith("MODEL_FLOPS")).split()[1])
    rep = load_report(out)
    roof = rep["roofline"]
    assert roof["hfu"] is not None and roof["mfu"] == roof["hfu"], roof
    assert roof["model_flops_per_step"] == given
    # the same time and peak: the two utilisations are in the ratio of their FLOPs
    assert roof["model_mfu"] == pytest.approx(roof["hfu"] * given / roof["flops_per_step"], rel=1e-6), roof
    # XLA's count includes what 6·N·tokens leaves out (softmax, gelu, the optimizer's update)
    assert roof["flops_per_step"] > given
    assert rep["summary"]["model_mfu"] == roof["model_mfu"] and rep["summary"]["hfu"] == roof["hfu"]
    assert all(s.get("model_flops") == given for s in rep["steps"]), rep["steps"][:2]


def test_model_flops_per_step_option_labels_hfu_and_mfu(profiled):
    run = profiled(CLEAN, "--backend", "jax", "--model-flops-per-step", "1000")
    assert run.proc.returncode == 0, run.proc.stderr[-3000:]
    roof = run.report["roofline"]
    assert roof["model_flops_per_step"] == 1000.0 and roof["model_mfu"] is not None, roof
    line = next(ln for ln in run.proc.stderr.splitlines() if ln.startswith("  roofline"))
    assert " HFU " in line and "MFU" in line.split("HFU", 1)[1] and "(model 1 kFLOP/step)" in line, line
    page = run.path.with_suffix(".html").read_text()
    assert "hardware FLOPs utilisation" in page and "model FLOPs utilisation" in page


def test_without_model_flops_only_hfu_is_given(profiled):
    run = profiled(CLEAN, "--backend", "jax")
    roof = run.report["roofline"]
    assert roof["model_mfu"] is None and roof["model_flops_per_step"] is None
    assert all("model_flops" not in s for s in run.report["steps"])
    line = next(ln for ln in run.proc.stderr.splitlines() if ln.startswith("  roofline"))
    assert "HFU" in line and "MFU" not in line.replace("HFU", ""), line


def test_growth_projection_follows_the_cost():
    """memory_growth's rating (pure logic): bytes/step over a million steps, against a share of a known capacity
    or, unknown, a 1 GiB floor."""
    from ptxla_perf.rules.memory import projection
    gib = 1 << 30
    assert projection(4.0) == (4e6, False, projection(4.0)[2])  # a scalar a step: 4 MB, info
    assert projection(2048.0)[1] is True  # 2 KiB a step: 2 GB in a million steps
    assert projection(2048.0, 16 * gib)[1] is True and projection(1024.0, 16 * gib)[1] is False  # 10 % of 16 GiB
    assert "of the device's 16.00 GiB" in projection(1024.0, 16 * gib)[2]
    assert projection(None) == (None, True, "its size unknown")
