"""The session's step sinks (session/sinks.py): every output the boundaries feed is one object in one list, fed in
order at every boundary and closed in one place after the last one; one that fails drops only itself."""
import contextlib
import io
import json
import re

import pytest

STEPS = 6


class Mine:
    """A sink of the test's own: logs its steps beside the callbacks', and fails to close."""

    name = "mine"

    def __init__(self, log):
        self.log = log

    def on_step(self, rec):
        self.log.append(("mine", rec.index))

    def close(self):
        raise RuntimeError("mine cannot close")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """One in-process JAX session with every kind of sink: a callback that fails at every step, one that logs
    (added before start), a sink added after start that fails to close, the steps file, progress and flush."""
    import jax
    import jax.numpy as jnp

    from ptxla_perf.session import Session
    d = tmp_path_factory.mktemp("sinks")
    s = Session("jax", report_path=str(d / "r.json"), port=None, handle_signals=False, summary=False,
                progress_every_s=1e-9, flush_every_s=1e-9, steps_file=str(d / "steps.jsonl"))
    log, at_close = [], []

    def fail(rec):
        raise ValueError("a callback that fails")

    s.add_step_callback(fail)
    s.add_step_callback(lambda rec: log.append(("seen", rec.index)), lambda: at_close.append(len(log)))
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        s.start()
        s.add_sink(Mine(log))
        step = jax.jit(lambda w: w * 0.99 + 0.01)
        w = jnp.ones(4)
        for _ in range(STEPS):
            w = step(w)
        report = s.finish()
    return s, report, log, at_close, err.getvalue(), d


def test_one_list_in_one_order(run):
    """Sinks added (before or after start) come first, in the order added, then the session's own outputs; each
    boundary feeds them in that order."""
    s, report, log, *_ = run
    assert [k.name for k in s.sinks] == ["callback", "callback", "mine", "steps_file", "progress", "flush"]
    n = report["summary"]["boundaries"]
    assert n >= 2 and log == [(who, i) for i in range(n) for who in ("seen", "mine")]


def test_a_failing_sink_drops_only_itself(run):
    """A callback that raises at every step is one profiler error (`boundary.callback`); the callback after it and
    the session's own outputs still get every step, and a sink whose close fails (`finish.mine`) leaves the others
    closing and the report written."""
    s, report, log, _, _, d = run
    errors = {e["where"]: e for e in report["profiler_errors"]}
    assert set(errors) == {"boundary.callback", "finish.mine"}, errors
    assert errors["boundary.callback"]["error"] == "ValueError"
    lines = (d / "steps.jsonl").read_text().splitlines()
    assert [json.loads(line)["index"] for line in lines] == [i for who, i in log if who == "seen"]
    assert json.loads((d / "r.json").read_text())["run"]["status"] == "completed"


def test_closed_after_the_last_step(run):
    """A sink is closed after the adapter's last boundary (JAX may still give one when it stops): a callback's
    close has seen every step."""
    _, report, log, at_close, *_ = run
    assert at_close == [len(log)] and log


def test_progress_line(run):
    """The progress line (every step here): the step, its time, the compiles so far (the one compile of the jitted
    step)."""
    _, _, log, _, err, _ = run
    lines = re.findall(r"ptxla_perf: step (\d+), last [\d.]+ ms, (\d+) compiles so far", err)
    assert [int(i) for i, _ in lines] == [i for who, i in log if who == "seen"]
    assert lines[-1][1] == "1"
