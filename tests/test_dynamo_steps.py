"""dynamo training without a sync (issue 28): torch.compile's step called once per batch from a DataLoader loop,
in the style of torch_xla's dynamo guide, never calls torch_xla.sync(); each batch is a step all the same."""
from __future__ import annotations

import pytest

from conftest import SCRIPTS, cli_env
from plain_runs import run_plain

# the `profiled` runs are read by several tests each: one xdist worker, so that each is made once
pytestmark = pytest.mark.xdist_group("dynamo_steps")

SCRIPT = SCRIPTS / "dynamo_loop_no_sync.py"


@pytest.mark.slow
def test_a_compiled_step_without_a_sync_reports_each_batch_as_a_step(profiled):
    run = profiled(SCRIPT)
    plain = run_plain(SCRIPT, env=cli_env(), timeout=600)
    assert run.proc.returncode == plain.returncode == 0, run.proc.stderr[-3000:]
    assert run.proc.stdout == plain.stdout  # the same losses: the loop boundary syncs nothing
    rep = run.report
    assert "batches 12" in plain.stdout
    assert rep["summary"]["steps"] == 12, rep["summary"]
    kinds = {f["kind"] for f in rep["findings"]}
    assert "no_steps" not in kinds and "dynamo_graphs" in kinds, kinds
    assert all(s["compiles"] == 0 for s in rep["steps"][2:]), [s["compiles"] for s in rep["steps"]]


LIST_SCRIPT = SCRIPTS / "dynamo_list_no_sync.py"


@pytest.mark.slow
@pytest.mark.parametrize("args", [(), ("break",), ("accum",)], ids=["whole", "graph_break", "accumulation"])
def test_a_compiled_step_over_a_list_of_batches_reports_each_batch_as_a_step(profiled, args):
    """No DataLoader: the loop runs over a plain list. The compiled step's first graph runs again at the next
    batch, after the optimizer step: a boundary there (with a graph break inside the compiled function, too). With
    gradient accumulation the compiled micro-step's graph runs twice per batch: a boundary only after the optimizer
    step, so a step is still a batch."""
    run = profiled(LIST_SCRIPT, args=args)
    plain = run_plain(LIST_SCRIPT, *args, env=cli_env(), timeout=600)
    assert run.proc.returncode == plain.returncode == 0, run.proc.stderr[-3000:]
    assert run.proc.stdout == plain.stdout  # the same losses: the boundary syncs nothing
    assert "batches 12" in plain.stdout
    assert plain.stdout.count("forward done") == (12 if args == ("break",) else 0)
    rep = run.report
    assert abs(rep["summary"]["steps"] - 12) <= 1, rep["summary"]  # the last batch may end with the run
    kinds = {f["kind"] for f in rep["findings"]}
    assert "no_steps" not in kinds and "dynamo_graphs" in kinds, kinds
    per_step = [(s["optimizer_steps"], s["backward_calls"]) for s in rep["steps"]]
    assert all(p == (1, 2 if args == ("accum",) else 1) for p in per_step), per_step
    assert all(s["compiles"] == 0 for s in rep["steps"][2:]), [s["compiles"] for s in rep["steps"]]
