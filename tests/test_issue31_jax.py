"""Issue 31 on JAX loops written for it (tests/scripts/): growth held in a dict of lists or a dataclass's dict is
found and named (item 3); growth and eager uploads are rated by what they cost, not by being there (item 4)."""
from __future__ import annotations

import pytest

from conftest import SCRIPTS, planted_line

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


def test_tiny_eager_upload_in_an_unjitted_vmap_is_info_said_in_time(profiled):
    run = _run(profiled, VMAP)
    (f,) = _kinds(run.report, "host_to_device_transfer")
    assert f["location"]["line"] == planted_line(VMAP) and f["severity"] == "info", f
    ev = f["evidence"]
    assert ev["bytes_per_iteration"] == 4 and ev["seconds_per_iteration"] > 0, ev
    assert " per iteration (" in f["message"] and "an eager dispatch each" in f["message"], f["message"]


def test_eager_upload_that_takes_the_step_is_a_warning(profiled):
    run = _run(profiled, VMAP, "bulk")
    by_line = {f["location"]["line"]: f for f in _kinds(run.report, "host_to_device_transfer")}
    bulk = by_line[planted_line(VMAP, "BULK")]
    assert bulk["severity"] == "warning" and bulk["evidence"]["share_of_step"] >= 0.1, bulk
    assert by_line[planted_line(VMAP)]["severity"] == "info"


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
