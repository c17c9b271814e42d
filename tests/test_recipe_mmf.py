"""The `mmf` recipe end to end at tiny sizes through the Hydra runner: MMF's own MMBT, trained by MMF's
BaseTrainer step methods on the XLA CPU device, and each case-study knob giving its finding.

Needs MMF installed: pip install --no-deps -r requirements-mmf.txt (skipped otherwise)."""
from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, cli_env, load_report, warnings_of
from plain_runs import run_module

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        importlib.util.find_spec("mmf") is None or importlib.util.find_spec("transformers") is None,
        reason="MMF not installed (pip install --no-deps -r requirements-mmf.txt)",
    ),
]

TINY = [
    "recipe.model.hidden_size=32", "recipe.model.num_hidden_layers=1", "recipe.model.num_attention_heads=2",
    "recipe.model.intermediate_size=64", "recipe.model.vocab_size=1000", "recipe.model.modal_hidden_size=64",
    "recipe.data.batch_size=2", "recipe.data.tokens=8", "recipe.data.regions=4",
    "recipe.data.train_samples=16", "recipe.data.eval_samples=5",
]
TRAIN_PY = Path("recipes", "mmf", "train.py")


@pytest.fixture(scope="module")
def bert_cache(tmp_path_factory):
    return tmp_path_factory.mktemp("mmf_cache")  # the random-init BERT is made once for the module


def run_mmf(tmp_path, bert_cache, *overrides, timeout=600):
    proc = run_module("ptxla_perf.run", "+recipe=mmf", *TINY, *overrides, "profiler.port=null", "hydra.run.dir=out",
                      cwd=tmp_path, env=cli_env(PTXLA_PERF_CACHE_DIR=str(bert_cache)), timeout=timeout)
    path = tmp_path / "out" / "report.json"
    return proc, (load_report(path) if path.exists() else None)


def _line(loc: dict) -> str:
    return Path(loc["file"]).read_text().splitlines()[loc["line"] - 1]


def test_default_config_trains_mmfs_mmbt_cleanly(tmp_path, bert_cache):
    proc, report = run_mmf(tmp_path, bert_cache, "recipe.steps=5")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert report["run"]["status"] == "completed"
    extra = report["extra"]
    assert extra["model"] == "mmbt"
    assert extra["model_class"].startswith("mmf.") and extra["model_class"].endswith(".MMBT")
    assert extra["versions"]["mmf"] == "1.0.0rc10" and extra["versions"]["transformers"] == "2.3.0"
    assert "bert" in Path(extra["bert_model_dir"]).name
    assert Path(extra["bert_model_dir"]).is_relative_to(bert_cache)
    assert extra["samples_per_step"] == 2 and extra["tokens_per_step"] == 16
    assert report["summary"]["steps"] == 5
    # the state-initialising first update, then the scheduler's lr=0 (a torch_xla special scalar), then steady
    assert report["summary"]["compiles"] == 3
    assert [s["compiles"] for s in report["steps"]] == [1, 1, 1, 0, 0]
    assert report["summary"]["recompiles_after_warmup"] == 0
    assert not warnings_of(report), report["findings"]
    assert report["summary"]["throughput"]["tokens_per_s"] > 0
    # issue 31: the recipe knows its model FLOPs (6·N·tokens a training step, N without the embedding tables):
    # model-FLOPs MFU beside HFU
    assert 0 < extra["model_params_non_embedding"] < extra["model_params"]
    assert report["roofline"]["model_flops_per_step"] == \
        6.0 * extra["model_params_non_embedding"] * extra["tokens_per_step"]
    assert all(s["model_flops"] == report["roofline"]["model_flops_per_step"] for s in report["steps"])
    assert "Warning:" not in proc.stderr  # MMF/transformers 2020 deprecations are silenced by name only
    for s in report["steps"]:  # where each step's time went: the parts sum to its wall time (issue 18)
        assert sum(s["time_breakdown"].values()) == pytest.approx(s["wall_time_s"], rel=0.05, abs=1e-6)


@pytest.fixture(scope="module")
def knobs_run(tmp_path_factory, bert_cache):
    """One run with two knobs on, read by the two tests below (each asserts about its own knob's finding): the
    meter read every step (log_interval=1) and an eval pass whose last batch is smaller (eval_drop_last=false)."""
    return run_mmf(tmp_path_factory.mktemp("mmf_knobs"), bert_cache, "recipe.steps=6", "recipe.log_interval=1",
                   "recipe.eval_every=6", "recipe.eval_drop_last=false")


@pytest.mark.xdist_group("mmf_knobs")  # knobs_run is shared: one xdist worker
def test_log_interval_gives_host_sync_at_the_meter_line(knobs_run):
    proc, report = knobs_run
    assert proc.returncode == 0, proc.stderr[-3000:]
    f = next(f for f in report["findings"] if f["kind"] == "device_to_host_sync")
    assert f["severity"] == "warning"
    assert f["location"]["file"].endswith(str(TRAIN_PY))
    assert "_update_meter" in _line(f["location"])


@pytest.mark.xdist_group("mmf_knobs")
def test_eval_with_smaller_last_batch_recompiles(knobs_run):
    proc, report = knobs_run
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert report["extra"]["evals"][0]["batch_sizes"] == [2, 2, 1]
    f = next(f for f in report["findings"] if f["kind"] == "recompilation")
    # one smaller batch at the end of the pass: compiled once, cached for every later pass - a one-off, so info
    # (docs/report.md, severity policy), but with its real cause, from that compile's own evidence
    assert f["severity"] == "info"
    assert f["evidence"]["cause"] == "input_shapes", f["evidence"]
    assert "StepTrace" in _line(f["location"]) or "eval" in f["location"]["function"]


def test_detect_anomaly_is_capped_and_named(tmp_path, bert_cache):
    proc, report = run_mmf(tmp_path, bert_cache, "recipe.steps=4", "recipe.detect_anomaly=true",
                           "recipe.anomaly_sync_cap=4")
    assert proc.returncode == 3, proc.stderr[-3000:]
    assert report["run"]["status"] == "stopped"
    assert report["summary"]["steps"] == 1
    f = next(f for f in report["findings"] if f["kind"] == "run_stopped")
    assert "detect_anomaly" in f["message"] and "set_detect_anomaly" in f["message"]
    assert report["extra"]["stopped_early"]
    assert "Traceback" not in proc.stderr


def test_compat_stand_ins_are_local_to_the_process():
    code = (
        "import sys; sys.path.insert(0, %r)\n"
        "from ptxla_perf.recipes.mmf import compat\n"
        "assert 'demjson' not in sys.modules\n"
        "compat.import_mmf()\n"
        "import demjson, demjson3, torchtext.vocab as v\n"
        "assert demjson is demjson3 and v.pretrained_aliases == {}\n"
        "try:\n    v.pretrained_aliases['glove.6B.300d']\nexcept KeyError as e:\n    assert 'stand-in' in str(e)\n"
        "print(compat.INSTALLED)\n" % str(ROOT)
    )
    proc = subprocess.run([sys.executable, "-c", code], env=cli_env(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "torchtext.vocab import stand-in" in proc.stdout
    assert importlib.util.find_spec("demjson") is None  # nothing was installed globally
