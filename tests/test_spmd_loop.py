"""Issue 37: an SPMD training loop gets its full report. spmd_megatron.py (column- and row-parallel linear layers
sharded on a 2 x 2 mesh, MpDeviceLoader batches sharded along "data", 20 iterations, a loss print every 8) grouped
its loader's sync and its step's sync into one iteration, and the spmd event's evidence had no `boundary` to be
stamped with: the report had 0 steps and a profiler_error. Now: a step per iteration, the findings of the same loop
unsharded (`--plain`) plus the spmd story, no profiler error, the program's output as without sharding."""
from __future__ import annotations

import pytest

from conftest import SCRIPTS, TIMING_KINDS

SCRIPT = SCRIPTS / "spmd_megatron.py"


def _kinds(report) -> dict[str, str]:
    return {f["kind"]: f["severity"] for f in report["findings"]}


@pytest.mark.slow
def test_the_spmd_loop_gets_every_step_and_the_plain_loops_findings(profiled):
    spmd, plain = profiled(SCRIPT), profiled(SCRIPT, args=("--plain",))
    for run in (spmd, plain):
        assert run.proc.returncode == 0, run.proc.stderr[-3000:]
        assert "Traceback" not in run.proc.stderr and "internal error" not in run.proc.stderr, run.proc.stderr[-3000:]
        rep = run.report
        assert not rep.get("profiler_errors"), rep.get("profiler_errors")
        assert rep["summary"]["steps"] == 20 and len(rep["steps"]) == 20
        assert all(len(s["boundaries"]) >= 2 for s in rep["steps"])  # the loader's sync and the step's (and its last)
    assert spmd.proc.stdout == plain.proc.stdout.replace("done: 20 steps", "done: 20 steps on a 2x2 mesh")
    found, base = _kinds(spmd.report), _kinds(plain.report)
    for kind in TIMING_KINDS:  # timing verdicts follow the machine's load: test_timing_verdicts.py judges them
        found.pop(kind, None), base.pop(kind, None)
    assert found.pop("spmd") == "info"
    assert found == base, (found, base)
    assert spmd.report["summary"]["compiles"] == plain.report["summary"]["compiles"]
