"""The training thread under torch_xla.launch (issue 30, point 6): the launched child runs the user's function in
a per-device worker thread, not its main thread. The host CPU clock, the data-wait timing and the stack sampler
follow the thread that trains (training_thread.py), so one loop gets one diagnosis alone and launched - and in a
thread of the program's own (torch_xla and JAX), settled at the first step boundary."""
from __future__ import annotations

import re
import threading

import pytest

from conftest import SCRIPTS, load_report, planted_line, run_cli

SCRIPT = SCRIPTS / "mp_launch_host_heavy.py"
JAX_SCRIPT = SCRIPTS / "jax_thread_host_heavy.py"
pytestmark = pytest.mark.slow


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


def _largest(report: dict) -> str:
    return report["summary"]["time_breakdown"]["largest"]


def _host_share(report: dict) -> float:
    """The host part's share of the step's wall time: the loop's planted block is nearly all of its CPU work, so
    a third of the wall time even with the machine's cores shared (0 where its thread is not the one measured)."""
    b = report["summary"]["time_breakdown"]
    return b["components_s"]["host"] / b["wall_s"]


def test_host_heavy_loop_is_host_bound_alone_and_launched(runs):
    _, alone = runs("alone", "host")
    proc, launched = runs("launch", "host")
    assert launched["summary"]["steps"] == 12
    # the planted block's CPU time, measured on whichever thread runs the loop: the same work alone or launched
    # (its share of the wall time depends on the machine's load, the thread's CPU clock does not; before the
    # training thread was followed, a launched child's host time was 0 and all of it `other`)
    host_alone, host_launched = _host_share(alone), _host_share(launched)
    assert host_alone > 0.3 and host_launched > 0.3, (alone["summary"]["time_breakdown"],
                                                      launched["summary"]["time_breakdown"])
    # the child's host time is measured on its worker thread: every steady step has some, and the sync's own part
    steady = [s for s in launched["steps"] if s["steady"]]
    assert steady and all(s["host_cpu_s"] > 0 and s["launch_time_s"] > 0 for s in steady)
    found = [f for f in launched["findings"] if f["kind"] == "host_bound"]
    assert len(found) == 1 and found[0]["severity"] == "warning", launched["findings"]
    # the sampler read the worker thread's stack: the user's planted line is the hot line
    assert found[0]["location"]["line"] == planted_line(SCRIPT)
    assert found[0]["evidence"]["lines"][0]["line"] == planted_line(SCRIPT)
    assert re.search(r"time/step .*host \d", proc.stderr)  # the parent's merged summary shows the child's host


@pytest.mark.parametrize("backend", ["torch_xla", "jax"])
def test_a_loop_in_a_thread_of_its_own_is_host_bound(runs, backend):
    """The session starts on the main thread, which then only waits in join(): the first step boundary's thread
    is measured from then on."""
    script = SCRIPT if backend == "torch_xla" else JAX_SCRIPT
    _, report = runs("thread", "host", script)
    assert report["backend"] == backend
    assert _host_share(report) > 0.3, report["summary"]["time_breakdown"]
    found = [f for f in report["findings"] if f["kind"] == "host_bound"]
    assert len(found) == 1 and found[0]["evidence"]["lines"][0]["line"] == planted_line(script), report["findings"]


def test_launched_slow_loader_is_input_bound_at_the_loop_line(runs):
    _, report = runs("launch", "data")
    assert _largest(report) == "data", report["summary"]["time_breakdown"]
    steady = [s for s in report["steps"] if s["steady"]]
    assert steady and all(s["data_wait_s"] for s in steady)  # the loader's next() timed on the worker thread
    found = [f for f in report["findings"] if f["kind"] == "input_bound"]
    assert len(found) == 1 and found[0]["severity"] == "warning", report["findings"]
    f = found[0]
    assert f["evidence"]["call"] == "DataLoader"
    assert f["location"]["line"] == planted_line(SCRIPT, "LOOP_LINE")
    assert f["evidence"]["lines"][0]["line"] == planted_line(SCRIPT, "DATA_LINE")  # inside __getitem__, sampled


def test_the_boundary_thread_is_settled_and_its_clock_outlives_it():
    """A session started on the main thread whose loop runs on another: settling there measures that thread; its
    clock is read from any thread, also once that thread has ended (its last value then), never an error."""
    from ptxla_perf.training_thread import TrainingThread
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
