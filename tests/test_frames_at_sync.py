"""The stack sampler never holds a frame while a torch_xla sync runs (sampler.FrameGate). A frame object that
outlives its call keeps the call's locals alive; on a loaded machine the sampler could lose the GIL (or its CPU)
between taking the stacks and letting go of them, while the training thread returned from a function and reached
its sync: torch_xla then synced the returned call's tensors as extra outputs - another graph, one compile more than
the plain run (seen in CI under load: a fine-tuning loop's optimizer step and zero_grad'ed grads). Here the race is
forced: a hook in `sys._current_frames` holds the stacks it took for 0.3 s (the GIL released, as when the OS
preempts the sampler), once, while the script's step function runs; the function returns and the loop syncs at once.
"""
from __future__ import annotations

import subprocess
import sys
import time

import pytest

from conftest import SCRIPTS, cli_env

pytestmark = pytest.mark.slow  # a real torch_xla run

HOOK = """
import sys, threading, time
real, main_id, done = sys._current_frames, threading.main_thread().ident, []
def current_frames():
    stacks = real()
    f = stacks.get(main_id)
    if not done and f is not None and f.f_code.co_name == "update" and f.f_globals.get("HOLD"):
        done.append(1)
        f.f_globals["HELD"] = True
        f = None
        time.sleep(0.3)  # preempted while holding the frames: the training thread runs on
    return stacks
sys._current_frames = current_frames
from ptxla_perf.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_a_sync_never_runs_while_the_sampler_holds_a_returned_call(tmp_path):
    report = tmp_path / "r.json"
    proc = subprocess.run([sys.executable, "-c", HOOK, "profile", "--port", "none", "--report", str(report),
                           str(SCRIPTS / "frame_held_at_sync.py")], cwd=tmp_path, env=cli_env(),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "held True" in proc.stdout, proc.stdout  # the hook did hold the frames while `update` ran
    # the plain run's compiles: one graph, compiled at the first step (an extra output at step 3 compiled again)
    assert "compiles 1 1 1 1 1 1" in proc.stdout, proc.stdout


def test_the_sampler_takes_no_stack_while_a_sync_runs():
    """Unit: while a sync is counted in (FRAMES.sync_begins), samples take no stack and count as the sync's time;
    a sync waits for a sample under way; two syncs at once (a launcher's threads) never wait for each other."""
    from ptxla_perf.backends import sampler as S
    taken, real = [], sys._current_frames
    sampler = S.StackSampler(interval=0.002)
    try:
        sys._current_frames = lambda: taken.append(1) or real()
        assert S.FRAMES.sync_begins() and S.FRAMES.sync_begins()  # a second sync at once: no wait
        try:
            sampler.start()
            deadline = time.time() + 5
            while sampler.samples < 5 and time.time() < deadline:
                time.sleep(0.005)
            assert sampler.samples >= 5 and not taken
            assert sampler.seconds[S.CALL] > 0
        finally:
            S.FRAMES.sync_ends()
            S.FRAMES.sync_ends()
        deadline = time.time() + 5
        while not taken and time.time() < deadline:
            time.sleep(0.005)
        assert taken  # no sync runs: sampling goes on

        # a sample under way (here: slowed inside the gate) holds a sync back until it ends
        def slow():
            stacks = real()
            time.sleep(0.2)
            return stacks
        taken.clear()
        sys._current_frames = lambda: taken.append(time.perf_counter()) or slow()
        deadline = time.time() + 5
        while not taken and time.time() < deadline:
            time.sleep(0.001)
        t0 = time.perf_counter()
        assert S.FRAMES.sync_begins()
        waited = time.perf_counter() - t0
        S.FRAMES.sync_ends()
        assert taken and time.perf_counter() - taken[0] >= 0.19 and waited > 0.05, (taken, waited)
    finally:
        sampler.stop()
        sys._current_frames = real


def test_the_live_holders_search_keeps_no_local_of_the_users_frames():
    """live_holders.find_holder reads the user's frames' locals (the holder's name): before Python 3.13 that leaves
    a snapshot dict on each function frame, which kept the loop's locals (device memory) alive after the loop
    rebound them. After the search, a value the loop let go of is gone, and the loop's own variables read as
    before."""
    import weakref

    from ptxla_perf.backends.live_holders import find_holder, holder_counts

    class Dev:  # a device value, for the backend-neutral search
        pass

    def is_dev(x):
        return isinstance(x, Dev)

    def loop():
        losses = [Dev(), Dev()]
        before = holder_counts(is_dev)
        out = Dev()
        losses.append(out)
        gone = weakref.ref(out)
        found = find_holder(is_dev, lambda x: 8, sys._getframe(), before)
        assert found is not None and found[1]["holder"] == "losses", found
        out = Dev()  # the loop rebinds its variable: the value it held is free
        losses.pop()
        assert gone() is None
        assert locals()["out"] is out and len(locals()["losses"]) == 2  # locals() reads the frame as ever
        return True

    assert loop()
