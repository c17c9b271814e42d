"""benchmarks/device_check.py's CPU dry run: the accelerator check's own plumbing (real runs through the runner and
`profile`, the table read from their reports, XLA's real out-of-memory message read as the `oom` finding) works
before it ever meets a GPU."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytest.importorskip("jax")

from conftest import ROOT, cli_env  # noqa: E402


@pytest.mark.slow
def test_cpu_smoke_writes_the_table_with_the_oom_finding(tmp_path):
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "device_check.py"), "--cpu-smoke",
                           "--only", "matmul,oom", "--out", str(tmp_path)], env=cli_env(), capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    rows = {r["run"]: r for r in json.loads((tmp_path / "device_check.json").read_text())["rows"]}
    assert set(rows) == {"matmul", "oom"}
    matmul = rows["matmul"]
    assert matmul["status"] == "completed (exit 0)" and matmul["HFU"] != "-" and matmul["XLA peak MiB"] != "-"
    assert rows["oom"]["status"].startswith("crashed") and "out of device memory" in rows["oom"]["oom finding"]
    table = (tmp_path / "device_check.md").read_text()
    assert "| matmul |" in table and "RESOURCE_EXHAUSTED" in table  # XLA's own message, whole, under the table
