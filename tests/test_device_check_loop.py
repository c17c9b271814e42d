"""benchmarks/device_check.py's training loops (issue 36): the table row built from recorded runs (a real
`--cpu-smoke` run's figures, trimmed to what the row reads), the analytic FLOPs, and - slow - one real pair.
No timing is asserted: the figures are whatever the recorded run measured."""
from __future__ import annotations

import copy
import importlib
import json
import statistics
import subprocess
import sys

import pytest

from conftest import ROOT, cli_env

RECORDED = json.loads((ROOT / "tests" / "fixtures" / "device_check_loops.json").read_text())


def _load(name: str):
    """A benchmarks/ module, with its siblings importable only while it loads."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))


device_loop = _load("device_loop")
device_check = _load("device_check")


def _ms(run):
    return run["bench"]["ms_per_step"]


@pytest.mark.parametrize("result", RECORDED, ids=[r["name"] for r in RECORDED])
def test_loop_row_compares_the_loops_own_clock_with_the_report(result):
    row = device_loop.loop_row(result)
    runs = result["runs"]
    plain = [r for r in runs if not r["profiled"] and r["tag"] != "truth"]
    profiled = [r for r in runs if r["profiled"]]
    truth = next(r for r in runs if r["tag"] == "truth")
    assert len(plain) == len(profiled) == 3 and row["status"] == "ok"
    # the three columns, from the loop's own ms/step: pair i's profiled run over pair i's plain run
    ratios = [_ms(a) / _ms(b) for a, b in zip(profiled, plain)]
    assert row["plain ms/step"] == f"{statistics.median(map(_ms, plain)):.3g}"
    assert row["profiled/plain"] == f"x{statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f})"
    assert row["truth ms/step"] == f"{_ms(truth):.3g}"
    # the report's side: the last profiled run's step time, its parts largest first, FLOPs against the analytic count
    s = profiled[-1]["report"]["summary"]
    assert row["report step p50 ms"] == f"{s['step_time_s']['p50'] * 1e3:.3g}"
    assert row["report/truth"] == f"{s['step_time_s']['p50'] * 1e3 / _ms(truth):.2f}"
    assert row["parts (largest first)"].startswith(s["time_breakdown"]["largest"] + " ")
    assert row["verdict"] == s["roofline_verdict"]
    assert row["TFLOP/step analytic"] == f"{device_loop.analytic_flops(result['config']) / 1e12:.4g}"
    peak = profiled[-1]["report"]["roofline"]["peak"]["flops_per_s"]
    assert row["MFU analytic, truth time"] == f"{100 * result['analytic_flops'] / (_ms(truth) / 1e3) / peak:.1f}%"
    timed = plain[0]["bench"]["timed_steps"]
    misses = [r["bench"]["cpp_cache_misses"] for r in plain + profiled]
    assert row["C++ misses plain, profiled"] == (f"{'/'.join(map(str, misses[:3]))}, "
                                                 f"{'/'.join(map(str, misses[3:]))} of {timed}")


def test_a_failed_run_is_named_and_the_other_pairs_still_count():
    result = copy.deepcopy(RECORDED[0])
    broken = next(r for r in result["runs"] if r["tag"] == "profiled_2")
    del broken["bench"], broken["report"]
    broken.update(exit_code=1, error="RuntimeError: boom")
    row = device_loop.loop_row(result)
    assert row["status"] == "1 failed: profiled_2: RuntimeError: boom" and not device_loop.loop_ok(result)
    plain = [r for r in result["runs"] if not r["profiled"] and r["tag"] != "truth"]
    profiled = [r for r in result["runs"] if r["profiled"]]
    ratios = [_ms(a) / _ms(b) for a, b in zip(profiled, plain) if "bench" in a]
    assert len(ratios) == 2 and row["profiled/plain"].startswith(f"x{statistics.median(ratios):.2f} (")
    assert row["truth ms/step"] != "-" and row["report step p50 ms"] != "-"  # the last profiled run's report


def test_analytic_flops_count_the_matmuls_and_attention():
    cfg = dict(layers=1, d_model=32, heads=2, seq=16, batch=4, vocab=64)
    # 6 x (12 d^2 per layer + d V) x tokens, plus 12 L T d x tokens for q@k and att@v, forward and backward
    assert device_loop.analytic_flops(cfg) == 6 * (12 * 32 * 32 + 32 * 64) * 64 + 12 * 1 * 16 * 32 * 64


def test_the_table_puts_the_three_columns_first():
    rows = [device_loop.loop_row(r) for r in RECORDED]
    header = device_check.markdown(rows).splitlines()[0]
    assert "| plain ms/step | profiled/plain | truth ms/step |" in header
    assert [line.split(" | ")[0] for line in device_check.markdown(rows).splitlines()[2:]] == [
        "| gpt_launch", "| gpt_device"]


def test_unknown_job_is_one_line_and_exit_2(tmp_path):
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "device_check.py"), "--only", "gpt_tiny",
                           "--out", str(tmp_path / "out")], env=cli_env(), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "--only: unknown job gpt_tiny" in proc.stderr and not (tmp_path / "out").exists()


@pytest.mark.slow
def test_cpu_smoke_loop_fills_the_three_columns(tmp_path):
    pytest.importorskip("optax")
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "device_check.py"), "--cpu-smoke",
                           "--only", "gpt_launch", "--pairs", "1", "--out", str(tmp_path)], env=cli_env(),
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    (row,) = json.loads((tmp_path / "device_check.json").read_text())["loop_rows"]
    assert row["run"] == "gpt_launch" and row["status"] == "ok"
    for col in ("plain ms/step", "profiled/plain", "truth ms/step", "report step p50 ms", "parts (largest first)",
                "MFU analytic, report time"):
        assert row[col] != "-", col
    assert row["C++ misses plain, profiled"].startswith("0, ")  # the plain loop stays on JAX's C++ path
    assert "| gpt_launch |" in proc.stdout
