"""The rules on hand-made records: iterations, compile classes, severity policy, guard - no runtime involved."""
from __future__ import annotations

import pytest

from ptxla_perf.analysis import iterations as I
from ptxla_perf.backends.jax import rules as jax_rules
from ptxla_perf.rules.iteration import analyze
from ptxla_perf.session.guard import Guard
from ptxla_perf.model.records import Event, Location, StepRecord, Transfers

F = "/user/train.py"


def loc(line: int) -> Location:
    return Location(F, line, "<module>")


def b(line: int = 20, *, execs: int = 1, compiles: int = 0, opt: int = 0, bwd: int = 0, d2h: int = 0,
      grad: bool | None = True, early: int = 0, events=(), phase=None, closure: int = 0, wall: float = 0.01,
      seconds: float = 0.0) -> StepRecord:
    return StepRecord(index=0, wall_time_s=wall, site=loc(line), compiles=compiles, compile_time_s=seconds,
                      executions=execs, device_to_host=Transfers(d2h, 4 * d2h),
                      optimizer_steps=opt, backward_calls=bwd, grad_enabled=grad, early_executions=early,
                      events=list(events), phase=phase, closure_reads=closure, device_to_host_time_s=0.001 * d2h)


def numbered(records: list[StepRecord]) -> list[StepRecord]:
    for i, r in enumerate(records):
        r.index = i
    return records


def train_step(**kw) -> StepRecord:
    return b(opt=1, bwd=1, **kw)


def idle(line: int = 30) -> StepRecord:
    return b(line, execs=0, grad=True)


def kinds(a, severity=None):
    return [(f.kind, f.severity) for f in a.findings if severity is None or f.severity == severity]


# --- iterations ---------------------------------------------------------------------------------------------
def test_loader_syncs_that_launch_nothing_join_the_iterations():
    recs = numbered([idle()] + [train_step(compiles=int(i == 0)) for i in range(10)] + [idle()])
    its = I.group(recs)
    assert len(its) == 10
    assert len(its[0].boundaries) == 2 and len(its[-1].boundaries) == 2
    assert all(it.phase == "train" for it in its)


def test_gradient_accumulation_counts_optimizer_steps():
    recs = []
    for _ in range(6):
        recs += [b(bwd=1), b(bwd=1, opt=1)]  # two micro-batches, each with its own sync
    a = analyze(numbered(recs))
    assert len(a.train) == 6
    assert all(len(it.boundaries) == 2 for it in a.train)
    assert not [k for k in kinds(a) if k[0] == "graph_break"]  # micro-batch syncs are not breaks


def test_eval_under_no_grad_is_its_own_phase():
    recs = [train_step() for _ in range(8)] + [b(40, grad=False) for _ in range(3)] + [train_step() for _ in range(8)]
    a = analyze(numbered(recs))
    assert len(a.train) == 16
    assert [it.phase for it in a.iterations].count("eval") == 3


def test_eval_loop_without_no_grad_repeats_at_its_line():
    recs = [train_step() for _ in range(5)] + [b(40) for _ in range(4)] + [train_step() for _ in range(5)]
    its = I.group(numbered(recs))
    assert sum(it.phase == "eval" for it in its) == 3  # the last one joins the next training iteration
    assert sum(it.phase == "train" for it in its) == 10


def test_sync_mid_step_is_a_graph_break_every_iteration():
    recs = []
    for _ in range(6):
        recs += [b(11), b(15, opt=1, bwd=1)]  # forward synced on its own, then backward + step
    a = analyze(numbered(recs))
    assert len(a.train) == 6
    gb = [f for f in a.findings if f.kind == "graph_break"]
    assert gb and gb[0].severity == "warning" and gb[0].location.line == 11


def test_forward_only_loop_each_launch_is_a_step():
    recs = numbered([idle()] + [b(20) for _ in range(5)])
    assert len(I.group(recs)) == 5


# --- compiles -----------------------------------------------------------------------------------------------
def test_warmup_compiles_that_stop_are_expected():
    recs = [train_step(compiles=1, seconds=0.5) for _ in range(3)] + [train_step() for _ in range(17)]
    a = analyze(numbered(recs))
    assert a.warmup == 3 and a.recompiles == 0
    assert not kinds(a, "warning")
    assert ("warmup_compiles", "info") in kinds(a)


