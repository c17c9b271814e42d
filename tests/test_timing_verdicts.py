"""Timing verdicts on recorded steps: which part of the step is largest (host_bound, launch_bound, input_bound, the
breakdown's `largest`) depends on the machine's load, so the end-to-end tests of these scripts assert only what
does not (counts, lines, output, exit code: conftest.TIMING_KINDS), and the verdicts are judged here, on the step
records a real run of each script wrote with `--steps-file` (tests/fixtures/steps/, recorded by its make.py): the
analysis a live session runs, on what a real run measured, whatever the load of the machine running the suite."""
from __future__ import annotations

import pytest

from conftest import TIMING_KINDS, planted_line
from recorded_steps import Judged


def test_heavy_python_block_is_host_bound_at_its_line():
    run = Judged("host_heavy")
    f = run.only("host_bound")
    assert f["severity"] == "warning" and f["location"]["line"] == planted_line(run.script)
    assert f["evidence"]["lines"][0]["line"] == planted_line(run.script) and f["evidence"]["share"] >= 0.5
    assert run.own_largest() == "host" and run.timing() == ["host_bound"]


def test_a_clean_loop_gets_no_timing_warning():
    run = Judged("clean_loop")
    assert not [f for f in run.findings if f["kind"] in TIMING_KINDS and f["severity"] != "info"], run.findings


def test_tiny_torch_xla_steps_over_many_inputs_are_launch_bound_at_the_sync():
    run = Judged("tiny_steps_many_inputs")
    f = run.only("launch_bound")
    assert f["severity"] == "warning" and f["location"]["line"] == planted_line(run.script)
    ev = f["evidence"]
    assert ev["share"] >= 0.4 and ev["graphs_per_step"] == pytest.approx(1.0)
    assert ev["device_ms_per_step"] is not None and ev["device_ms_per_step"] < ev["ms_per_step"]
    assert ev["ms_per_step"] == pytest.approx(run.split["components_s"]["launch"] * 1e3, abs=1e-3)
    assert run.own_largest() == "launch" and run.timing() == ["launch_bound"]


@pytest.mark.parametrize("case", ["wait_device_ops_loop", "jax_device_time"])
def test_time_blocked_waiting_for_the_device_is_the_largest_part(case):
    run = Judged(case)
    assert run.split["largest"] == "device", run.split
    assert run.split["components_s"]["device"] > 2 * run.split["components_s"]["other"], run.split
    assert not run.timing(), run.findings


@pytest.mark.parametrize("case", ["launch_host", "thread_host_xla", "thread_host_jax"])
def test_host_heavy_loop_on_another_thread_is_host_bound_at_its_line(case):
    """torch_xla.launch's worker thread, a thread of the program's own (torch_xla, JAX): the host time and the
    sampled lines are the training thread's (test_launch_thread.py runs them end to end)."""
    run = Judged(case)
    f = run.only("host_bound")
    assert f["location"]["line"] == planted_line(run.script)
    assert f["evidence"]["lines"][0]["line"] == planted_line(run.script)
    assert f["severity"] == "warning" and run.own_largest() == "host", run.split


@pytest.mark.parametrize("case, loop_tag", [("launch_data", "LOOP_LINE"), ("slow_loader", "PLANTED"),
                                            ("threaded_loading_mp", "PLANTED"),
                                            ("threaded_loading_prefetch", "PLANTED")])
def test_slow_loader_is_input_bound_at_the_loop_line(case, loop_tag):
    """The loader's wait, timed on the training thread (or sampled in the loader's own thread), is the largest
    part; the warning names the loop's line and the line inside __getitem__ the time goes to."""
    run = Judged(case)
    f = run.only("input_bound")
    assert f["severity"] == "warning" and f["location"]["line"] == planted_line(run.script, loop_tag), f
    assert f["evidence"]["lines"][0]["line"] == planted_line(run.script, "DATA_LINE"), f["evidence"]
    assert f"{planted_line(run.script, 'DATA_LINE')} (__getitem__)" in f["message"], f["message"]
    assert run.own_largest() == "data", run.split
    if case in ("launch_data", "slow_loader"):
        assert f["evidence"]["call"] == "DataLoader" and f["evidence"]["share"] >= 0.3


