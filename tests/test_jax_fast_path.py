"""Under `profile`, every jitted call stays on JAX's C++ dispatch path: a transfer guard that trips inside a
call marks that signature `fall_back_to_python` for good (jaxlib's PjitFunction), and every later call then
takes the Python path (x5-10 per call on a small step). The script counts JAX's own C++ cache misses over 40
steady NumPy-fed calls, for each way users jit a step."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import SCRIPTS, cli_env

SCRIPT = SCRIPTS / "jax_fast_path.py"
TWO_DEVICES = {"XLA_FLAGS": "--xla_force_host_platform_device_count=2"}


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["jit", "static", "nnx", "pmap", "shard_map"])
def test_steady_numpy_fed_calls_never_leave_the_cpp_dispatch_path(profile, tmp_path, mode):
    counts = tmp_path / "counts.json"
    proc, report = profile(SCRIPT, mode, str(counts), **TWO_DEVICES)
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(counts.read_text())
    assert got["probe"] == 1  # the counter counts: a call with a new batch shape is one miss
    assert got["misses"] == 0, got
    assert report["summary"]["steps"] >= 40
    if mode == "jit":  # the program's output is its own
        plain = subprocess.run([sys.executable, str(SCRIPT), mode, str(tmp_path / "plain.json")], cwd=tmp_path,
                               env=cli_env(**TWO_DEVICES), capture_output=True, text=True, timeout=300)
        assert plain.returncode == 0 and plain.stdout == "".join(
            line + "\n" for line in proc.stdout.splitlines() if line.startswith("call ")), plain.stderr[-2000:]
