"""The training thread under torch_xla.launch (issue 30, point 6): the launched child runs the user's function in
a per-device worker thread, not its main thread. The host CPU clock, the data-wait timing and the stack sampler
follow the thread that trains (training_thread.py), so one loop gets one diagnosis alone and launched - and in a
thread of the program's own (torch_xla and JAX), settled at the first step boundary.

End to end: what the worker thread's clock and the sampler measured, and where a finding points when it is made.
Whether the host or the loader is the largest part depends on the machine's load: the verdicts on these runs'
recorded steps are tests/test_timing_verdicts.py's."""
from __future__ import annotations

import re
import threading

import pytest

from conftest import SCRIPTS, load_report, planted_line, run_cli, sampled_lines

SCRIPT = SCRIPTS / "mp_launch_host_heavy.py"
JAX_SCRIPT = SCRIPTS / "jax_thread_host_heavy.py"
# the scripts' steps: ~25 steady ones. A sample of pure Python lands when the loop's thread hands the GIL over, up to
# the 5 ms switch interval after the sampler wakes, so a wake in the last 5 ms of the ~10 ms planted block is taken
# in the torch/sync code after it: with 12 steps (7 steady) about one run in ten had no sample in the block at all
STEPS = 30
# the module's runs are read by several tests each: one xdist worker, so that each is made once
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("launch_thread")]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """`profile` of the loop (how: alone | thread | launch, what: host | data), each run once for the module."""
    done: dict = {}

    def get(how: str, what: str, script=SCRIPT):
        if (how, what, script) not in done:
            out = tmp_path_factory.mktemp(f"{script.stem}_{how}_{what}")
            proc = run_cli("profile", "--port", "none", "--report", str(out / "report.json"), str(script), how,
                           what, cwd=out, timeout=180)
            assert proc.returncode == 0 and "done" in proc.stdout, proc.stderr[-3000:]
            rank0 = out / "report.rank0.json"
            done[how, what, script] = (proc, load_report(rank0 if how == "launch" else out / "report.json"))
        return done[how, what, script]
    return get


def _host_s(report: dict) -> float:
    """The host part per step: the training thread's CPU time (0 where its thread is not the one measured)."""
    return report["summary"]["time_breakdown"]["components_s"]["host"]


def _found_at(report: dict, kind: str, script, tag: str, first_line_tag: str) -> None:
    """A finding of this timing kind, where this run's load made one: one, at the tagged line, its first sampled
    line the other tag's."""
    found = [f for f in report["findings"] if f["kind"] == kind]
    assert len(found) <= 1, report["findings"]
    for f in found:
        assert f["location"]["line"] == planted_line(script, tag), f
        assert f["evidence"]["lines"][0]["line"] == planted_line(script, first_line_tag), f


def test_host_heavy_loop_is_host_bound_alone_and_launched(runs):
    _, alone = runs("alone", "host")
    proc, launched = runs("launch", "host")
    assert launched["summary"]["steps"] == STEPS
    # the planted block's CPU time, measured on whichever thread runs the loop, alone or launched (before the
    # training thread was followed, a launched child's host time was 0 and all of it `other`)
    assert _host_s(alone) > 0 and _host_s(launched) > 0, (alone["summary"]["time_breakdown"],
                                                           launched["summary"]["time_breakdown"])
    # the child's host time is measured on its worker thread: every steady step has some, and the sync's own part
    steady = [s for s in launched["steps"] if s["steady"]]
    assert steady and all(s["host_cpu_s"] > 0 and s["launch_time_s"] > 0 for s in steady)
    # the sampler read the worker thread's stack: the user's planted line is the hot line
    for report in (alone, launched):
        assert sampled_lines(report, SCRIPT, "user")[:1] == [planted_line(SCRIPT)], report["steps"][-1]
    _found_at(launched, "host_bound", SCRIPT, "PLANTED", "PLANTED")
    assert re.search(r"time/step .*host \d", proc.stderr)  # the parent's merged summary shows the child's host


@pytest.mark.parametrize("backend", ["torch_xla", "jax"])
def test_a_loop_in_a_thread_of_its_own_is_host_bound(runs, backend):
    """The session starts on the main thread, which then only waits in join(): the first step boundary's thread
    is measured from then on."""
    script = SCRIPT if backend == "torch_xla" else JAX_SCRIPT
    _, report = runs("thread", "host", script)
    assert report["backend"] == backend
    assert _host_s(report) > 0, report["summary"]["time_breakdown"]
    assert all(s["host_cpu_s"] > 0 for s in report["steps"] if s["steady"])
    assert sampled_lines(report, script, "user")[:1] == [planted_line(script)], report["steps"][-1]
    _found_at(report, "host_bound", script, "PLANTED", "PLANTED")


def test_launched_slow_loader_is_input_bound_at_the_loop_line(runs):
    _, report = runs("launch", "data")
    steady = [s for s in report["steps"] if s["steady"]]
    assert steady and all(s["data_wait_s"] for s in steady)  # the loader's next() timed on the worker thread
    assert sampled_lines(report, SCRIPT, "data")[:1] == [planted_line(SCRIPT, "DATA_LINE")], report["steps"][-1]
    _found_at(report, "input_bound", SCRIPT, "LOOP_LINE", "DATA_LINE")  # inside __getitem__, sampled
    assert all(f["evidence"]["call"] == "DataLoader" for f in report["findings"] if f["kind"] == "input_bound")


def test_the_boundary_thread_is_settled_and_its_clock_outlives_it():
    """A session started on the main thread whose loop runs on another: settling there measures that thread; its
    clock is read from any thread, also once that thread has ended (its last value then), never an error."""
    from ptxla_perf.model.training_thread import TrainingThread
    t = TrainingThread()
    t.reset(threading.main_thread())
    assert t.ident == threading.main_thread().ident and not t.settled
    seen = {}

    def worker():
        sum(range(200_000))
        seen["changed"], seen["ident"], seen["cpu"] = t.settle(), t.ident, t.cpu()
    th = threading.Thread(target=worker)
    th.start()
    th.join()
    assert seen["changed"] and t.settled and seen["ident"] == th.ident
    assert t.cpu() >= seen["cpu"] > 0  # the worker's clock, read after it ended: no error
