"""JAX without torch: `pip install 'ptxla_perf[jax]'` has no torch, torch_xla, xprof, TensorBoard or jsonschema.
Here they are made absent in the children (a sitecustomize that makes their imports fail, as in a venv without
them) and the real CLI runs: a JAX script is profiled end to end, a torch_xla recipe says in one line what it needs,
`doctor` says what is off. (make test-compat and the README's matrix run the same in a real jax-only venv.)"""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytest.importorskip("jax")

from conftest import SCRIPTS, cli_env, run_app, run_cli  # noqa: E402

ABSENT = ("torch", "torch_xla", "torchvision", "xprof", "tensorboard", "tensorboard_plugin_profile", "jsonschema",
          "mmf")

_SITECUSTOMIZE = f'''
import importlib.abc, sys
ABSENT = {ABSENT!r}
class _Absent(importlib.abc.MetaPathFinder):
    """Finds nothing for the packages this environment does not have (as if not installed)."""
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in ABSENT:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None
sys.meta_path.insert(0, _Absent())
'''


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    site = tmp_path_factory.mktemp("no_torch_site")
    (site / "sitecustomize.py").write_text(_SITECUSTOMIZE)
    base = cli_env()
    # the blocker first, in every child (a spawned rank, doctor's device probes) as well
    return {"PYTHONPATH": f"{site}:{base['PYTHONPATH']}", "JAX_PLATFORMS": "cpu"}


def test_the_blocker_works(env, tmp_path):
    proc = subprocess.run([sys.executable, "-c", "import torch"], env=cli_env(**env), capture_output=True,
                          text=True)
    assert proc.returncode == 1 and "No module named 'torch'" in proc.stderr


def test_profile_of_a_jax_script_without_torch(env, tmp_path):
    proc = run_cli("profile", "--report", str(tmp_path / "r.json"), "--tensorboard", str(tmp_path / "tb"),
                   str(SCRIPTS / "jax_float_loss.py"), cwd=tmp_path, **env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "done True" in proc.stdout  # the script's own output
    assert "Traceback" not in proc.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["backend"] == "jax" and report["summary"]["steps"] == 8
    assert any(f["kind"] == "device_to_host_sync" for f in report["findings"])
    # the scalars are an optional part: one note naming the extra, the run and report go on
    assert "pip install 'ptxla_perf[tensorboard]'" in proc.stderr
    view = run_cli("view", str(tmp_path / "r.json"), "--out", str(tmp_path / "r.html"), cwd=tmp_path, **env)
    assert view.returncode == 0 and (tmp_path / "r.html").is_file(), view.stderr[-2000:]


def test_torch_xla_recipe_says_what_it_needs_in_one_line(env, tmp_path):
    proc = run_app("+recipe=mlp", "hydra.run.dir=run", cwd=tmp_path, **env)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "needs torch_xla" in lines[0] and "pip install 'ptxla_perf[torch_xla]'" in lines[0]


def test_doctor_without_torch(env, tmp_path):
    proc = run_cli("doctor", "--json", cwd=tmp_path, **env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    info = json.loads(proc.stdout)
    assert info["devices"]["jax"]["platform"] == "cpu"
    assert "torch_xla" not in info["devices"] or "error" in info["devices"]["torch_xla"]