def test_early_compiles_whose_evidence_is_a_changed_value_are_recompiles_not_warmup():
    """Iterations 1-4 compile, then never again (a Python int index over 5 batches): the second graph's own
    evidence is the optimizer state appearing (warm-up); the third's a baked-in constant, and the next ones kept
    the graph's size (same ops): recompiles, early or not."""
    key = "site:/user/train.py:20"
    state = Event("compile", loc(20), {"key": key, "cause": "argument_structure", "differences": ["+2 inputs"]})
    const = Event("compile", loc(22), {"key": key, "cause": "constant", "differences": ["slice 0:1 -> 1:2"]})
    same = Event("compile", None, {"key": key, "cause": None, "graph_size": [43, 43], "evidence": "graph size"})
    recs = [train_step(compiles=1), train_step(compiles=1, events=[state]), train_step(compiles=1, events=[const]),
            train_step(compiles=1, events=[same]), train_step(compiles=1, events=[same])]
    recs += [train_step() for _ in range(10)]
    a = analyze(numbered(recs))
    f = next(f for f in a.findings if f.kind == "recompilation")
    assert f.severity == "warning" and f.count == 3 and "constant" in f.message
    assert ("warmup_compiles", "info") in kinds(a)


def test_compiles_every_step_from_step_zero_are_recompiles():
    recs = [train_step(compiles=1, seconds=0.3) for _ in range(6)]
    a = analyze(numbered(recs))
    f = next(f for f in a.findings if f.kind == "recompilation")
    assert f.severity == "warning" and f.count == 5
    assert "unknown" in f.message  # no evidence captured: said plainly


def test_one_off_late_compile_is_info():
    recs = [train_step(compiles=1), train_step(compiles=1), train_step(), train_step(compiles=1)] + \
        [train_step() for _ in range(10)]
    a = analyze(numbered(recs))
    f = next(f for f in a.findings if f.kind == "recompilation")
    assert f.severity == "info" and "one-off" in f.message
    assert not kinds(a, "warning")


def test_cause_comes_from_the_compile_itself_not_from_warmup():
    special = Event("compile", loc(20), {"key": "site:/user/train.py:20", "cause": "special_scalar",
                                         "special_scalars": True, "differences": ["constant: 0 -> 1"]})
    recs = [train_step(compiles=1), train_step(compiles=1, events=[special])] + [train_step() for _ in range(3)]
    recs += [train_step(compiles=1) for _ in range(8)]  # later recompiles, nothing captured
    a = analyze(numbered(recs))
    f = next(f for f in a.findings if f.kind == "recompilation")
    assert f.severity == "warning"
    assert "0 or 1" not in f.message and "unknown" in f.message


def test_first_eval_compile_is_a_new_graph():
    recs = [train_step(compiles=int(i == 0)) for i in range(6)] + [b(40, grad=False, compiles=1)] + \
        [b(40, grad=False) for _ in range(3)]
    a = analyze(numbered(recs))
    assert ("new_graph", "info") in kinds(a)
    assert not [k for k in kinds(a) if k[0] == "recompilation"]


def test_eager_first_use_compiles_are_info():
    unit = Event("compile", loc(50), {"unit": True, "key": "eager:/user/train.py:50", "count": 23, "seconds": 0.4,
                                      "ops": ["add", "mul"]})
    recs = [b(20, phase="train", compiles=int(i == 0)) for i in range(9)] + [b(20, phase="train", compiles=23,
                                                                                events=[unit])]
    assert ("eager_compile", "info") not in kinds(analyze(numbered(recs)))  # JAX's own rule, not a neutral one
    a = analyze(numbered(recs), rules=jax_rules.RULES)
    assert ("eager_compile", "info") in kinds(a)
    assert not kinds(a, "warning")
    f = next(f for f in a.findings if f.kind == "eager_compile")
    # first run inside a training iteration: said, with what is not known (how often the line runs)
    assert f.evidence.in_training_loop == [{"file": F, "line": 50}] and "not measured" in f.message


# --- host reads -----------------------------------------------------------------------------------------------
def test_read_every_step_warns_with_its_cost():
    read = Event("device_to_host_sync", loc(25), {"call": "item"})
    recs = [train_step(d2h=1, events=[read] if i == 3 else []) for i in range(10)]
    a = analyze(numbered(recs))
    f = next(f for f in a.findings if f.kind == "device_to_host_sync")
    assert f.severity == "warning" and f.location.line == 25
    assert "ms per train step waiting" in f.message


def test_read_every_n_steps_is_info_amortised():
    recs = [train_step(d2h=int(i % 10 == 0)) for i in range(30)]
    a = analyze(numbered(recs))
    f = next(f for f in a.findings if f.kind == "device_to_host_sync")
    assert f.severity == "info" and "amortised" in f.message


