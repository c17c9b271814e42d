"""Under `profile`, every jitted call stays on JAX's C++ dispatch path: a transfer guard that trips inside a
call marks that signature `fall_back_to_python` for good (jaxlib's PjitFunction), and every later call then
takes the Python path (x5-10 per call on a small step). The script counts JAX's own C++ cache misses over 40
steady NumPy-fed calls, for each way users jit a step, in one run."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import SCRIPTS, cli_env, xla_flags

SCRIPT = SCRIPTS / "jax_fast_path.py"
TWO_DEVICES = {"XLA_FLAGS": xla_flags("--xla_force_host_platform_device_count=2")}
STYLES = ("jit", "static", "nnx", "pmap", "shard_map")


@pytest.mark.slow
def test_steady_numpy_fed_calls_never_leave_the_cpp_dispatch_path(profile, tmp_path):
    counts = tmp_path / "counts.json"
    proc, report = profile(SCRIPT, str(counts), **TWO_DEVICES)
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(counts.read_text())
    assert set(got) == set(STYLES)
    assert all(got[s]["probe"] == 1 for s in STYLES), got  # the counter counts: a new batch shape is one miss
    assert {s: got[s]["misses"] for s in STYLES} == dict.fromkeys(STYLES, 0), got
    plain = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "plain.json")], cwd=tmp_path,
                           env=cli_env(**TWO_DEVICES), capture_output=True, text=True, timeout=300)
    assert plain.returncode == 0, plain.stderr[-2000:]  # the program's output is its own
    assert plain.stdout == "".join(line + "\n" for line in proc.stdout.splitlines() if " call " in line)
