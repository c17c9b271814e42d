"""The session split by data (issue 26): the report is a function of the analysis, the run's facts and the
sections, with no session; the typed configs reach the session; the adapters' optional members are probed once;
the CLI imports only the command that runs."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import cli_env


def _records(n: int):
    from ptxla_perf.model.records import Location, StepRecord
    return [StepRecord(index=i, wall_time_s=0.5 if i == 0 else 0.01, compiles=1 if i == 0 else 0, executions=1,
                       site=Location("/x/train.py", 12, "<module>")) for i in range(n)]


def test_report_of_needs_no_session():
    """A report from data alone: the run's facts, the analysis, the sections and how the run ended."""
    from ptxla_perf.backends.torch_xla import TorchXlaAdapter
    from ptxla_perf.rules.iteration import analyze
    from ptxla_perf.model.outcome import Outcome
    from ptxla_perf.report.outputs import RunFacts, Sections, report_of
    steps = _records(8)
    adapter = TorchXlaAdapter({"mode": "off"})
    facts = RunFacts("torch_xla", "run123", 3, "2026-01-01T00:00:00+00:00", {"kind": "api", "argv": ["train.py"]})
    report = report_of(analyze(steps), facts, Sections(None, None), end=Outcome("stopped", 3, "guard tripped"),
                       adapter=adapter, env={}, steps=steps)
    run = report["run"]
    assert (run["run_id"], run["rank"], run["status"], run["exit_code"], run["argv"]) == (
        "run123", 3, "stopped", 3, ["train.py"])
    assert run["step_detection"] == adapter.step_detection
    assert [f["kind"] for f in report["findings"]].count("run_stopped") == 1
    assert len(report["steps"]) == 8
    with pytest.raises(Exception):  # frozen: a fact is replaced, never changed in place
        facts.rank = 0


def test_output_config_names_the_rank_file():
    from ptxla_perf.report.outputs import OutputConfig
    assert OutputConfig("r/report.json").path(0) == "r/report.json"
    assert OutputConfig("r/report.json").path(2) == "r/report.rank2.json"
    assert OutputConfig("r/report.json", rank_suffix=True).path(0) == "r/report.rank0.json"
    assert OutputConfig(None).path(1) is None
    assert OutputConfig(console=True).prints(0) and not OutputConfig(console=True).prints(1)


def test_typed_configs_reach_the_session():
    """The runner's dataclasses (config.py) are what the session takes; a bad one is still a one-line error."""
    from ptxla_perf.config import AttributionConfig, GuardConfig, RooflineConfig
    from ptxla_perf.session import Session, SessionError
    s = Session("torch_xla", report_path=None, port=None, attribution=AttributionConfig(mode="off", max_steps=7),
                guard=GuardConfig(stop_after=5), roofline=RooflineConfig(peak_tflops=2))
    assert s.adapter.cfg["mode"] == "off" and s.adapter.cfg["max_steps"] == 7
    assert s.guard_cfg["stop_after"] == 5 and json.dumps(s.guard_cfg)  # a child's plan carries it as JSON
    assert s.roofline_cfg["peak_tflops"] == 2.0
    with pytest.raises(SessionError, match="peak_gbps"):
        Session("torch_xla", report_path=None, port=None, roofline=RooflineConfig(peak_gbps=-1))


def test_optional_adapter_members_are_protocols():
    from ptxla_perf.backends.base import Capabilities, Settles
    from ptxla_perf.backends.torch_xla import TorchXlaAdapter
    adapter = TorchXlaAdapter(None)
    caps = Capabilities.of(adapter)
    assert isinstance(adapter, Settles) and caps.settle is not None and caps.sampler_codes is not None
    assert not isinstance(object(), Settles)
    empty = Capabilities.of(object())
    assert empty.memory(True) == (None, {"graphs": [], "notes": ["this backend gives no memory analysis"]})


_PROBE = """
import contextlib, io, sys
from ptxla_perf.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    try:
        main(sys.argv[1:])
    except SystemExit:
        pass
print(" ".join(sorted(m for m in sys.modules if m.startswith(("ptxla_perf", "torch", "jax", "numpy")))))
"""


def test_cli_imports_only_the_command_that_runs(tmp_path):
    """`--help` imports no command; `diff` imports diff's own modules, never the report stack or a framework."""
    from ptxla_perf.report import assemble as R
    for name in ("a", "b"):
        R.write(R.build(backend="torch_xla", run={"kind": "api", "status": "completed"}, env={}, steps=_records(4)),
                str(tmp_path / f"{name}.json"), html=False)

    def loaded(*args):
        proc = subprocess.run([sys.executable, "-c", _PROBE, *args], env=cli_env(), capture_output=True, text=True,
                              timeout=120)
        assert proc.returncode == 0, proc.stderr
        return set(proc.stdout.split())
    assert loaded("--help") == {"ptxla_perf", "ptxla_perf._meta", "ptxla_perf.cli"}  # _meta: the version
    mods = loaded("diff", str(tmp_path / "a.json"), str(tmp_path / "b.json"))
    assert "ptxla_perf.commands.diff" in mods
    assert not {m for m in mods if m.startswith(("torch", "jax", "numpy", "ptxla_perf.report.assemble", "ptxla_perf.html",
                                                 "ptxla_perf.session", "ptxla_perf.commands.profile"))}, mods
