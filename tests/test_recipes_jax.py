"""The JAX recipes end to end at tiny sizes (in-process Session; and through the Hydra runner when it can load
them), plus the sweep table over their reports."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

jax = pytest.importorskip("jax")
pytest.importorskip("flax")

from conftest import ROOT, cli_env, load_report  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402

pytestmark = pytest.mark.slow

TINY = {"rnn_jax": ["steps=8", "batch_size=8", "seq_len=8", "hidden=16", "num_batches=2"],
        "vit_mesh": ["steps=6", "batch_size=8", "dim=16", "depth=1", "heads=2", "image_size=16",
                     "capture_start_step=2", "capture_num_steps=2", "mesh_shape=[2]"]}


def run_recipe(name, tmp_path, *overrides):
    """Run a recipe in a subprocess (JAX's device count is fixed at import) and return its validated report."""
    report = tmp_path / f"{name}{''.join('_' + o.split('=')[-1] for o in overrides)}.json"
    code = f"""
import importlib, json, sys
from omegaconf import OmegaConf
from ptxla_perf.session import Session
cfg = OmegaConf.merge(OmegaConf.load({str(ROOT / 'configs' / 'recipe' / (name + '.yaml'))!r}),
                      OmegaConf.from_dotlist(sys.argv[1:]))
s = Session("jax", report_path={str(report)!r}, port=None, run={{"kind": "recipe", "recipe": {name!r}}},
            handle_signals=False).start()
s.extra.update(importlib.import_module("recipes.{name}").run(cfg, s) or {{}})
s.finish()
"""
    proc = subprocess.run([sys.executable, "-c", code, *TINY[name], *overrides], cwd=tmp_path, timeout=600,
                          env=cli_env(XLA_FLAGS="--xla_force_host_platform_device_count=8", JAX_PLATFORMS="cpu"),
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return load_report(report)


def test_rnn_jax_initial_vs_fixed(tmp_path):
    initial = run_recipe("rnn_jax", tmp_path, "variant=initial")
    fixed = run_recipe("rnn_jax", tmp_path, "variant=fixed")
    h2d = [f for f in initial["findings"] if f["kind"] == "host_to_device_transfer"]
    assert h2d and h2d[0]["location"]["file"].endswith(os.path.join("rnn_jax", "__init__.py"))
    assert initial["summary"]["host_to_device_per_step"] > 0
    assert fixed["summary"]["host_to_device_per_step"] == 0
    assert not [f for f in fixed["findings"] if f["severity"] != "info"], fixed["findings"]
    for rep in (initial, fixed):
        ex = rep["extra"]
        assert ex["first_steps"][0]["compile_time_s"] > 0  # compile time of the first step, apart
        assert ex["steady_step_time_ms"] > 0 and ex["us_per_sample"] > 0 and ex["mb_per_s"] > 0
        assert rep["summary"]["throughput"]["us_per_sample"] > 0
    # `diff` of the two reports shows the transfers gone
    proc = subprocess.run([sys.executable, "-m", "ptxla_perf", "diff", str(tmp_path / "rnn_jax_initial.json"),
                           str(tmp_path / "rnn_jax_fixed.json")], env=cli_env(), capture_output=True, text=True)
    assert proc.returncode in (0, 1), proc.stderr
    line = next(l for l in proc.stdout.splitlines() if l.startswith("host_to_device_per_step"))
    assert line.split()[2] == "0", line


def test_vit_mesh_all_reduce_share_and_sweep_table(tmp_path):
    rep = run_recipe("vit_mesh", tmp_path)
    ex = rep["extra"]
    assert ex["devices"] == 2 and ex["mesh_shape"] == [2]
    assert "trace_error" not in ex, ex
    assert 0 < ex["all_reduce_share"] <= 1
    assert not [f for f in rep["findings"] if f["severity"] != "info"], rep["findings"]
    (tmp_path / "mr" / "0").mkdir(parents=True)
    (tmp_path / "mr" / "0" / "report.json").write_text(json.dumps(rep))
    proc = subprocess.run([sys.executable, "-m", "ptxla_perf.sweep", str(tmp_path / "mr")], env=cli_env(),
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "all-reduce share" in proc.stdout and f"{ex['all_reduce_share']:.0%}" in proc.stdout


def test_configs_follow_the_recipe_contract():
    for name in ("rnn_jax", "vit_mesh"):
        path = ROOT / "configs" / "recipe" / f"{name}.yaml"
        assert path.read_text().startswith("# @package recipe")
        cfg = OmegaConf.load(path)
        assert cfg.name == name and cfg.backend == "jax" and cfg.steps > 0
