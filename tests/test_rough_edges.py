"""Rough edges a new user hit (issue 13), each pinned by a test that failed before the fix."""
from __future__ import annotations

import json

import pytest

from conftest import run_cli
from ptxla_perf import sweep
from ptxla_perf.trace import analyses


def test_trace_verdicts_are_warnings_never_errors():
    """`error` is kept for a run that was stopped; a traced window's verdict is a per-step cost: a warning."""
    summary = {"steady_steps": 3,
               "breakdown_share": {"data": 0.5, "idle": 0.0, "host": 0.7, "execution": 0.1},
               "breakdown_ms_per_step": {"data": 5.0, "idle": 0.0, "host": 7.0, "execution": 1.0}}
    out = analyses.findings(summary, {"mean": 0.8, "max": 0.9, "per_device": [0.8]}, {}, "host")
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


def test_config_points_to_a_doc_that_documents_every_key():
    """configs/config.yaml names the page that documents it, and that page names every key the config has."""
    import re
    from pathlib import Path

    import yaml

    root = Path(__file__).resolve().parents[1]
    text = (root / "configs" / "config.yaml").read_text()
    doc = re.search(r"Documented in (docs/\S+?\.md)", text).group(1)
    page = (root / doc).read_text()

    def leaves(d, prefix=""):
        for k, v in d.items():
            if isinstance(v, dict) and v:
                yield from leaves(v, f"{prefix}{k}.")
            else:
                yield f"{prefix}{k}", k

    cfg = {k: v for k, v in yaml.safe_load(text).items() if k not in ("defaults", "hydra")}
    missing = [full for full, key in leaves(cfg) if f"`{full}`" not in page and f"`{key}`" not in page]
    assert not missing, f"config keys not documented in {doc}: {missing}"


@pytest.mark.parametrize("source,error", [
    ("import torch_xla\nx = 1\ndef f(:\n    pass\n", "SyntaxError"),
    ("import torch_xla\n\n\ndef main():\n    raise ValueError('boom before any step')\n\n\nmain()\n", "ValueError"),
])
def test_crash_before_the_first_step_is_the_story(tmp_path, source, error):
    """A script that fails before its first step: its own traceback (no ptxla_perf or runpy frames), exit 1, and
    a report that says it crashed, not a `no_steps` warning with advice about xmp.spawn."""
    script = tmp_path / "train.py"
    script.write_text(source)
    proc = run_cli("profile", "--port", "none", "--report", str(tmp_path / "r.json"), str(script), cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert error in proc.stderr
    assert "ptxla_perf" not in proc.stderr.split("ptxla_perf [")[0], proc.stderr  # no frame of ours before the summary
    assert "runpy" not in proc.stderr, proc.stderr
    assert "crashed before its first step" in proc.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["run"]["status"] == "crashed" and error in report["run"]["stop_reason"]
    assert not [f for f in report["findings"] if f["kind"] == "no_steps"]


def test_one_outcome_rule_for_every_way_a_run_ends():
    from ptxla_perf.outcome import outcome
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
