"""When the host runs ahead of the device (pacing.py): a wait for several steps' queued work is spread back over
those steps. The rule on synthetic records (pure logic), then a real JAX loop that logs every 10 steps."""
from __future__ import annotations

import json

import pytest

from conftest import SCRIPTS
from ptxla_perf.analysis import breakdown as B
from ptxla_perf.rules import iteration as findings
from ptxla_perf.analysis.fold import Folded
from ptxla_perf.analysis.pacing import spread
from ptxla_perf.model.records import StepRecord
from test_breakdown import assert_parts_sum_to_wall_time


def _rec(i: int, wall: float, read: float = 0.0, queue: float | None = 0.0, flops: float | None = None,
         execs: int = 1) -> StepRecord:
    return StepRecord(index=i, wall_time_s=wall, executions=execs, launch_time_s=0.0002, host_cpu_s=0.0005,
                      device_to_host_time_s=read, device_wait_s=0.0, queue_wait_s=queue, flops=flops)


def _host_ahead(n_groups: int = 3, every: int = 10, step: float = 0.05) -> list[StepRecord]:
    """A loop whose host launches each step in 1 ms and reads the loss every `every` steps, waiting there for the
    device to finish the `every` steps queued (each `step` s of device work)."""
    recs = []
    for i in range(n_groups * every):
        last = i % every == every - 1
        wait = every * step - (every - 1) * 0.001 - 0.001 if last else 0.0
        recs.append(_rec(i, 0.001 + wait, read=wait))
    return recs


def test_a_read_every_n_steps_is_spread_over_the_steps_it_waited_for():
    recs = _host_ahead()
    total = sum(r.wall_time_s for r in recs)
    spread(recs)
    paced = [B.paced_wall(r) for r in recs]
    assert paced == pytest.approx([0.05] * len(recs), rel=1e-6)  # each step: what the device took for it
    assert sum(paced) == pytest.approx(total)  # nothing made up, nothing lost
    for r in recs:
        parts = B.components(r)
        assert sum(parts.values()) == pytest.approx(B.paced_wall(r))
        assert max(parts, key=parts.get) == "device" and parts["read_wait"] == 0.0


def test_spreading_is_idempotent_and_leaves_waitless_tails_and_synchronous_loops_alone():
    recs = _host_ahead() + [_rec(30, 0.001), _rec(31, 0.001)]  # two steps launched, no wait after them yet
    spread(recs)
    first = [(r.spread_in_s, r.spread_out_s) for r in recs]
    spread(recs)  # the fold and the analysis both run it
    assert [(r.spread_in_s, r.spread_out_s) for r in recs] == first
    assert recs[-1].spread_in_s is None and B.paced_wall(recs[-1]) == 0.001
    every_step = [_rec(i, 0.05, read=0.049) for i in range(5)]  # waits every step: its own device work
    spread(every_step)
    assert all(r.spread_in_s is None for r in every_step)
    torch_like = [_rec(i, 0.001, queue=None) for i in range(4)] + [_rec(4, 0.2, read=0.196, queue=None)]
    spread(torch_like)  # no measured queue (a synchronous backend): a read is its own step's
    assert all(r.spread_in_s is None for r in torch_like)


def test_a_wait_after_the_loop_is_spread_over_the_steps_since_the_last_wait():
    """`jax.block_until_ready(state)` after a loop that never read: the tail's wait is the queued steps' work."""
    recs = [_rec(i, 0.001) for i in range(5)]
    tail = _rec(5, 0.201, read=0.2)
    spread(recs, tail)
    assert [B.paced_wall(r) for r in recs] == pytest.approx([0.041] * 5)
    assert tail.spread_out_s == pytest.approx(0.2) and tail.spread_in_s is None
    spread(recs, tail)  # settled: unchanged
    assert [B.paced_wall(r) for r in recs] == pytest.approx([0.041] * 5)


def test_shares_follow_each_steps_program_cost():
    """The device ran the three steps back to back, each for a time in proportion to its FLOPs."""
    recs = [_rec(0, 0.001, flops=1e9), _rec(1, 0.001, flops=3e9), _rec(2, 0.081, read=0.08, flops=4e9)]
    spread(recs)
    assert [B.paced_wall(r) for r in recs] == pytest.approx([0.083 / 8, 0.083 * 3 / 8, 0.083 / 2])
    assert sum(r.spread_in_s for r in recs) == pytest.approx(0.08)
    assert recs[2].spread_out_s == pytest.approx(0.08) and recs[0].spread_out_s == 0.0


