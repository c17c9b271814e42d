"""Rough edges a new user hit (issue 13), each pinned by a test that failed before the fix."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import SCRIPTS, cli_env, run_cli
from plain_runs import run_plain
from ptxla_perf import sweep
from ptxla_perf.trace import rules as trace_rules


def test_trace_verdicts_are_warnings_never_errors():
    """`error` is kept for a run that was stopped; a traced window's verdict is a per-step cost: a warning."""
    summary = {"steady_steps": 3,
               "breakdown_share": {"data": 0.5, "idle": 0.0, "host": 0.7, "execution": 0.1},
               "breakdown_ms_per_step": {"data": 5.0, "idle": 0.0, "host": 7.0, "execution": 1.0}}
    out = trace_rules.judge(summary, {"mean": 0.8, "max": 0.9, "per_device": [0.8]}, {}, "host")
    assert {f["kind"] for f in out} == {"input_bound", "host_bound", "collective_bound"}
    assert {f["severity"] for f in out} == {"warning"}


def test_sweep_overrides_are_never_cut_mid_word():
    items = ["recipe.batch_size=512", "recipe.steps=20", "recipe.model.hidden_size=1024", "seed=3"]
    text = sweep._overrides(items)
    assert len(text) <= 40
    assert text.split(" +")[0].split(" ") == items[:len(text.split(" +")[0].split(" "))]
    assert text.endswith(f"+{len(items) - len(text.split(' +')[0].split(' '))}")
    assert sweep._overrides(["a=1", "b=2"]) == "a=1 b=2"
    # one override longer than the column is shown whole rather than cut
    assert sweep._overrides(["recipe.model.some_very_long_option_name=12345678"]) == \
        "recipe.model.some_very_long_option_name=12345678"


def test_config_reference_is_generated_from_the_structured_configs():
    """configs/config.yaml names docs that exist; docs/config.md is exactly what the schema generates, so every key
    a user can set is documented with its type and default (python -m ptxla_perf.config > docs/config.md)."""
    import re
    from pathlib import Path

    from ptxla_perf import config

    root = Path(__file__).resolve().parents[1]
    text = (root / "configs" / "config.yaml").read_text()
    for doc in re.findall(r"(docs/\S+?\.md)", text):
        assert (root / doc).is_file(), f"configs/config.yaml points to {doc}, which does not exist"
    assert (root / "docs" / "config.md").read_text() == config.markdown(), \
        "docs/config.md is stale: python -m ptxla_perf.config > docs/config.md"
    for name in config.RECIPES:
        assert f"base_{name}" in (root / "configs" / "recipe" / f"{name}.yaml").read_text()


@pytest.mark.parametrize("override,key", [("recipe.steps=abc", "recipe.steps"), ("recipe.stepz=3", "stepz"),
                                          ("max_warmup=many", "max_warmup")])
def test_a_bad_override_is_one_line_naming_the_key_before_anything_runs(tmp_path, override, key):
    proc = subprocess.run([sys.executable, "-m", "ptxla_perf.run", "+recipe=mlp", override, "profiler.port=null",
                           "hydra.run.dir=out"], cwd=tmp_path, env=cli_env(), capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and key in lines[0] and lines[0].startswith("ptxla_perf: error:"), proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "out").exists(), "nothing may run before the config is valid"


