"""A run that dies out of memory keeps its report, which says why (issue 20, the OOM part): XLA's message is read
(oom.py) in the formats it prints on TPU and GPU, and the crash itself is the user's own: same exception, same
exit code."""
from __future__ import annotations

from pathlib import Path

import pytest

from conftest import SCRIPTS, cli_env, run_cli
from plain_runs import run_plain
from ptxla_perf.xla import oom

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "oom"
GiB = 2**30


def test_tpu_message_is_read():
    r = oom.parse((FIXTURES / "tpu.txt").read_text())
    assert r.memory_space == "hbm"
    assert r.used_bytes == pytest.approx(20.58 * GiB, rel=1e-3) and r.capacity_bytes == pytest.approx(15.48 * GiB, rel=1e-3)
    assert r.exceeded_bytes == pytest.approx(5.10 * GiB, rel=1e-3)
    assert r.usage["program"] == pytest.approx(20.58 * GiB, rel=1e-3) and r.usage["arguments"] == 0
    top = r.largest[0]
    assert (top.size_bytes, top.shape, top.op_type, top.source_line, top.allocation_type) == (
        4 * GiB, "f32[32768,32768]", "dot_general", 41, "HLO temp")
    assert [a.size_bytes for a in r.largest] == [4 * GiB, 2 * GiB] and r.largest[1].shape == "bf16[32768,32768]"


def test_gpu_message_is_read():
    r = oom.parse((FIXTURES / "gpu.txt").read_text())
    assert r.requested_bytes == 17179869184 and r.used_bytes == 24 * GiB
    assert r.usage["parameter"] == 4 * GiB and r.usage["preallocated temp"] == 16 * GiB
    assert [a.size_bytes for a in r.largest] == [16 * GiB, 4 * GiB]
    assert r.largest[0].source_file == "/home/me/model.py" and r.largest[0].source_line == 88
    assert r.largest[1].shape == "f32[32768,32768]"


def test_other_errors_are_not_oom():
    assert oom.parse("RuntimeError: shapes do not match") is None
    assert oom.size_bytes("512.0M") == 512 * 2**20 and oom.size_bytes("300B") == 300 and oom.size_bytes("x") is None


@pytest.mark.parametrize("fmt", ["tpu", "gpu"])
def test_a_run_that_dies_of_oom_keeps_its_report(tmp_path, fmt):
    script, text = SCRIPTS / "oom_crash.py", str(FIXTURES / f"{fmt}.txt")
    plain = run_plain(script, text, cwd=tmp_path, env=cli_env(), timeout=300)
    report = tmp_path / "report.json"
    prof = run_cli("profile", "--port", "none", "--report", str(report), str(script), text, cwd=tmp_path)
    assert plain.returncode == prof.returncode == 1 and plain.stdout == prof.stdout
    assert "RuntimeError: RESOURCE_EXHAUSTED" in prof.stderr  # the user's own exception, as Python shows it
    from conftest import load_report
    data = load_report(report)
    assert data["run"]["status"] == "crashed" and data["summary"]["steps"] == 4
    f = next(f for f in data["findings"] if f["kind"] == "oom")
    assert f["severity"] == "error" and f["evidence"]["largest"][0]["size_bytes"] == (4 if fmt == "tpu" else 16) * GiB
    assert "out of device memory" in f["message"] and "after 4 step boundaries" in f["message"]
    # joined with what the run measured: the step graph's largest buffers (w @ w, tanh: f32[32,32]) at its line
    bufs = f["evidence"]["memory"]["largest_buffers"]
    assert bufs and bufs[0]["shape"] == "f32[32,32]" and bufs[0]["bytes"] == 32 * 32 * 4, bufs
    assert "holds at its peak: " in f["message"] and "oom_crash.py:" in f["message"]
