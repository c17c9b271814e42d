"""A JAX that lacks some of the private or version-dependent names the backend uses (backends/jax/_private.py):
the run is the plain run (its output, its exit code, no traceback), the report is written, and its notes say what
was not measured. jax 0.6.2 and 0.8.0 have no public `jax.monitoring.unregister_*`: before the capability flags,
every such run's stop raised, the program exited 1 and no report was written."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytest.importorskip("jax")

from conftest import SCRIPTS, cli_env  # noqa: E402

JAX_ENV = {"JAX_PLATFORMS": "cpu"}

# runs the CLI after taking names away from jax, as an older or newer version would lack them
WITHOUT = """
import sys
import jax, jax.monitoring, jax._src.monitoring
for mod in (jax.monitoring, jax._src.monitoring):
    for name in [n for n in vars(mod) if "unregister" in n]:
        delattr(mod, name)
del jax.live_arrays
from ptxla_perf.cli import main
sys.exit(main())
"""


def test_profile_survives_a_jax_without_the_listener_api_and_says_what_was_not_measured(tmp_path):
    script = SCRIPTS / "jax_clean.py"
    report = tmp_path / "r.json"
    proc = subprocess.run([sys.executable, "-c", WITHOUT, "profile", "--port", "none", "--report", str(report),
                           str(script)], cwd=tmp_path, env=cli_env(**JAX_ENV), capture_output=True, text=True,
                          timeout=300)
    plain = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=cli_env(**JAX_ENV),
                           capture_output=True, text=True, timeout=300)
    assert proc.returncode == plain.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout == plain.stdout
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    data = json.loads(report.read_text())
    notes = data["run"]["attribution"]["notes"]
    assert any(n.startswith("not measured: live arrays") and "jax.live_arrays" in n for n in notes), notes
    assert any(n.startswith("not measured: removal of the compile listeners") for n in notes), notes
    # the features that do not need the missing names are measured as usual
    assert data["summary"]["steps"] == 12
    assert data["summary"]["compiles"] >= 1
    assert all("live_arrays" not in s for s in data["steps"])


def test_listeners_left_registered_are_inert_after_the_session(tmp_path, monkeypatch):
    """In-process: with no way to unregister, the session's listeners stay registered and count nothing after it
    ends (a later compile raises nothing and changes none of the finished session's figures)."""
    import jax
    import jax.monitoring
    from jax._src import monitoring as src

    from ptxla_perf.session import Session
    for mod in (jax.monitoring, src):
        for name in [n for n in vars(mod) if "unregister" in n]:
            monkeypatch.delattr(mod, name)
    s = Session("jax", report_path=str(tmp_path / "r.json"), port=None, console=False, handle_signals=False)
    s.start()
    f = jax.jit(lambda a: a + 1)
    x = jax.numpy.ones(3)
    for _ in range(4):
        x = f(x)
    report = s.finish()
    assert report["summary"]["compiles"] >= 1
    assert any("removal of the compile listeners" in n for n in report["run"]["attribution"]["notes"])
    ledger = s.adapter._ledger  # the finished session's counters
    before = (ledger.compiles, ledger.compile_time)
    assert jax.jit(lambda a: a * 3 - 1)(x).shape == (3,)  # compiles: our listener is still registered
    assert (ledger.compiles, ledger.compile_time) == before


def test_every_feature_is_on_with_the_installed_jax():
    """The supported JAX versions (0.6.2 through 0.12 by their sources) have every name the backend looks up: a
    feature off here is a renamed private name to handle in _private.py."""
    import dataclasses

    from ptxla_perf.backends.jax import _private as P
    caps = P.probe()
    flags = {f.name: getattr(caps, f.name) for f in dataclasses.fields(caps) if isinstance(getattr(caps, f.name), bool)}
    assert len(flags) == 11 and all(flags.values()), caps.off
    assert not [n for n in caps.notes() if n.startswith("not measured")]


def test_the_report_note_says_the_measured_range_as_doctor_does():
    """One range everywhere (issue 38: the report said "tested range 0.8.2 to 0.10.2", doctor 0.7 <= jax < 0.11):
    no note inside it, the newest release run (0.12.0.1) included; a newer one is "not measured here", not refused."""
    from ptxla_perf.backends.jax import _private as P
    from ptxla_perf.commands import doctor
    ls = P.listeners()
    assert P._version_note("0.7.0", ls) is None and P._version_note("0.12.0.1", ls) is None
    newer = P._version_note("0.13.0", ls)
    assert newer.startswith("jax 0.13.0 is newer than measured (0.7.0 to 0.12.0.1): not measured "
                            "here"), newer
    assert "older than the supported range (0.7.0 to 0.12.0.1)" in P._version_note("0.6.2", ls)
    assert "(0.7.0 to 0.12.0.1)" in doctor.features({"jax": "0.13.0"})["profile jax scripts"]
