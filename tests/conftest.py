"""Shared helpers: run the real CLI in a subprocess (torch_xla on the CPU) and load what it wrote."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "tests" / "scripts"


def cli_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("PJRT_DEVICE", "CPU")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    env.update(extra)
    return env


def run_cli(*args: str, cwd: str | Path | None = None, timeout: float = 300, **env: str):
    return subprocess.run([sys.executable, "-m", "ptxla_perf", *args], cwd=cwd, env=cli_env(**env),
                          capture_output=True, text=True, timeout=timeout)


def load_report(path: str | Path) -> dict:
    from ptxla_perf.report import validate
    data = json.loads(Path(path).read_text())
    validate(data)
    return data


@pytest.fixture
def profile(tmp_path):
    """Run `python -m ptxla_perf profile` on a script; return (completed process, validated report)."""
    def _run(script: str | Path, *script_args: str, options: tuple[str, ...] = (), **env: str):
        report = tmp_path / "report.json"
        proc = run_cli("profile", "--port", "none", "--report", str(report), *options, str(script),
                       *script_args, cwd=tmp_path, **env)
        assert report.exists(), f"no report written\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr[-4000:]}"
        return proc, load_report(report)
    return _run


def planted_line(script: str | Path, tag: str = "PLANTED") -> int:
    """The line of the script marked `# PLANTED: ...`: the line a finding must point at."""
    for n, line in enumerate(Path(script).read_text().splitlines(), 1):
        if f"# {tag}" in line:
            return n
    raise AssertionError(f"{script} has no '# {tag}' line")