def test_a_recipe_is_chosen_by_config(tmp_path):
    """recipe.entry names the function that runs the recipe: a user's own module works like a shipped one."""
    (tmp_path / "my_recipe.py").write_text(
        "def go(cfg, session):\n    print('my recipe ran with', cfg.steps, 'steps')\n    return {'mine': True}\n")
    proc = subprocess.run([sys.executable, "-m", "ptxla_perf.run", "+recipe=mlp", "recipe.steps=2",
                           "recipe.entry=my_recipe:go", "profiler.port=null", "hydra.run.dir=out"], cwd=tmp_path,
                          env=cli_env(PYTHONPATH=f"{tmp_path}{os.pathsep}{cli_env()['PYTHONPATH']}"),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "my recipe ran with 2 steps" in proc.stdout
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["extra"]["mine"] is True


@pytest.mark.parametrize("source,error", [
    ("import torch_xla\nx = 1\ndef f(:\n    pass\n", "SyntaxError"),
    ("import torch_xla\n\n\ndef main():\n    raise ValueError('boom before any step')\n\n\nmain()\n", "ValueError"),
])
def test_crash_before_the_first_step_is_the_story(tmp_path, source, error):
    """A script that fails before its first step: its own traceback (no ptxla_perf or runpy frames), exit 1, and
    a report that says it crashed, not a `no_steps` warning with advice about xmp.spawn. A script that cannot even
    be compiled never imports its framework, so no session opened (the backend is the framework the program
    imports): Python's own error, then one line that says so, no report."""
    script = tmp_path / "train.py"
    script.write_text(source)
    proc = run_cli("profile", "--port", "none", "--report", str(tmp_path / "r.json"), str(script), cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert error in proc.stderr
    ours = [line for line in proc.stderr.splitlines() if "ptxla_perf" in line]
    assert "runpy" not in proc.stderr, proc.stderr
    if error == "SyntaxError":
        assert ours == ["ptxla_perf: nothing profiled: the program ended (SyntaxError) before it imported torch_xla "
                        "or jax; no report written"], proc.stderr
        assert proc.stderr.index("SyntaxError") < proc.stderr.index(ours[0])
        assert not (tmp_path / "r.json").exists()
        return
    assert "ptxla_perf" not in proc.stderr.split("ptxla_perf [")[0], proc.stderr  # no frame of ours before the summary
    assert "crashed before its first step" in proc.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["run"]["status"] == "crashed" and error in report["run"]["stop_reason"]
    assert not [f for f in report["findings"] if f["kind"] == "no_steps"]


def test_one_outcome_rule_for_every_way_a_run_ends():
    from ptxla_perf.model.outcome import outcome
    from ptxla_perf.session import RunStopped
    assert outcome(None) == outcome(SystemExit(0)) == outcome(SystemExit(None))
    assert outcome(SystemExit(0)).status == "completed" and outcome(SystemExit(0)).exit_code == 0
    assert (outcome(SystemExit(4)).status, outcome(SystemExit(4)).exit_code) == ("crashed", 4)
    assert outcome(SystemExit("bad flag")).exit_code == 1
    assert (outcome(RunStopped(None, "guard")).status, outcome(RunStopped(None, "guard")).exit_code) == ("stopped", 3)
    assert (outcome(RunStopped(15, "SIGTERM")).status, outcome(RunStopped(15, "SIGTERM")).exit_code) == \
        ("interrupted", 143)
    assert outcome(KeyboardInterrupt()).exit_code == 130
    assert (outcome(ValueError("x")).status, outcome(ValueError("x")).exit_code) == ("crashed", 1)


def test_sys_exit_0_inside_a_session_is_a_completed_run(tmp_path):
    """A recipe or script that ends with sys.exit(0) completed; the runner used to call it crashed."""
    from ptxla_perf.session import Session
    with pytest.raises(SystemExit):
        with Session(report_path=str(tmp_path / "r.json"), port=None, console=False):
            raise SystemExit(0)
    report = json.loads((tmp_path / "r.json").read_text())
    assert (report["run"]["status"], report["run"]["exit_code"]) == ("completed", 0)


def test_the_scripts_own_warnings_and_file_are_as_without_the_tool(tmp_path):
    """Attribution steps must not reset Python's once-per-line warning registry (the user's warning printed again
    after each of them), and `__file__` is absolute as under `python script.py`."""
    script = SCRIPTS / "warns_each_step.py"
    plain = run_plain(script.name, cwd=script.parent, env=cli_env(), timeout=300)
    assert plain.returncode == 0, plain.stderr[-2000:]
    proc = run_cli("profile", "--port", "none", "--attribution", "always", "--report", str(tmp_path / "r.json"),
                   script.name, cwd=script.parent)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout == plain.stdout and f"file {script}" in plain.stdout
    assert plain.stderr.count("is deprecated") == 1
    assert proc.stderr.count("is deprecated") == 1, proc.stderr[-3000:]
