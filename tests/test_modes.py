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

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import SCRIPTS, cli_env, load_report, warnings_of
from plain_runs import start_module, start_plain

pytestmark = pytest.mark.xdist_group("modes")  # each mode's pair of runs is shared by the tests below

MODES = ("dynamo", "eager", "step", "spmd", "eager_item", "eager_ema", "dynamo_recompile")
EXECUTION_MODES = {"dynamo": ["dynamo", "lazy"], "eager": ["eager", "torch_xla.compile"],
                   "step": ["lazy", "torch_xla.compile"], "spmd": ["lazy", "spmd"],
                   "eager_item": ["eager", "torch_xla.compile"], "eager_ema": ["eager", "torch_xla.compile"],
                   "dynamo_recompile": ["dynamo", "lazy"]}
# the training loops' iterations: mode_dynamo.py 4 + 4 (the openxla bridge's own syncs while it compiles are not
# steps), mode_eager.py 6 (torch_xla.compile syncs twice per call), mode_step.py 4 + 4, mode_spmd.py 6
ITERATIONS = {"dynamo": 8, "eager": 6, "step": 8, "spmd": 6, "eager_item": 5, "eager_ema": 8, "dynamo_recompile": 6}
# mode_eager_ema.py times its eager ops against the compiled step: on steps without attribution, whose own overhead
# (a TorchFunctionMode around every op, inside the step and out) would blur the comparison
ATTRIBUTION = {"eager_ema": "auto"}
PLANTED = "# the planted host read"
PLANTED_EAGER = "# the planted eager ops"
PLANTED_RECOMPILE = "# the planted dynamo recompile"


@dataclass
class ModeRun:
    mode: str
    script: Path
    plain: subprocess.CompletedProcess
    profiled: subprocess.CompletedProcess
    report: Path


@pytest.fixture(scope="module", params=MODES)
def mode_run(request, tmp_path_factory) -> ModeRun:
    """The mode's script run plain and under `profile`, side by side (two processes at once: the pair takes the
    time of the slower one)."""
    script = SCRIPTS / f"mode_{request.param}.py"
    tmp = tmp_path_factory.mktemp(request.param)
    report = tmp / "report.json"
    plain = start_plain(script, cwd=tmp, env=cli_env())
    profiled = start_module("ptxla_perf", "profile", "--attribution", ATTRIBUTION.get(request.param, "always"),
                            "--port", "none", "--report", str(report), str(script), cwd=tmp, env=cli_env())
    return ModeRun(request.param, script, plain.communicate(timeout=300), profiled.communicate(timeout=300), report)


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


def _planted(run: ModeRun, tag: str) -> set[int]:
    return {i for i, text in enumerate(run.script.read_text().splitlines(), 1) if tag in text}


def _findings(run: ModeRun, kind: str) -> list[dict]:
    return [f for f in load_report(run.report)["findings"] if f["kind"] == kind]


def test_eager_ops_outside_the_compiled_step(mode_run):
    """Eager mode: the ops outside the torch_xla.compile'd step run every iteration, measured on every step (count,
    time outside the step). Info where they are the batch's .to(device) (as many as the step's host-to-device
    copies) or a small part of the step; a warning, at its line, where they cost a real share of it
    (mode_eager_ema.py's EMA update, 36 eager ops per step). No other mode has the finding."""
    found = _findings(mode_run, "eager_ops")
    if not mode_run.mode.startswith("eager"):
        assert not found
        return
    (f,) = found
    assert f["evidence"]["ops_per_step"] >= 1 and f["evidence"]["outside_ms_per_step"] > 0, f
    steps = load_report(mode_run.report)["steps"]
    assert all(s["eager_launches"] >= 1 and s["eager_time_s"] > 0 for s in steps), steps
    planted = _planted(mode_run, PLANTED_EAGER)
    if planted:
        assert (f["severity"], f["location"]["line"]) == ("warning", *planted), f["message"]
        assert f["evidence"]["ops_per_step"] >= 36 and f["evidence"]["non_transfer_ops_per_step"] >= 34
    else:  # only the batch's .to(device): info, whatever share of this tiny step it takes under load
        assert f["severity"] == "info" and f["evidence"]["non_transfer_ops_per_step"] == 0, f["message"]


def test_dynamo_evidence(mode_run):
    """torch.compile: dynamo's own graph count (the one mode_dynamo.py prints from dynamo's counters), graph breaks at
    the user's lines with dynamo's reason, and a recompile - mode_dynamo_recompile.py's Python int argument that
    changes every step - at the line that reads it, with the guard that failed. Our hooks add no recompile of their
    own; modes without torch.compile have no dynamo findings."""
    if not mode_run.mode.startswith("dynamo"):
        assert not [f for f in load_report(mode_run.report)["findings"] if f["kind"].startswith("dynamo_")]
        return
    (graphs,) = _findings(mode_run, "dynamo_graphs")
    printed = re.search(r"dynamo: (\d+) graphs, (\d+) graph breaks", mode_run.plain.stdout)
    if printed:
        assert graphs["evidence"]["graphs"] == int(printed[1]), graphs
        assert graphs["evidence"]["graph_breaks"] == int(printed[2]), graphs
        breaks = _findings(mode_run, "dynamo_graph_break")
        lines = {f["location"]["line"] for f in breaks if f["location"]}
        backward = next(i for i, t in enumerate(mode_run.script.read_text().splitlines(), 1)
                        if "loss.backward()" in t and i > 25)
        assert backward in lines, [f["message"] for f in breaks]
        assert any("backward" in f["evidence"]["reason"] for f in breaks)
    recompiles = _findings(mode_run, "dynamo_recompile")
    planted = _planted(mode_run, PLANTED_RECOMPILE)
    if not planted:
        assert not recompiles, [f["message"] for f in recompiles]
        return
    (f,) = recompiles
    assert f["location"]["line"] in planted and f["severity"] == "warning", f
    assert f["evidence"]["cause"] == "python_value" and "step ==" in f["evidence"]["reasons"][-1], f


def test_spmd_mesh_and_collectives(mode_run):
    """SPMD (mode_spmd.py: 4 CPU devices, the batch sharded along "data", the weights replicated): the report names
    the mesh, says the step ran sharded, and lists the collectives the partitioner added - the gradients'
    all-reduce of data parallelism - with the same bytes as the roofline's graph; no warning. Other modes: none."""
    data = load_report(mode_run.report)
    found = _findings(mode_run, "spmd")
    if mode_run.mode != "spmd":
        assert not found and "spmd" not in data["environment"]
        return
    assert data["environment"]["spmd"] == {"devices": 4, "meshes": [
        {"shape": [4, 1], "axis_names": ["data", "model"], "devices": 4}]}
    (f,) = found
    ev = f["evidence"]
    assert f["severity"] == "info" and ev["sharded_inputs"] >= 1, f
    assert ev["collectives"]["all-reduce"]["count"] >= 1, f
    graph = next(g for g in data["roofline"]["graphs"] if g["id"] == ev["graph"])
    assert graph["collectives"] == ev["collectives"]
    assert abs(ev["collective_bytes"] / graph["bytes_accessed"] - graph["collective_share_of_bytes"]) < 1e-3
    assert not [x["message"] for x in warnings_of(data)]  # timing verdicts: test_timing_verdicts.py