def test_read_that_splits_the_eval_step_says_so():
    recs = [train_step() for _ in range(4)] + [b(40, grad=False, d2h=1, execs=2, early=1) for _ in range(4)]
    a = analyze(numbered(recs))
    f = next(f for f in a.findings if f.kind == "device_to_host_sync")
    assert f.severity == "warning" and f.evidence.phase == "eval"
    assert "2 graphs instead of 1" in f.message


def test_eval_result_read_once_per_pass_is_info():
    """Each pass of 3 eval batches ends with one read of its result (per epoch): not a per-step cost."""
    recs = []
    for _ in range(3):
        recs += [train_step() for _ in range(5)]
        recs += [b(40, grad=False), b(40, grad=False), b(40, grad=False, d2h=1)]
    a = analyze(numbered(recs))
    f = next(f for f in a.findings if f.kind == "device_to_host_sync")
    assert f.severity == "info" and f.evidence.once_per_pass and "once per eval pass" in f.message
    assert not kinds(a, "warning")


def test_eval_pass_held_in_one_record_reading_every_batch_warns():
    """One record per pass (JAX: the calls of other jitted functions between two steps): a read per launched
    eval batch is per step; one read for a pass of several batches is not."""
    def run(reads: int):
        recs = []
        for _ in range(3):
            recs += [train_step() for _ in range(5)] + [b(40, phase="eval", execs=4, d2h=reads)]
        f = next(f for f in analyze(numbered(recs)).findings if f.kind == "device_to_host_sync")
        return f.severity
    assert run(4) == "warning"
    assert run(1) == "info"
    # two lines read once each (the loss and the accuracy printed after the pass): still once per pass
    recs = []
    for _ in range(3):
        reads = [Event("device_to_host_sync", loc(41), {"call": "float"}),
                 Event("device_to_host_sync", loc(42), {"call": "int"})]
        recs += [train_step() for _ in range(5)] + [b(40, phase="eval", execs=2, d2h=2, events=reads)]
    assert not kinds(analyze(numbered(recs)), "warning")


def _mp_epochs(after_eval, grad: bool = True, train_steps: int = 1, epochs: int = 3) -> list[StepRecord]:
    """torch_xla's MpDeviceLoader (ImageNet-style test): a sync at each batch's fetch and two as a loader runs out
    (the last batch's launch, then an idle one), training at line 19, evaluation at line 29, and `after_eval()`:
    the boundaries the code after the evaluation loop leaves before the next epoch's first fetch."""
    recs = []
    for _ in range(epochs):
        recs += [train_step(line=19) for _ in range(train_steps)] + [idle(19)]
        recs += [b(29, grad=grad) for _ in range(4)] + [b(29, grad=grad), idle(29)]
        recs += after_eval()
    return numbered(recs)


@pytest.mark.parametrize("grad", [True, False])
def test_eval_result_read_after_a_loader_closed_pass_is_once_per_pass(grad):
    """issue 31: `correct.item()` after the evaluation loop was counted in the next epoch's first training
    iteration (a host read in most training iterations: a warning with one training step an epoch), and with
    autograd on the pass's last batch went with it. The read is the pass's, once per pass; the pass keeps its last
    batch."""
    a = analyze(_mp_epochs(lambda: [b(19, execs=0, d2h=1)], grad))
    assert not kinds(a, "warning"), a.findings
    assert [s.phase for s in a.iterations] == ["train"] + ["eval"] * 5 + (["train"] + ["eval"] * 5) * 2
    assert all(s.device_to_host.count == 0 for s in a.train)
    (f,) = [f for f in a.findings if f.kind == "device_to_host_sync"]
    assert f.severity == "info" and f.evidence.once_per_pass and f.evidence.phase == "eval"
    assert "once per eval pass (3 passes)" in f.message, f.message
    assert not [f for f in a.findings if f.kind == "graph_break"]


def test_mesh_reduce_after_the_eval_loop_is_once_per_pass():
    """`xm.mesh_reduce("acc", correct.item() / total, ...)` after the loop: a read, then graphs of its own that
    read (line 36), then the next epoch's fetch - all the pass's result, not training's."""
    after = lambda: [b(36, execs=0, d2h=1), b(36), b(36, d2h=1), b(19, execs=0, d2h=1)]  # noqa: E731
    a = analyze(_mp_epochs(after, train_steps=2))
    assert not kinds(a, "warning"), a.findings
    assert all(s.device_to_host.count == 0 and len(I.launching_boundaries(s)) <= 1 for s in a.train)
    (f,) = [f for f in a.findings if f.kind == "device_to_host_sync"]
    assert f.evidence.once_per_pass and "once per eval pass (3 passes)" in f.message, f.message
    assert not [f for f in a.findings if f.kind == "graph_break"]