def _queued_loop(groups: int = 3, every: int = 40, depth: int = 16, launch: float = 0.0025,
                 device: float = 0.011) -> list[StepRecord]:
    """A device-bound loop as a GPU runs it: each call launches in `launch` s; the runtime keeps at most `depth`
    executions in flight, so once the queue is full a call blocks until the oldest finishes (`queue_wait_s`); the
    device runs each step in `device` s, in launch order; the loss is read every `every` steps."""
    recs, done, t = [], [], 0.0
    for i in range(groups * every):
        start = t
        blocked = max(done[i - depth] - t, 0.0) if i >= depth else 0.0
        t += blocked + launch
        done.append(max(t, done[-1] if done else 0.0) + device)
        read = 0.0
        if i % every == every - 1:
            read = max(done[-1] - t, 0.0)
            t += read
        recs.append(_rec(i, t - start, read=read, queue=blocked))
    return recs


def test_a_wait_tops_up_only_the_steps_the_host_ran_ahead_of():
    """After each read the host runs ahead until the queue is full, then every call waits for a slot: those steps
    were already paced by the device. The read's wait belongs to the steps launched ahead, so every step comes out
    at the device's 11 ms (a wait spread evenly over all 40 gave ~6 ms to the first and ~14.5 ms to the rest,
    as a GPU's report said: p50 13.5 ms for a loop of 11.0 ms per step)."""
    recs = _queued_loop()
    total = sum(r.wall_time_s for r in recs)
    spread(recs)
    paced = [B.paced_wall(r) for r in recs]
    assert sum(paced) == pytest.approx(total)
    assert paced[1:] == pytest.approx([0.011] * (len(recs) - 1), rel=0.05)
    paced_by_queue = [r for r in recs if r.queue_wait_s > 0 and r.wall_time_s >= 0.011 - 1e-9]
    assert paced_by_queue and all(r.spread_in_s < 0.001 for r in paced_by_queue)  # their calls waited for it
    assert all(max(B.components(r), key=B.components(r).get) == "device" for r in recs[1:])


def test_the_analysis_and_the_fold_see_the_paced_steps():
    """The analysis's step time (p50 and mean) is the device's pace, `device` the largest part, no launch_bound;
    folding the same records first gives the same figures (the fold spreads before it averages)."""
    recs = _host_ahead(n_groups=6)
    a = findings.analyze([r.copy() for r in recs], max_warmup=0)
    st = a.figures.summary().step_time_s
    assert st.p50 == pytest.approx(0.05, rel=0.01) and st.mean == pytest.approx(0.05, rel=0.01)
    assert a.figures.steady_breakdown()["largest"] == "device"
    assert not [f for f in a.findings if f.kind == "launch_bound"]
    folded = Folded()
    rest = folded.take([r.copy() for r in recs], window=20)
    b = findings.analyze(rest, max_warmup=0, folded=folded)
    assert b.figures.summary().step_time_s.mean == pytest.approx(0.05, rel=0.01)
    assert b.figures.steady_breakdown()["largest"] == "device"


@pytest.mark.slow
def test_a_jax_loop_that_logs_every_10_steps_is_timed_at_the_devices_pace(profiled, tmp_path):
    """Large matmuls fed a NumPy batch, the loss printed every 10 steps: the host launches 10 steps in a few ms and
    waits at the print. The report's steady step time is the loop's own ms/step as the script timed it in the same
    run (not the host's 1 ms launches, not a 400 ms read every 10th step), `device` is the largest part, and the
    step is not called launch-bound."""
    own = tmp_path / "own.json"
    run = profiled(SCRIPTS / "jax_host_ahead.py", args=("print", str(own)))
    assert run.proc.returncode == 0 and "step 40 loss" in run.proc.stdout, run.proc.stderr[-2000:]
    rep = run.report
    assert_parts_sum_to_wall_time(rep)
    truth = json.loads(own.read_text())["ms_per_step"] / 1e3
    st = rep["summary"]["step_time_s"]
    assert 0.5 * truth < st["p50"] < 2 * truth, (st, truth)  # before: p50 ~1/50 of it
    assert st["mean"] == pytest.approx(truth, rel=0.3)
    split = rep["summary"]["time_breakdown"]["components_s"]
    assert max((p for p in split if p != "other"), key=split.get) == "device", split
    assert not [f for f in rep["findings"] if f["kind"] == "launch_bound"]
    sync = [f for f in rep["findings"] if f["kind"] == "device_to_host_sync"]
    assert sync and all(f["severity"] == "info" for f in sync)
    assert "waited for the device to finish the steps queued before it" in sync[0]["message"]
