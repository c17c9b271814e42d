"""`python -m ptxla_perf doctor`: exits 0 and says what this install has, what device each framework sees here
(the real runtimes, in children), and whether a port is free."""
from __future__ import annotations

import json
import socket
import subprocess
import sys
from importlib import metadata

from conftest import cli_env

from ptxla_perf.commands import doctor


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _doctor(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ptxla_perf", "doctor", *args], env=cli_env(),
                          capture_output=True, text=True, timeout=600)


def test_doctor_json_names_versions_devices_and_peak():
    proc = _doctor("--json")
    assert proc.returncode == 0, proc.stderr[-2000:]
    info = json.loads(proc.stdout)
    assert info["python"]["version"].startswith(f"{sys.version_info[0]}.{sys.version_info[1]}.")
    here = [fw for fw in ("jax", "torch_xla") if _version(fw)]  # make test-compat's venvs have one of them
    assert here
    for fw in here:  # the real runtimes on the CPU (PJRT_DEVICE=CPU)
        assert info["packages"][fw] == _version(fw)
        dev = info["devices"][fw]
        assert "error" not in dev, dev
        assert dev["platform"].lower() == "cpu" and dev["count"] >= 1
        assert dev["memory_capacity"]["bytes"] is None  # no runtime figure, no spec row for a CPU
    assert all(info["features"][f"profile {fw} scripts"].startswith("on") for fw in here)
    assert isinstance(info["profiler_port"]["free"], bool) and info["profiler_port"]["port"] == 9012


def test_doctor_text_without_device_says_features_and_port():
    proc = _doctor("--no-device")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "not probed (--no-device)" in proc.stdout
    assert "profiler port 9012" in proc.stdout and "capture / analyze device tables" in proc.stdout


def test_port_free_sees_a_bound_port():
    with socket.socket() as s:
        s.bind(("", 0))
        s.listen()
        assert doctor.port_free(s.getsockname()[1]) is False


def test_supported_ranges_and_features_of_a_jax_only_install():
    assert doctor.in_range("jax", "0.10.2") and doctor.in_range("jax", "0.7.2")
    assert doctor.in_range("jax", "0.6.2") is False and doctor.in_range("jax", "0.11.0") is False
    assert doctor.in_range("torch_xla", "2.9.0+git1234") and not doctor.in_range("torch_xla", "2.10.0")
    feats = doctor.features({"jax": "0.10.2", "flax": "0.12.8", "torch_xla": None, "xprof": None})
    assert feats["profile jax scripts"] == "on"
    assert "ptxla_perf[torch_xla]" in feats["profile torch_xla scripts"]
    assert "ptxla_perf[capture]" in feats["capture / analyze device tables"]
    assert "outside the supported range" in doctor.features({"jax": "0.6.2"})["profile jax scripts"]
