"""`profile` finds the backend from what the program does (issue 38): the framework it imports, wherever and
however (an import list, a module of the script's own, importlib), never from the script's text; nothing of the
framework is loaded before the script's own import. A program whose framework import fails, or that imports
neither, runs exactly as without us, then one line says why nothing was profiled."""
from __future__ import annotations

import subprocess
import sys
import types

import pytest

from conftest import SCRIPTS, cli_env, load_report, planted_line, run_cli

JAX_ENV = {"JAX_PLATFORMS": "cpu"}


def plain(script, *args, cwd, **env) -> subprocess.CompletedProcess:
    """The script run by Python itself: what the program does without us."""
    return subprocess.run([sys.executable, str(script), *args], cwd=cwd, env=cli_env(**env), capture_output=True,
                          text=True, timeout=300)


def profile(tmp_path, script, *options, **env):
    report = tmp_path / "r.json"
    proc = run_cli("profile", "--port", "none", "--report", str(report), *options, str(script), cwd=tmp_path,
                   fork=False, **env)  # a fresh interpreter: nothing imported before the program
    return proc, report


@pytest.mark.parametrize("script,steps,planted", [
    ("jax_import_in_list.py", 8, "jax_import_in_list.py"),  # `import time, numpy as np, jax`: no `import jax` line
    ("jax_entry/main.py", 8, "jax_entry/train.py"),  # main.py imports train.py, its module beside it, which imports jax
    ("jax_importlib.py", 6, "jax_importlib.py"),  # importlib.import_module("jax")
])
def test_jax_is_found_from_the_programs_import(tmp_path, script, steps, planted):
    proc, report = profile(tmp_path, SCRIPTS / script, **JAX_ENV)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr and "nothing profiled" not in proc.stderr, proc.stderr[-3000:]
    assert proc.stdout == plain(SCRIPTS / script, cwd=tmp_path, **JAX_ENV).stdout  # the program's own output
    data = load_report(report)
    assert data["backend"] == "jax" and data["run"]["status"] == "completed"
    assert data["summary"]["steps"] == steps
    reads = [f for f in data["findings"] if f["kind"] == "device_to_host_sync"]
    assert reads and reads[0]["location"]["file"] == str(SCRIPTS / planted)
    assert reads[0]["location"]["line"] == planted_line(SCRIPTS / planted)
    assert data["run"]["backend_choice"] == "auto"
    assert data["run"]["backend_detection"].startswith(f"jax imported at {SCRIPTS / planted}:")


def test_no_framework_is_loaded_before_the_scripts_own_import(tmp_path):
    """The script's first line lists the frameworks already loaded: none, as under plain Python (the adapter's
    import had loaded JAX or torch_xla before the script ran: a JAX_PLATFORMS it set came too late)."""
    proc, _ = profile(tmp_path, SCRIPTS / "jax_import_in_list.py", "--backend", "jax", **JAX_ENV)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.splitlines()[0] == "frameworks before the import: []"


def test_torch_xla_script_that_imports_jax_first_is_torch_xla(tmp_path):
    """`import jax` sorted before `import torch_xla` (a JAX utility): torch_xla takes over before any JAX step."""
    proc, report = profile(tmp_path, SCRIPTS / "torch_xla_with_jax_utility.py")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "done True" in proc.stdout
    data = load_report(report)
    assert data["backend"] == "torch_xla" and data["summary"]["steps"] == 5
    assert data["run"]["backend_detection"].startswith("torch_xla imported at ")


def test_a_jax_program_that_imports_torch_xla_after_its_jitted_calls_stays_jax(tmp_path):
    """Its 5 jitted calls are not steps yet (the step function is decided at the end), but they ran: JAX stays."""
    proc, report = profile(tmp_path, SCRIPTS / "jax_then_torch_xla.py", **JAX_ENV)
    assert proc.returncode == 0 and "done torch_xla" in proc.stdout, proc.stderr[-3000:]
    data = load_report(report)
    assert data["backend"] == "jax" and data["summary"]["steps"] == 5


@pytest.mark.xdist_group("txla_scripts")  # clean_loop.py's run is test_profile_findings.py's
def test_torch_xla_script_is_found_from_its_import(profiled):
    proc, data, _ = profiled(SCRIPTS / "clean_loop.py")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert data["backend"] == "torch_xla" and data["summary"]["steps"] == 10
    assert data["run"]["backend_detection"] == f"torch_xla imported at {SCRIPTS / 'clean_loop.py'}:3"


_BLOCK_TORCH = '''
import importlib.abc, sys
class _Absent(importlib.abc.MetaPathFinder):
    """torch is not installed (torch_xla is): its import fails as in such a venv."""
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] == "torch":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, _Absent())
'''


