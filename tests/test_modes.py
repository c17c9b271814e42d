"""torch_xla's execution modes under `profile`: each tests/scripts/mode_*.py, written as torch_xla's guides write
that mode, must run under `profile --attribution always` as it runs alone (same stdout, same exit code) and leave
a valid report whose graph captures worked.

The modes and what they once broke (issue 19): torch.compile(backend="openxla") leaves FakeTensors of its traced
graphs on the heap, whose device says xla, and SPMD has XLAShardedTensor wrappers; graph capture handed them to
`_XLAC._get_graph_hash`, which aborts the process from C++ on any tensor that is not an XLA tensor (exit 134).
Tensors that C++ keeps alive (their Python object owned by the impl) turned into undefined tensors under our
references, with the same abort. Dynamo also traced our TorchFunctionMode and hooks: extra graph breaks and
recompiles in the user's program, which mode_dynamo.py prints (dynamo's own counters). Eager mode with a
torch_xla.compile'd step and the torch_xla.step() context manager are the other two ways a step is cut.
"""
from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import SCRIPTS, cli_env, load_report

MODES = ("dynamo", "eager", "step", "spmd", "eager_item")
EXECUTION_MODES = {"dynamo": ["dynamo", "lazy"], "eager": ["eager", "torch_xla.compile"],
                   "step": ["lazy", "torch_xla.compile"], "spmd": ["lazy", "spmd"],
                   "eager_item": ["eager", "torch_xla.compile"]}
# the training loops' iterations: mode_dynamo.py 4 + 4 (the openxla bridge's own syncs while it compiles are not
# steps), mode_eager.py 6 (torch_xla.compile syncs twice per call), mode_step.py 4 + 4, mode_spmd.py 6
ITERATIONS = {"dynamo": 8, "eager": 6, "step": 8, "spmd": 6, "eager_item": 5}
PLANTED = "# the planted host read"


@dataclass
class ModeRun:
    mode: str
    script: Path
    plain: subprocess.CompletedProcess
    profiled: subprocess.CompletedProcess
    report: Path


def _start(args: list[str], cwd: Path) -> subprocess.Popen:
    return subprocess.Popen(args, cwd=cwd, env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _finish(proc: subprocess.Popen) -> subprocess.CompletedProcess:
    try:
        out, err = proc.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


@pytest.fixture(scope="module", params=MODES)
def mode_run(request, tmp_path_factory) -> ModeRun:
    """The mode's script run plain and under `profile`, side by side (two processes at once: the pair takes the
    time of the slower one)."""
    script = SCRIPTS / f"mode_{request.param}.py"
    tmp = tmp_path_factory.mktemp(request.param)
    report = tmp / "report.json"
    plain = _start([sys.executable, str(script)], tmp)
    profiled = _start([sys.executable, "-m", "ptxla_perf", "profile", "--attribution", "always", "--port", "none",
                       "--report", str(report), str(script)], tmp)
    return ModeRun(request.param, script, _finish(plain), _finish(profiled), report)


def test_the_script_runs_as_it_runs_alone(mode_run):
    plain, profiled = mode_run.plain, mode_run.profiled
    assert plain.returncode == 0 and plain.stdout.strip(), plain.stderr[-3000:]
    assert profiled.returncode == plain.returncode, profiled.stderr[-3000:]
    assert profiled.stdout == plain.stdout  # mode_dynamo.py: dynamo's graph and graph-break counts too
    assert "Deallocating Tensor that still has live PyObject references" not in profiled.stderr


def test_the_report_is_valid_and_graphs_were_captured(mode_run):
    assert mode_run.report.exists(), mode_run.profiled.stderr[-3000:]
    data = load_report(mode_run.report)
    assert (data["run"]["status"], data["run"]["exit_code"]) == ("completed", 0)
    assert data["steps"], "no step boundary seen"
    notes = data["run"]["attribution"]["notes"]
    assert not [n for n in notes if "graph capture failed" in n], notes
    assert any(s["graph_hashes"] for s in data["steps"]), "no graph-capture step captured a graph"
    for s in data["steps"]:  # counters reset by torch.compile's openxla backend must not give negative counts
        assert min(s["compiles"], s["cached_compiles"], s["executions"], s["host_reads"]) >= 0, s


def test_the_report_names_the_execution_mode(mode_run):
    """mode_step.py cuts graphs with torch_xla.step() and then with torch_xla.sync(); mode_eager.py only through
    torch_xla.compile; mode_dynamo.py syncs after each compiled call itself."""
    env = load_report(mode_run.report)["environment"]
    assert env["execution_modes"] == EXECUTION_MODES[mode_run.mode]


def test_steps_are_the_loop_iterations(mode_run):
    assert len(load_report(mode_run.report)["steps"]) == ITERATIONS[mode_run.mode]


def test_no_false_graph_break(mode_run):
    """Dynamo's compiled graphs run outside any sync, and in eager mode every op outside the compiled step runs as it
    is called: neither is a pending graph run early (issue 19). Eager ops are events of their own."""
    data = load_report(mode_run.report)
    assert not [f["message"] for f in data["findings"] if f["kind"] == "graph_break"]
    events = [e for s in data["steps"] for e in s.get("events", [])]
    assert not [e for e in events if e["kind"] == "graph_break"], events
    if mode_run.mode.startswith("eager"):  # the batch's .to(device), an eager op, on a calls attribution step
        assert any(e["kind"] == "eager_ops" and e["detail"]["launches"] for e in events), events


def test_planted_host_reads_are_found(mode_run):
    """A host read inside a torch_xla.compile'd step (mode_eager_item.py) forces the traced graph to run early: it
    is still a device-to-host sync at its line, and the scripts without one have no such warning."""
    lines = mode_run.script.read_text().splitlines()
    planted = {i for i, text in enumerate(lines, 1) if PLANTED in text}
    found = {f["location"]["line"] for f in load_report(mode_run.report)["findings"]
             if f["kind"] == "device_to_host_sync" and f["severity"] == "warning" and f["location"]}
    assert found == planted
