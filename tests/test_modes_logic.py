"""Pure logic of the execution modes' evidence, on what the real libraries produced: dynamo's guard-failure texts
(torch 2.9, `get_compilation_metrics()[i].recompile_reason`) and the partitioned module XLA's SPMD partitioner made
of tests/scripts/mode_spmd.py's step graph (4 CPU devices, batch sharded; metadata stripped)."""
from __future__ import annotations

from pathlib import Path

from ptxla_perf import hlo_cost
from ptxla_perf.backends.torch_xla_modes import _guard, _strip_id, guard_cause

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