def test_a_forward_at_the_eval_line_without_a_closing_sync_stays_trainings():
    """A forward synced at the line the evaluation loop also syncs at (a shared helper), then the optimizer step:
    without a loader's closing sync nothing tells it from the pass's last batch, so it stays the training
    iteration's part, as before."""
    recs = [train_step(line=19) for _ in range(3)] + [b(29) for _ in range(3)]
    recs += [b(29), train_step(line=19)] * 3
    its = I.group(numbered(recs))
    assert [s.phase for s in its] == ["train"] * 3 + ["eval"] * 3 + ["train"] * 3
    assert all(len(s.boundaries) == 2 for s in its[6:])


def test_a_read_after_a_no_grad_sync_every_step_stays_trainings():
    """A no_grad update synced every training step (an EMA), then `loss.item()` counted on the next loader sync:
    one evaluation iteration each step is no pass, so the read is training's, per step (a warning), as before."""
    recs = []
    for _ in range(6):
        recs += [b(19, execs=0, d2h=1), train_step(line=19), b(25, grad=False)]
    a = analyze(numbered(recs))
    (f,) = [f for f in a.findings if f.kind == "device_to_host_sync"]
    assert f.severity == "warning" and f.evidence.phase == "train" and not f.evidence.once_per_pass


def test_read_wait_cost_leaves_out_compiling_iterations():
    """A read on the compiling first step also waits for the compile and first run: that is compile time."""
    recs = [train_step(d2h=1) for _ in range(10)]
    recs[0].compiles, recs[0].device_to_host_time_s = 1, 2.0
    f = next(f for f in analyze(numbered(recs)).findings if f.kind == "device_to_host_sync")
    assert f.evidence.wait_ms_per_step == 1.0


def test_sync_between_backward_and_optimizer_step_splits_every_step():
    """backward(); mark_step(); optimizer.step(); mark_step(): not accumulation (one backward per update), the
    step runs as two graphs."""
    recs = []
    for _ in range(10):
        recs += [b(27, bwd=1), b(29, opt=1)]
    a = analyze(numbered(recs))
    assert len(a.iterations) == 10
    f = next(f for f in a.findings if f.kind == "graph_break")
    assert f.severity == "warning" and f.location.line == 27
    # two micro-batches, then the update on its own: accumulation, no break
    recs = []
    for _ in range(10):
        recs += [b(27, bwd=1), b(27, bwd=1), b(29, opt=1)]
    assert "graph_break" not in [k for k, _ in kinds(analyze(numbered(recs)))]


def test_a_boundary_launched_only_by_a_host_read_is_not_a_sync_inside_the_step():
    """The graph a read forced (`print(f"{loss * 4}")` after the step) lands in the next boundary's record: that
    is the read's cost (device_to_host_sync), not a second sync in the step."""
    read = Event("device_to_host_sync", loc(32), {"call": "__format__"})
    recs = []
    for i in range(10):
        recs += [b(24, execs=1, early=1, d2h=1, events=[read] if i == 2 else []), train_step(line=30)]
    a = analyze(numbered(recs))
    assert "graph_break" not in [k for k, _ in kinds(a)]
    assert ("device_to_host_sync", "warning") in kinds(a)


def test_work_left_by_an_eval_pass_is_not_a_sync_inside_the_next_step():
    """The loader's first sync after an evaluation launches what the pass left pending: not a graph break."""
    recs = []
    for epoch in range(3):
        leftover = b(37, execs=1 if epoch else 0)  # epoch > 0: the pass's pending accumulator runs here
        recs += [leftover] + [train_step(line=37) for _ in range(6)] + [b(50, grad=False), b(50, grad=False)]
    a = analyze(numbered(recs))
    assert [s.phase for s in a.iterations].count("eval") == 6
    assert "graph_break" not in [k for k, _ in kinds(a)], [f.message for f in a.findings]


