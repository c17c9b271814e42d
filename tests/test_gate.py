"""Issue 37: a gate never passes on an empty measurement, and every numeric flag is range-checked.

`diff --fail-on` and `compare(..., fail_on=...)` fail, with one line saying why, when either run measured no
steady step or has a `no_steps` finding (a profiled block that found no step passed every rule before). The gate
the notebook doc shows passes a loop that reads every N steps and fails one that reads every step."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import ptxla_perf
from ptxla_perf import diff as D
from ptxla_perf.report import assemble as R
from ptxla_perf.cli import main
from ptxla_perf.model.records import Event, Location, StepRecord, Transfers

ROOT = Path(__file__).resolve().parents[1]
SITE, READ = Location("/train.py", 30, "<module>"), Location("/train.py", 33, "<module>")
RUN = {"kind": "script", "status": "completed", "run_id": "r1", "run_id_source": "env", "rank": 0,
       "argv": ["train.py"]}


def _loop(n: int, read_every: int | None) -> list[StepRecord]:
    """A training loop's boundaries: one compile, a `.item()` every `read_every` steps (None: never), attribution
    on the first steps and step 10."""
    out = []
    for i in range(n):
        read = read_every is not None and i % read_every == 0
        s = StepRecord(index=i, wall_time_s=0.01, site=SITE, executions=1, optimizer_steps=1, backward_calls=1,
                       compiles=int(i == 0), compile_time_s=0.5 if i == 0 else 0.0, graph_hashes=["g"],
                       device_to_host=Transfers(int(read), 4 * read), device_to_host_time_s=0.002 if read else 0.0,
                       attributed=i < 3 or i == 10)
        if read and s.attributed:
            s.events.append(Event("device_to_host_sync", READ, {"call": "tensor.item"}))
        out.append(s)
    return out


def _report(steps: list[StepRecord]) -> dict:
    return R.build(backend="torch_xla", run=RUN, env=R.environment({}), steps=steps)


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("gate")
    out = {}
    for name, steps in (("per_step", _loop(40, 1)), ("every_10", _loop(40, 10)), ("never", _loop(40, None)),
                        ("empty", []), ("warmup_only", _loop(1, 1))):
        out[name] = d / f"{name}.json"
        R.write(_report(steps), str(out[name]), html=False)
    return out


def _doc_gates(path: Path) -> list[str]:
    """The `fail_on=` gates of a document's `compare` examples."""
    return re.findall(r"compare\([^)]*fail_on=\"([^\"]+)\"", path.read_text(), flags=re.S)


@pytest.mark.parametrize("doc", ["docs/notebook.md", "docs/api.md", "README.md"])
def test_the_docs_gate_passes_a_read_every_n_steps_and_fails_a_read_every_step(reports, doc):
    gates = _doc_gates(ROOT / doc)
    assert gates, doc
    for gate in gates:
        fixed = ptxla_perf.compare(reports["per_step"], reports["every_10"], fail_on=gate)
        assert fixed.passed, (gate, [v.message for v in fixed.violations[0]])
        assert ptxla_perf.compare(reports["per_step"], reports["never"], fail_on=gate).passed
        assert not ptxla_perf.compare(reports["every_10"], reports["per_step"], fail_on=gate).passed, gate


@pytest.mark.parametrize("empty,why", [("empty", "no_steps finding"), ("warmup_only", "no steady steps")])
@pytest.mark.parametrize("side", ["a", "b"])
def test_a_gate_fails_when_either_run_measured_nothing(reports, empty, why, side):
    a, b = (reports[empty], reports["every_10"]) if side == "a" else (reports["every_10"], reports[empty])
    cmp = ptxla_perf.compare(a, b, labels=["A", "B"], fail_on="warnings:device_to_host_sync>0")
    assert not cmp.passed
    (v,) = cmp.violations[0]
    label = "A" if side == "a" else "B"
    assert v.message.startswith(f"{label} measured nothing: ") and why in v.message and "\n" not in v.message
    # without rules it is only a comparison: nothing to fail
    assert ptxla_perf.compare(a, b).passed


def test_diff_fail_on_exits_1_on_an_empty_measurement_with_one_line(reports, capsys):
    rc = main(["diff", str(reports["every_10"]), str(reports["empty"]), "--fail-on",
               "warnings:device_to_host_sync>0,device_to_host_per_step>0"])
    out = capsys.readouterr().out
    fails = [line for line in out.splitlines() if line.startswith("FAIL ")]
    assert rc == 1 and len(fails) == 1, out
    assert "measured nothing" in fails[0] and "no_steps" in fails[0]
    rc = main(["diff", str(reports["per_step"]), str(reports["every_10"]), "--fail-on",
               "warnings:device_to_host_sync>0", "--format", "json"])
    assert rc == 0 and json.loads(capsys.readouterr().out)["violations"] == []


@pytest.mark.parametrize("argv,flag", [
    (["profile", "--max-warmup", "-3", "x.py"], "--max-warmup"),
    (["profile", "--peak-tflops", "0", "x.py"], "--peak-tflops"),
    (["profile", "--peak-gbps", "-1", "x.py"], "--peak-gbps"),
    (["profile", "--device-memory-gb", "nan", "x.py"], "--device-memory-gb"),
    (["profile", "--model-flops-per-step", "inf", "x.py"], "--model-flops-per-step"),
    (["profile", "--max-warmup", "two", "x.py"], "--max-warmup"),
    (["diff", "a.json", "b.json", "--step", "-1"], "--step"),
    (["analyze", "logdir", "--top", "0"], "--top"),
    (["analyze", "logdir", "--gaps", "-2"], "--gaps"),
    (["analyze", "logdir", "--min-gap-ms", "-0.5"], "--min-gap-ms"),
    (["capture", "--service", "localhost:1", "--duration-ms", "0"], "--duration-ms"),
    (["capture", "--service", "localhost:1", "--delay-ms", "-5"], "--delay-ms"),
    (["capture", "--service", "localhost:1", "--attempts", "11"], "--attempts"),
])
def test_a_numeric_flag_out_of_range_is_one_line_and_exit_2(argv, flag, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"ptxla_perf: error: argument {flag}: "), err
