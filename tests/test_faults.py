"""Never take the program down (issue 27): our own code made to fail at each hook, boundary stage, rule, section
and writer (PTXLA_PERF_FAULTS, faults.py). The program's output and exit code stay those of the plain run, no
traceback is printed, and the report is still written, saying what failed."""
from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import SCRIPTS, cli_env, load_report, run_cli
from plain_runs import run_plain
from ptxla_perf.model import faults

# the plain runs are compared by every case: one xdist worker, so that each is made once
pytestmark = pytest.mark.xdist_group("faults")

TORCH = SCRIPTS / "faults_torch.py"
JAX = SCRIPTS / "faults_jax.py"


# --- shielded: the user's one call around our code (pure; no framework) ------------------------------------
def test_our_failure_before_the_call_still_makes_the_call_once():
    calls = []

    def real(x):
        calls.append(x)
        return x * 2

    def ours(call):
        raise ValueError("our bug")
    assert faults.shielded("test.before", ours, real, 21) == 42
    assert calls == [21]
    assert any(f.where == "test.before" and f.error == "ValueError" for f in faults.FAULTS.since(0))


def test_our_failure_after_the_call_returns_its_result_without_calling_again():
    calls = []

    def real(x):
        calls.append(x)
        return [x]

    def ours(call):
        out = call(5)
        raise KeyError("after")
    assert faults.shielded("test.after", ours, real, 5) == [5]
    assert calls == [5]


def test_the_users_own_exception_goes_on_unchanged():
    def real():
        raise ZeroDivisionError("theirs")
    mark = faults.FAULTS.mark()
    with pytest.raises(ZeroDivisionError, match="theirs"):
        faults.shielded("test.theirs", lambda call: call(), real)
    assert faults.FAULTS.since(mark) == []  # not recorded as ours


def test_a_stop_is_not_swallowed():
    class Stop(KeyboardInterrupt):
        pass

    def stage():
        raise Stop()
    with pytest.raises(Stop):
        faults.guarded("test.stop", stage)


# --- real runs -------------------------------------------------------------------------------------------
def _plain(script):
    if script == TORCH:
        return run_plain(script, env=cli_env(), timeout=300)
    return subprocess.run([sys.executable, str(script)], env=cli_env(), capture_output=True, text=True,
                          timeout=300)


@pytest.fixture(scope="module")
def plain_runs():
    return {s: _plain(s) for s in (TORCH, JAX)}


def _faulty(tmp_path, script, points: str):
    report = tmp_path / "report.json"
    proc = run_cli("profile", "--port", "none", "--report", str(report), str(script), cwd=tmp_path,
                   PTXLA_PERF_FAULTS=points)
    assert report.exists(), proc.stderr[-3000:]
    return proc, load_report(report)


def _same_program(proc, plain):
    assert plain.returncode == 3 and "done" in plain.stdout  # the script's own exit code and output
    assert proc.stdout == plain.stdout
    assert proc.returncode == plain.returncode
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    notes = [l for l in proc.stderr.splitlines() if "internal error in" in l]
    assert len(notes) == 1, proc.stderr  # one line, however many points failed


def _failed_points(report) -> set[str]:
    errors = report.get("profiler_errors") or []
    assert all(e["traceback"].startswith("Traceback") and "InjectedFault" in e["traceback"] for e in errors)
    finding = [f for f in report["findings"] if f["kind"] == "profiler_error"]
    assert len(finding) == 1 and finding[0]["severity"] == "info", report["findings"]
    return {e["where"] for e in errors}


CASES = [
    # hooks around the user's calls, boundary stages, every rule, the sections, the writers, the adapter's stop:
    # the steps are still measured where their own stage did not fail
    pytest.param(TORCH, "torch_xla.timed_call,torch_xla.attribution,boundary.sampled,boundary.label,rule.*,"
                        "section.roofline,section.memory,html,summary,adapter.stop,sampler",
                 {"torch_xla.timed_call", "torch_xla.attribution", "boundary.sampled", "boundary.label",
                  "rule.host_bound", "rule.device_to_host_sync", "section.roofline", "section.memory", "html",
                  "summary", "adapter.stop"}, 6, id="torch_xla-hooks-rules-sections"),
    # the analysis at the finest grain (issue 37): one evidence type, one figure, the compile classes, one section
    pytest.param(TORCH, "evidence.device_to_host_sync,figure.throughput,figure.time_breakdown,analysis.compiles,"
                        "section.sources,section.rank_digest",
                 {"evidence.device_to_host_sync", "figure.throughput", "figure.time_breakdown", "analysis.compiles",
                  "section.sources", "section.rank_digest"}, 6, id="torch_xla-event-figure-section"),
    pytest.param(TORCH, "torch_xla.sync", {"torch_xla.sync"}, 0, id="torch_xla-sync-hook"),
    pytest.param(TORCH, "report", {"report"}, 0, id="torch_xla-report-assembly"),
    pytest.param(JAX, "jax.call_end,jax.boundary,jax.np_read,jax.monitoring,jax.upload,boundary.sampled,adapter.stop",
                 {"jax.call_end", "jax.boundary", "jax.monitoring", "jax.upload", "boundary.sampled", "adapter.stop"},
                 None, id="jax-hooks"),
    pytest.param(JAX, "jax.call", {"jax.call"}, 0, id="jax-call-hook"),  # step detection is in that hook
    pytest.param(JAX, "jax.jit", {"jax.jit"}, 0, id="jax-jit-wrapper"),
    pytest.param(JAX, "*", {"adapter.start", "report", "html"}, 0, id="jax-everything"),
]


@pytest.mark.slow
@pytest.mark.parametrize("script,points,expected,steps", CASES)
def test_a_failure_of_ours_leaves_the_program_alone_and_the_report_says_it(tmp_path, plain_runs, script, points,
                                                                          expected, steps):
    proc, report = _faulty(tmp_path, script, points)
    _same_program(proc, plain_runs[script])
    failed = _failed_points(report)
    assert expected <= failed, (expected - failed, failed)
    if steps is None:
        assert len(report["steps"]) > 0  # measuring went on past the failed points
    else:
        assert len(report["steps"]) == steps