def test_slow_loader_wait_is_the_planted_sleep():
    """0 workers: every sample's sleep (2 x 20 ms a batch) is the loop's own wait, and the breakdown's data part."""
    run = Judged("slow_loader")
    f = run.only("input_bound")
    assert f["evidence"]["wait_ms_per_step"] == pytest.approx(40, rel=0.25)
    assert run.split["components_s"]["data"] == pytest.approx(0.040, rel=0.25)


def test_jax_generator_with_heavy_numpy_is_input_bound_at_its_line():
    run = Judged("jax_generator")
    f = run.only("input_bound")
    assert f["severity"] == "warning" and f["evidence"]["measured"] == "sampled"
    assert f["location"]["line"] == planted_line(run.script, "LOOP")
    assert f["evidence"]["lines"][0]["line"] == planted_line(run.script)
    assert f"{planted_line(run.script)} (batches" in f["message"]
    assert run.own_largest() == "data"


def test_jax_tiny_steps_over_many_leaves_are_launch_bound_at_the_call():
    run = Judged("jax_many_leaves")
    f = run.only("launch_bound")
    device, launch = f["evidence"]["device_ms_per_step"], f["evidence"]["ms_per_step"]
    assert device is not None and f["location"]["line"] == planted_line(run.script)
    assert f["severity"] == ("warning" if device < launch else "info")
    assert f["evidence"]["share"] >= 0.4 and f["evidence"]["graphs_per_step"] == pytest.approx(1.0)
    assert run.own_largest() == "launch"


def test_device_part_follows_the_blocked_sync_on_a_device_bound_loop():
    """test_issue31_xla.py's loop (item 9): per steady step where the sync blocked, the device part and the blocked
    time agree within 15 % over the run, and no step keeps half of it in `other` (the old cap at one graph)."""
    from ptxla_perf.analysis import breakdown as B
    run = Judged("device_bound_convnet")
    steady = [s for s in run.steady if s.device_time_s is not None]
    walls = sorted(s.wall_time_s for s in steady)
    blocked = []
    for s in steady:
        parts = B.components(s)
        waited = parts["device"] + parts["other"]  # the sync's blocked time (and what the CPU did elsewhere)
        if waited > 0.5 * walls[len(walls) // 2]:  # a sync that blocked (not one that returned at once)
            blocked.append((s.index, parts["device"], waited))
    assert len(blocked) >= 8, blocked
    summary = run.split["components_s"]
    assert summary["device"] >= 0.85 * (summary["device"] + summary["other"]), (summary, blocked)
    off = [b for b in blocked if b[1] < 0.5 * b[2]]
    assert len(off) <= len(blocked) // 8, (off, blocked)


def test_eager_uploads_are_rated_by_their_dispatch_time():
    """test_issue31_jax.py's vmap loop (item 4): a 4-byte eager upload each iteration costs a small share of the
    step (info); the 80 kB one of `bulk` takes most of it (a warning), the tiny one beside it stays info."""
    tiny = Judged("vmap_upload")
    (f,) = [f for f in tiny.findings if f["kind"] == "host_to_device_transfer"]
    assert f["severity"] == "info" and f["location"]["line"] == planted_line(tiny.script), f
    bulk = Judged("vmap_upload_bulk")
    by_line = {f["location"]["line"]: f for f in bulk.findings if f["kind"] == "host_to_device_transfer"}
    big = by_line[planted_line(bulk.script, "BULK")]
    assert big["severity"] == "warning" and big["evidence"]["share_of_step"] >= 0.1, big
    assert by_line[planted_line(bulk.script)]["severity"] == "info"