def test_cpu_fallback_copies_are_not_user_reads():
    """aten::nonzero falls back 3 times per step, each copying its input to the host: 3 transfers per step that
    attribution saw as the fallback's. No device_to_host_sync finding (the op_fallback one says it)."""
    fallback = Event("op_fallback", loc(41), {"call": "__getitem__", "ops": ["aten::nonzero"], "transfers": 3})
    recs = [train_step(d2h=3, events=[fallback] if i == 3 else []) for i in range(12)]
    for r in recs:
        r.fallback_ops = {"aten::nonzero": 3}
    a = analyze(numbered(recs))
    assert "device_to_host_sync" not in [k for k, _ in kinds(a)]
    assert ("op_fallback", "warning") in kinds(a)


def test_step_closure_reads_are_the_recommended_pattern():
    recs = [train_step(closure=int(i % 10 == 0)) for i in range(20)]
    a = analyze(numbered(recs))
    f = next(f for f in a.findings if f.kind == "device_to_host_sync")
    assert f.severity == "info" and "recommended" in f.message


# --- guard --------------------------------------------------------------------------------------------------
def _runaway(rec, cfg):
    return "runaway" if rec.compiles >= cfg["runaway_compiles"] else None


def test_guard_warns_first_then_stops_on_repeat():
    g = Guard({}, _runaway, memory=lambda: 0.9)
    assert not g.check(b(compiles=1)).warn
    first = g.check(b(compiles=150))
    assert first.warn and not first.stop and "--guard off" in first.warn
    assert g.check(b(compiles=150)).stop


def test_guard_stops_at_once_when_memory_is_low():
    g = Guard({}, _runaway, memory=lambda: 0.05)
    assert g.check(b(compiles=150)).stop


def test_guard_off_and_non_runaway_never_stop():
    off = Guard(None, _runaway, memory=lambda: 0.01)
    assert not off.check(b(compiles=500)).stop
    never = Guard({}, lambda rec, cfg: None, memory=lambda: 0.01)  # JAX: compile counts are not runaway
    assert not any(never.check(b(compiles=50)).stop for _ in range(5))


# --- attribution plan -----------------------------------------------------------------------------------------
def test_attribution_plan_first_steps_then_on_demand_within_budget():
    from ptxla_perf.backends.attribution_plan import CALLS, GRAPHS, AttributionPlan
    plan = AttributionPlan({"mode": "auto", "initial_steps": 3, "rearm_steps": 2, "max_steps": 8, "hlo": True})
    kinds_ = [plan.next_kind(i) for i in range(7)]
    assert kinds_ == [GRAPHS] * 3 + [CALLS] * 2 + [None, None]
    plan.saw(7, [("compile", ("f", 1))])  # an unexplained recompile: capture the next graphs
    assert [plan.next_kind(8), plan.next_kind(9)] == [GRAPHS, GRAPHS]
    plan.saw(10, [("device_to_host_sync",)])
    assert plan.next_kind(11) == CALLS and plan.spent == 8
    plan.saw(12, [("device_to_host_sync",)])
    assert plan.next_kind(13) is None  # budget spent


def test_attribution_plan_books_the_period_of_a_recurring_problem():
    from ptxla_perf.backends.attribution_plan import CALLS, AttributionPlan
    plan = AttributionPlan({"mode": "auto", "initial_steps": 0, "rearm_steps": 0, "max_steps": 20, "hlo": True})
    plan.saw(7, [("device_to_host_sync",)])
    plan.saw(14, [("device_to_host_sync",)])
    assert [plan.next_kind(i) for i in range(15, 21)] == [None] * 6
    assert plan.next_kind(21) == CALLS


def test_attribution_plan_off_and_always():
    from ptxla_perf.backends.attribution_plan import CALLS, AttributionPlan
    off = AttributionPlan({"mode": "off", "initial_steps": 3, "rearm_steps": 2, "max_steps": 20, "hlo": True})
    off.saw(0, [("compile", "x")])
    assert off.next_kind(1) is None
    always = AttributionPlan({"mode": "always", "initial_steps": 0, "rearm_steps": 2, "max_steps": 1, "hlo": False})
    assert all(always.next_kind(i) == CALLS for i in range(30))


def test_always_mode_leaves_every_other_step_to_calls_when_graphs_keep_rearming():
    """`always`: a site that recompiles every step re-arms graph capture each time; calls steps must still come
    (they see the Python ints that index a device tensor, which a graph diff cannot put a line to)."""
    from ptxla_perf.backends.attribution_plan import CALLS, GRAPHS, AttributionPlan
    plan = AttributionPlan({"mode": "always", "max_steps": 20, "rearm_steps": 2, "hlo": True, "initial_steps": 3})
    kinds = []
    for step in range(10):
        kinds.append(plan.next_kind(step))
        plan.saw(step, [("compile", ("train.py", 11))])
    assert CALLS in kinds[3:] and GRAPHS in kinds[3:]
    assert all(not (a == b == GRAPHS) for a, b in zip(kinds[3:], kinds[4:]))