def test_a_missing_framework_is_one_line_and_the_programs_own_error(tmp_path):
    """torch_xla without torch: the script runs as it would without us (its output, its own traceback, its exit
    code), then one line names the extra. It had been our 13-line traceback, and the script never ran."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(_BLOCK_TORCH)
    script = tmp_path / "needs_torch.py"
    script.write_text("print('started')\nimport torch_xla\nprint('never')\n")
    env = {"PYTHONPATH": f"{site}:{cli_env()['PYTHONPATH']}"}
    proc, report = profile(tmp_path, script, **env)
    without = plain(script, cwd=tmp_path, **env)
    assert without.returncode == 1 and "No module named 'torch'" in without.stderr  # the blocker works
    assert proc.returncode == without.returncode and proc.stdout == without.stdout == "started\n"
    ours = proc.stderr[len(without.stderr):].splitlines()
    assert proc.stderr.startswith(without.stderr), proc.stderr[-3000:]  # the program's traceback, as Python's
    assert len(ours) == 1 and ours[0].startswith("ptxla_perf: nothing profiled: the program's import of torch_xla")
    assert "pip install 'ptxla_perf[torch_xla]'" in ours[0]
    assert not report.exists()


def test_a_program_that_imports_neither_runs_as_it_would(tmp_path):
    script = tmp_path / "neither.py"
    script.write_text("import sys\nprint('hello', sys.argv[1:])\nsys.exit(3)\n")
    proc = run_cli("profile", "--port", "none", str(script), "a", cwd=tmp_path, fork=False)
    assert proc.returncode == 3 and proc.stdout == "hello ['a']\n"
    assert proc.stderr.strip().splitlines() == [
        "ptxla_perf: nothing profiled: the program imported neither torch_xla nor jax; no report written"]
    assert not (tmp_path / "ptxla_perf_report.json").exists()


def test_a_named_backend_is_kept(tmp_path):
    """--backend torch_xla on a JAX program: the named backend is the only one watched; JAX is not taken instead."""
    proc, report = profile(tmp_path, SCRIPTS / "jax_importlib.py", "--backend", "torch_xla", **JAX_ENV)
    assert proc.returncode == 0 and "done True" in proc.stdout, proc.stderr[-3000:]
    assert proc.stderr.strip().splitlines() == [
        "ptxla_perf: nothing profiled: the program never imported torch_xla (--backend torch_xla); no report written"]
    assert not report.exists()


# --- the watch itself, in this process, on a package of the test's own ------------------------------------------
@pytest.fixture
def pkg(tmp_path, monkeypatch):
    """A package `fw_demo` that records, when its import completes, whether the watch had been told already."""
    (tmp_path / "fw_demo").mkdir()
    (tmp_path / "fw_demo" / "__init__.py").write_text("VALUE = 1\n")
    (tmp_path / "fw_broken.py").write_text("import not_a_module_anywhere_xyz\n")
    (tmp_path / "user_mod.py").write_text("import os, fw_demo\nSEEN = list(__import__('events').SEEN)\n")
    events = types.ModuleType("events")
    events.SEEN = []
    monkeypatch.setitem(sys.modules, "events", events)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield events
    for name in ("fw_demo", "fw_broken", "user_mod", "fw_absent_xyz"):
        sys.modules.pop(name, None)


def _watch(events):
    from ptxla_perf.runner.import_watch import ImportWatch
    return ImportWatch(["fw_demo", "fw_broken", "fw_absent_xyz"], lambda name: events.SEEN.append(("import", name)),
                       lambda name, exc: events.SEEN.append(("failed", name, type(exc).__name__))).install()


@pytest.mark.parametrize("how", ["module", "__import__", "importlib"])
def test_the_watch_is_told_before_the_importing_statement_goes_on(pkg, how):
    import importlib
    watch = _watch(pkg)
    try:
        if how == "module":  # `import os, fw_demo` in a module of the program's own
            assert importlib.import_module("user_mod").SEEN == [("import", "fw_demo")]
        elif how == "__import__":
            __import__("fw_demo")
        else:
            importlib.import_module("fw_demo")
    finally:
        watch.remove()
    assert pkg.SEEN == [("import", "fw_demo")]
    mod = sys.modules["fw_demo"]
    from importlib.machinery import SourceFileLoader
    assert type(mod.__loader__) is SourceFileLoader and mod.__spec__.loader is mod.__loader__  # its own loader
    assert importlib.import_module("fw_demo") is mod and pkg.SEEN == [("import", "fw_demo")]  # once


def test_the_watch_is_told_of_failed_imports_which_go_on_unchanged(pkg):
    watch = _watch(pkg)
    try:
        with pytest.raises(ModuleNotFoundError, match="not_a_module_anywhere_xyz"):
            import fw_broken  # noqa: F401
        with pytest.raises(ModuleNotFoundError, match="fw_absent_xyz"):
            import fw_absent_xyz  # noqa: F401
    finally:
        watch.remove()
    assert pkg.SEEN == [("failed", "fw_broken", "ModuleNotFoundError"), ("failed", "fw_absent_xyz",
                                                                          "ModuleNotFoundError")]


def test_torch_xla_takes_over_only_before_the_program_ran_jax():
    from ptxla_perf.runner.which_backend import detect_backend, takes_over
    assert detect_backend({"jax", "torch_xla"}) == "torch_xla" and detect_backend(set()) is None
    assert takes_over("jax", "torch_xla", ran=False)
    assert not takes_over("jax", "torch_xla", ran=True)
    assert not takes_over("torch_xla", "jax", ran=False)
