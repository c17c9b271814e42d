"""One run of a self-timing workload, plain or under `python -m ptxla_perf profile`, for the benchmarks that compare
the two side by side (overhead.py's JAX workloads, device_check.py's training loops).

The workload writes its own figures (ms/step over its steady steps, C++ cache misses, ...) as JSON to the file the
environment variable BENCH_JSON names: `profile` runs the script in its own process, so the same code times both
runs on the same clock.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path


def run_workload(script: Path, script_args: list[str], *, profiled: bool, tag: str, workdir: Path,
                 env: dict[str, str], timeout_s: float, profile_args: list[str] = ()) -> dict:
    """Run `script` once; return its own figures (`bench`), the report when profiled (`report`), `exit_code`,
    `seconds`, and `error` (the last line of stderr) when either is missing."""
    workdir.mkdir(parents=True, exist_ok=True)
    bench_path, report_path = workdir / f"{tag}.bench.json", workdir / tag / "report.json"
    bench_path.unlink(missing_ok=True)
    cmd = [sys.executable, str(script), *script_args]
    if profiled:
        cmd = [sys.executable, "-m", "ptxla_perf", "profile", "--port", "none", "--report", str(report_path),
               *profile_args, str(script), *script_args]
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, cwd=workdir, env=dict(env, BENCH_JSON=str(bench_path)), capture_output=True,
                              text=True, timeout=timeout_s)
        code, stderr = proc.returncode, proc.stderr
    except subprocess.TimeoutExpired as exc:
        code = None
        stderr = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else (exc.stderr or "")
    (workdir / f"{tag}.log").write_text(stderr)
    out = {"tag": tag, "profiled": profiled, "exit_code": code, "seconds": round(time.perf_counter() - t0, 1)}
    if bench_path.is_file():
        out["bench"] = json.loads(bench_path.read_text())
    if profiled and report_path.is_file():
        out["report"] = json.loads(report_path.read_text())
    if code != 0 or "bench" not in out or (profiled and "report" not in out):
        tail = [ln for ln in stderr.strip().splitlines() if ln.strip()]
        out["error"] = "timed out" if code is None else (tail[-1] if tail else f"exit code {code}")
    return out


def ratio_stats(profiled: list[float], plain: list[float]) -> tuple[float, float, float] | None:
    """Median, min and max over pairs of profiled/plain (each pair's runs side by side)."""
    ratios = [a / b for a, b in zip(profiled, plain) if a and b]
    return (statistics.median(ratios), min(ratios), max(ratios)) if ratios else None
