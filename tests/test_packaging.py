"""`pip install .` (non-editable) gives a working CLI and runner from any directory: configs/ and recipes/ ship
inside the wheel as ptxla_perf.configs / ptxla_perf.recipes. The metadata installs beside a user's framework: the
frameworks and heavy parts are extras, Python 3.10-3.13."""
from __future__ import annotations

import email
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import zipfile

import pytest

from conftest import ROOT


pytestmark = pytest.mark.xdist_group("packaging")  # one wheel built for the module's tests: one xdist worker


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("wheel")
    # build from a clean copy: setuptools reuses <project>/build/, where stale files would hide a packaging bug
    src = tmp / "src"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(".venv", ".venv-*", ".git", "build", "*.egg-info", "outputs",
                                                              "multirun", "artifacts", "__pycache__", ".hypothesis"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
                    "-w", str(tmp / "dist"), str(src)], check=True, capture_output=True, text=True)
    wheel = next((tmp / "dist").glob("ptxla_perf-*.whl"))
    target = tmp / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target),
                    str(wheel)], check=True, capture_output=True, text=True)
    return wheel, target


def test_wheel_ships_configs_recipes_and_schema(installed):
    wheel, _ = installed
    names = set(zipfile.ZipFile(wheel).namelist())
    for needed in ("ptxla_perf/configs/config.yaml", "ptxla_perf/configs/recipe/mmf.yaml",
                   "ptxla_perf/configs/recipe/mlp.yaml", "ptxla_perf/recipes/mmf/__init__.py",
                   "ptxla_perf/recipes/mlp/__init__.py", "ptxla_perf/recipes/vit_mesh/__init__.py",
                   "ptxla_perf/schema/report.schema.json"):
        assert needed in names, needed
    assert not any(n.startswith(("configs/", "recipes/", "tests/")) for n in names)


def test_installed_cli_and_runner_work_from_another_directory(installed, tmp_path):
    _, target = installed
    env = dict(os.environ, PYTHONPATH=str(target), PJRT_DEVICE="CPU", TF_CPP_MIN_LOG_LEVEL="2")
    proc = subprocess.run([sys.executable, "-c", "import ptxla_perf; print(ptxla_perf.__file__)"], cwd=tmp_path,
                          env=env, capture_output=True, text=True)
    assert proc.stdout.startswith(str(target)), proc.stdout + proc.stderr
    proc = subprocess.run([sys.executable, "-m", "ptxla_perf", "--help"], cwd=tmp_path, env=env,
                          capture_output=True, text=True)
    assert proc.returncode == 0 and "profile" in proc.stdout and "diff" in proc.stdout
    # a recipe of the framework installed here (make test-compat's jax venv has no torch)
    recipe = ["+recipe=mlp"] if importlib.util.find_spec("torch_xla") else ["+recipe=matmul", "recipe.backend=jax"]
    proc = subprocess.run([sys.executable, "-m", "ptxla_perf.run", *recipe, "recipe.steps=3",
                           "profiler.port=null", "hydra.run.dir=run"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads((tmp_path / "run" / "report.json").read_text())
    assert report["summary"]["steps"] == 3
    assert report["run"]["config"]["recipe"]["name"] == recipe[0].split("=")[1]


def _metadata(wheel) -> email.message.Message:
    with zipfile.ZipFile(wheel) as z:
        name = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        return email.message_from_bytes(z.read(name))


def test_metadata_frameworks_are_extras_and_python_310_to_313(installed):
    meta = _metadata(installed[0])
    assert meta["Requires-Python"].replace(" ", "") in (">=3.10,<3.14", "<3.14,>=3.10")
    requires = meta.get_all("Requires-Dist")
    core = [r for r in requires if "extra ==" not in r]
    heavy = ("torch", "torch_xla", "torch-xla", "jax", "jaxlib", "flax", "xprof", "tensorboard", "jsonschema")
    assert core and not [r for r in core if r.split(";")[0].split(">")[0].split("<")[0].split("=")[0].strip()
                         in heavy], core
    extras = {e.replace("-", "_") for e in meta.get_all("Provides-Extra")}  # PEP 685 writes torch-xla
    assert {"torch_xla", "jax", "jax_recipes", "capture", "tensorboard", "mmf", "test", "all"} <= extras

    def of(extra):
        return [r.split(";")[0].replace(" ", "") for r in requires
                if r.replace("-", "_").endswith(f'extra == "{extra}"')]
    assert "torch_xla<2.10,>=2.8" in of("torch_xla") and "torch<2.10,>=2.8" in of("torch_xla")
    # installing us never replaces a newer jax (issue 38: "<0.11" took jax 0.12 back to 0.10.2), and the profiler
    # needs no flax: only the JAX recipes' extra brings it
    assert of("jax") == ["jax>=0.7"]
    assert "flax>=0.11" in of("jax_recipes") and any(r.endswith("[jax]") for r in of("jax_recipes"))
    assert not [r for r in of("jax") if r.startswith("torch")]  # a JAX user gets no torch
    assert any(r.startswith("xprof") for r in of("capture"))
    assert any(r.startswith("tensorboard") for r in of("tensorboard"))


def test_metadata_version_is_the_packages(installed):
    """The version is said once (ptxla_perf/_meta.py): the wheel's metadata and the installed package's
    `ptxla_perf.__version__` say it (pyproject.toml reads it there)."""
    wheel, target = installed
    from ptxla_perf._meta import __version__
    assert _metadata(wheel)["Version"] == __version__
    code = "import ptxla_perf as p; print(p.__file__, p.__version__, p.SCHEMA_ID)"
    proc = subprocess.run([sys.executable, "-c", code], cwd=target, env=dict(os.environ, PYTHONPATH=str(target)),
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    where, version, schema = proc.stdout.split()
    assert where.startswith(str(target)) and version == __version__ and schema == "ptxla_perf.report/1", proc.stderr
