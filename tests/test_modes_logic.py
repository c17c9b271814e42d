"""Pure logic of the execution modes' evidence, on what the real libraries produced: dynamo's guard-failure texts
(torch 2.9, `get_compilation_metrics()[i].recompile_reason`) and the partitioned module XLA's SPMD partitioner made
of tests/scripts/mode_spmd.py's step graph (4 CPU devices, batch sharded; metadata stripped)."""
from __future__ import annotations

from pathlib import Path

from ptxla_perf.xla import hlo_cost
from ptxla_perf.backends.torch_xla import rules as torch_xla_rules
from ptxla_perf.backends.torch_xla.modes import _guard, _strip_id, guard_cause
from ptxla_perf.rules.iteration import analyze
from ptxla_perf.model.records import Event, Location, StepRecord

FIXTURES = Path(__file__).parent / "fixtures" / "spmd"

# recompile reasons dynamo gave for f(x, n, flag) called with a new shape, dtype, int, bool and grad mode
REASONS = {
    "0/0: tensor 'x' size mismatch at index 0. expected 4, actual 5": "input_shapes",
    "0/1: tensor 'x' dtype mismatch. expected Float, actual Double": "input_dtypes",
    "0/2: n == 2                                                   # return x * n if flag else x + n  "
    "# mp/w19/guards.py:5 in f": "python_value",
    "0/3: flag == True                                             # return x * n if flag else x + n  "
    "# mp/w19/guards.py:5 in f": "python_value",
    "0/4: GLOBAL_STATE changed: grad_mode ": "grad_mode",
}


def test_guard_causes_from_dynamos_words():
    for reason, cause in REASONS.items():
        assert guard_cause(_strip_id(reason)) == cause, reason


def test_the_guard_and_the_line_that_installed_it(tmp_path):
    """Dynamo names the source line of a value guard by a path it shortens from the left: matched against the
    compiled function's own file. A line in no user file gives the guard alone (the function's line is used)."""
    script = tmp_path / "w19" / "guards.py"
    script.parent.mkdir()
    script.write_text("import torch\n\n\ndef f(x, n, flag):\n    return x * n if flag else x + n\n")
    reason = _strip_id(next(r for r in REASONS if "n == 2" in r)).replace("mp/w19", f"{tmp_path.name[-6:]}/w19")
    guard, loc = _guard(reason, str(script))
    assert guard.startswith("n == 2 (at `return x * n") and (loc.file, loc.line, loc.function) == (str(script), 5, "f")
    assert _guard("tensor 'x' size mismatch at index 0. expected 4, actual 5", str(script))[1] is None


def test_collectives_of_a_partitioned_step():
    """Data parallelism over 4 devices: the loss's and the gradients' all-reduce (two combined all-reduces), with
    their operand and result bytes (the gradients of a 16-32-4 MLP: (16*32 + 32 + 32*4 + 4) floats, in and out)."""
    found = hlo_cost.collectives((FIXTURES / "partitioned_step.hlo.txt").read_text())
    assert set(found) == {"all-reduce"} and found["all-reduce"]["count"] == 2
    grads = (16 * 32 + 32 + 32 * 4 + 4) * 4
    assert found["all-reduce"]["bytes"] == 2 * grads + 2 * 3 * 4  # + the loss's three f32 scalars, in and out


def _step(i: int, *events: Event) -> StepRecord:
    return StepRecord(index=i, wall_time_s=0.01, executions=1, optimizer_steps=1, backward_calls=1,
                      events=list(events))


def _compile(n: int, limit: int = 8) -> Event:
    reason = {} if n == 0 else {"cause": "python_value", "differences": [f"step == {n - 1}"]}
    return Event("dynamo_compile", Location("/w/train.py", 16, "loss"),
                 {"key": "dynamo:/w/train.py:15:loss", "first": n == 0, "seconds": 0.1, "call": "loss",
                  "recompile_limit": limit, **reason})


def test_dynamo_recompiles_recurring_one_off_and_at_the_limit():
    """The events the adapter makes of dynamo's records: a recompile in one iteration is a one-off (info); in two or
    more, a warning; reaching dynamo's recompile limit says the function runs uncompiled from then on."""
    def recompile_finding(records):
        found = [f for f in analyze(records, rules=torch_xla_rules.RULES).findings if f.kind == "dynamo_recompile"]
        assert len(found) == 1
        return found[0]
    once = recompile_finding([_step(0, _compile(0)), _step(1, _compile(1)), _step(2), _step(3)])
    assert once.severity == "info" and "one-off" in once.message and once.location.line == 16
    again = recompile_finding([_step(i, _compile(i)) for i in range(4)] + [_step(4)])
    assert again.severity == "warning" and again.count == 3 and again.evidence.cause == "python_value"
    limit = recompile_finding([_step(i, _compile(i, limit=4)) for i in range(4)] + [_step(4)])
    assert limit.evidence.at_limit and "recompile limit (4)" in limit.message