def test_grad_accumulation_update_graph_at_the_same_sync_is_not_a_recompile():
    """Two micro-batches per update, a sync after each: the micro-batch graph and the update graph share one sync
    line. The update graph's first compile (and its warm-up one step later, momentum appearing) are not
    recompiles of the micro-batch graph."""
    recs = [b(26, compiles=1, bwd=1), b(26, compiles=1, bwd=1, opt=1),   # iteration 0: both graphs new
            b(26, bwd=1), b(26, compiles=1, bwd=1, opt=1)]               # iteration 1: the update graph warms up
    for _ in range(6):
        recs += [b(26, bwd=1), b(26, bwd=1, opt=1)]
    a = analyze(numbered(recs))
    assert len(a.train) == 8
    assert a.recompiles == 0
    assert not [k for k in kinds(a) if k[0] == "recompilation"], kinds(a)
    assert ("warmup_compiles", "info") in kinds(a)


def test_every_rule_is_registered_once_with_its_kind():
    from ptxla_perf.rules.iteration import RULES
    kinds_ = [r.kind for r in (*RULES, *jax_rules.RULES)]
    assert len(kinds_) == len(set(kinds_)) and all(kinds_)


def test_a_rule_without_its_data_is_reported_not_judged():
    recs = numbered([b(20, opt=1, compiles=int(i == 0)) for i in range(6)])
    a = analyze(recs, attribution=False)
    assert [x["kind"] for x in a.not_judged] == ["host_to_device_transfer"] and "off" in a.not_judged[0]["reason"]
    assert "host_to_device_transfer" not in a.judged and "device_to_host_sync" in a.judged
    a = analyze(recs)  # attribution on: every rule is judged
    assert not a.not_judged and "host_to_device_transfer" in a.judged


def test_reads_net_of_fallback_copies_are_one_count():
    """The summary's device_to_host and the device_to_host_sync finding count the same reads: CPU-fallback copies
    (measured on an attribution step) are neither."""
    fb = Event("op_fallback", loc(30), {"ops": ["aten::nonzero"], "transfers": 2})
    recs = []
    for i in range(6):
        r = b(20, opt=1, d2h=3, compiles=int(i == 0), events=[fb] if i == 1 else [])
        r.fallback_ops = {"aten::nonzero": 1}
        r.attributed = i == 1
        recs.append(r)
    a = analyze(numbered(recs))
    summary = a.figures.summary().to_json()
    assert summary["device_to_host"] == 6 and summary["fallback_copies"] == 12
    assert summary["device_to_host_per_step"] == 1.0
    f = next(f for f in a.findings if f.kind == "device_to_host_sync")
    assert f.count == summary["device_to_host"] and f.per_step == summary["device_to_host_per_step"]


def test_step_time_never_counts_compile_time():
    """Every iteration after warm-up compiles (a batch size that changes every step): the statistics take each
    iteration's wall time net of its own compile time, and say so."""
    recs = numbered([b(20, opt=1, compiles=1, seconds=1.0, wall=1.02) for _ in range(8)])
    summary = analyze(recs).figures.summary().to_json()
    assert summary["step_time_basis"] == "net_of_compile"
    assert summary["step_time_s"]["p50"] == pytest.approx(0.02)
    clean = numbered([b(20, opt=1, compiles=int(i == 0), seconds=1.0 * (i == 0), wall=0.02) for i in range(8)])
    assert analyze(clean).figures.summary().step_time_basis == "steady"


def test_a_read_every_step_reads_as_every_step():
    """A read in 29 of 30 steps printed as "0.97 times per train step"; one read in each step that reads is
    "once per train step", with how many steps had it."""
    from ptxla_perf.model import fmt
    recs = numbered([b(20, opt=1, d2h=int(i != 5), compiles=int(i == 0)) for i in range(30)])
    f = next(f for f in analyze(recs).findings if f.kind == "device_to_host_sync")
    assert f.severity == "warning" and "once per train step, in 29 of 30 train steps" in f.message
    assert "0.97 times" not in f.message  # (the wait, 0.97 ms per step, may say 0.97)
    assert (fmt.times(1.0), fmt.times(2.02), fmt.times(3.0), fmt.times(1.5)) == ("once", "twice", "3 times",
                                                                                 "1.50 times")
