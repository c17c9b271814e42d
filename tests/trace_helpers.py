"""Helpers shared by test_capture.py, test_analyze.py and test_tensorboard_browser.py: run the child jobs of
tests/scripts/trace_job.py and find their captures."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from conftest import xla_flags

ROOT = Path(__file__).resolve().parent.parent
JOB = ROOT / "tests" / "scripts" / "trace_job.py"


def child_env() -> dict:
    env = dict(os.environ)
    env["PJRT_DEVICE"] = "CPU"
    env["XLA_FLAGS"] = xla_flags("--xla_force_host_platform_device_count=8")
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    return env


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_job(*args, timeout=240) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, str(JOB), *map(str, args)], env=child_env(), capture_output=True,
                          text=True, timeout=timeout)
    assert proc.returncode == 0, f"job {args} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
    return proc


def start_server_job(*args, ready_timeout=180) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, str(JOB), *map(str, args)], env=child_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    deadline = time.time() + ready_timeout
    while time.time() < deadline:
        line = proc.stdout.readline()
        if "READY" in line:
            return proc
        if not line and proc.poll() is not None:
            break
    proc.kill()
    raise AssertionError(f"job {args} did not become ready (rc={proc.poll()})")


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def xplanes(logdir) -> list[Path]:
    return sorted(Path(logdir).glob("plugins/profile/*/*.xplane.pb"))


def cli(*args, timeout=120, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ptxla_perf", *map(str, args)], env=child_env(), cwd=cwd or ROOT,
                          capture_output=True, text=True, timeout=timeout)
