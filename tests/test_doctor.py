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
    assert doctor.in_range("jax", "0.10.2") and doctor.in_range("jax", "0.7.2") and doctor.in_range("jax", "0.7")
    assert doctor.in_range("jax", "0.12.0.1") and doctor.in_range("jax", "0.11.2")  # the newest measured (issue 38)
    assert doctor.in_range("jax", "0.6.2") is False and doctor.in_range("jax", "0.12.1") is False
    assert doctor.in_range("torch_xla", "2.9.0+git1234") and not doctor.in_range("torch_xla", "2.10.0")
    feats = doctor.features({"jax": "0.10.2", "flax": "0.12.8", "torch_xla": None, "xprof": None})
    assert feats["profile jax scripts"] == "on"
    assert "ptxla_perf[torch_xla]" in feats["profile torch_xla scripts"]
    assert "ptxla_perf[capture]" in feats["capture / analyze device tables"]
    assert "on, jax 0.6.2 is older than the supported range (0.7.0 to 0.12.0.1)" in doctor.features({"jax": "0.6.2"})["profile jax scripts"]


def test_a_jax_newer_than_measured_is_on_and_not_measured_here():
    """Newer than the newest run (0.12.0.1): on, and said as not measured here - not "outside the supported range",
    not "features that need a newer API" (issue 38: doctor flagged jax 0.11.2, which ran every job, that way)."""
    line = doctor.features({"jax": "0.13.0", "jaxlib": "0.13.0", "flax": "0.13.0"})["profile jax scripts"]
    assert line.startswith("on, jax 0.13.0 is newer than measured (0.7.0 to 0.12.0.1): not measured here"), line
    assert "newer API" not in line and "outside" not in line
    info = {"python": {"version": "3.13.0", "supported": True}, "platform": "Linux", "environment": {},
            "packages": {"jax": "0.13.0", "torch": "2.9.0+cu128"}, "features": {}, "devices": {},
            "profiler_port": {"port": 9012, "free": True}}
    text = "\n".join(doctor.render(info))
    assert "jax                         0.13.0  (newer than measured (0.7.0 to 0.12.0.1): not measured here)" in text
    assert "torch                       2.9.0+cu128  (measured (2.8.0 to 2.9.0))" in text


def test_no_hint_replaces_the_installed_framework():
    """A hint's pip command pins the framework installed (issue 38: "pip install 'ptxla_perf[jax]'" for the JAX
    recipes would have replaced jax 0.12 with 0.10.2); torch_xla's hint names the series built for the torch there."""
    feats = doctor.features({"jax": "0.12.0.1", "jaxlib": "0.12.0.1", "flax": None})
    assert feats["JAX recipes (rnn_jax, vit_mesh, dp_jax)"] == \
        "off: needs flax (pip install flax 'jax==0.12.0.1' 'jaxlib==0.12.0.1')"
    assert "jax-recipes" in doctor.features({}, python=(3, 11))["JAX recipes (rnn_jax, vit_mesh, dp_jax)"]
    feats = doctor.features({"torch": "2.9.1", "torch_xla": None})
    assert feats["profile torch_xla scripts"] == "off: needs torch_xla (pip install 'torch_xla==2.9.*' 'torch==2.9.1')"
    line = doctor.features({"torch": "2.15.0", "torch_xla": None})["torch_xla recipes (mlp, matmul)"]
    assert "built for torch 2.8 to 2.9, not this torch 2.15.0" in line and "a venv of its own" in line
    # Python 3.10: jax >= 0.7 has no release for it, so no pip command is suggested (issue 38: on 3.10 `doctor` must
    # work; `pip install 'ptxla_perf[jax]'` cannot resolve there)
    feats = doctor.features({"torch": "2.9.0", "torch_xla": "2.9.0"}, python=(3, 10))
    assert feats["profile jax scripts"] == "off: needs jax; jax >= 0.7.0 needs Python >= 3.11 (this is 3.10)"
    assert "pip install" not in feats["JAX recipes (rnn_jax, vit_mesh, dp_jax)"]
    assert "ptxla_perf[jax]" in doctor.features({}, python=(3, 11))["profile jax scripts"]


def test_a_recipe_hint_keeps_the_installed_jax():
    """The runner's one line for a recipe whose package is missing (requires.py) names flax's extra with the jax
    installed here pinned: pip then picks a flax for that jax instead of replacing it."""
    from importlib import metadata

    from ptxla_perf.runner import requires
    assert requires.keep({"jax": "0.12.0.1", "jaxlib": "0.12.0.1", "torch": None}) == \
        " 'jax==0.12.0.1' 'jaxlib==0.12.0.1'"
    exc = ModuleNotFoundError("No module named 'flax'", name="flax")
    line = requires.missing_package(exc) if not requires.installed("flax") else requires.install("jax-recipes")
    assert "pip install 'ptxla_perf[jax-recipes]'" in line
    try:
        assert f"'jax=={metadata.version('jax')}'" in line
    except metadata.PackageNotFoundError:
        assert "jax==" not in line
