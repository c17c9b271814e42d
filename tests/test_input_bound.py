"""A slow input pipeline is found on every run, without a capture (issue 18, first part): the time the loop waits
in its loader's next() is measured per step, and a loop that waits for its batches most of each step gets an
`input_bound` warning at the loop's line, with the measured wait. End to end: the wait measured on every step and
where the time went (load-independent); the verdict on this loop's recorded steps: test_timing_verdicts.py."""
from __future__ import annotations

import pytest

from conftest import SCRIPTS, planted_line, sampled_lines

PLANTED_WAIT_S = 2 * 0.02  # batch_size x the sleep in __getitem__ (0 workers)


@pytest.mark.parametrize("workers", ["0", "2"])
def test_slow_loader_is_input_bound_at_the_loop_line(profile, workers):
    script = SCRIPTS / "slow_loader.py"
    proc, report = profile(script, workers)
    assert proc.returncode == 0 and "trained 12 steps" in proc.stdout, proc.stderr[-2000:]
    found = [f for f in report["findings"] if f["kind"] == "input_bound"]  # the verdict: where the load made one
    assert len(found) <= 1, report["findings"]
    for f in found:
        assert f["location"]["line"] == planted_line(script) and f["evidence"]["call"] == "DataLoader", f
    steady = [s for s in report["steps"] if s["steady"]]
    assert steady and all(s["data_wait_s"] is not None for s in steady)
    if workers == "0":  # every sample's sleep is on the loop's own time: at least the planted wait (a sleep ends
        # late on a busy machine, never early), and the sampler names the line inside __getitem__
        assert all(s["data_wait_s"] >= 0.95 * PLANTED_WAIT_S for s in steady), [s["data_wait_s"] for s in steady]
        assert sampled_lines(report, script, "data")[:1] == [planted_line(script, "DATA_LINE")], report["steps"][-1]
        for f in found:
            assert f["evidence"]["lines"][0]["line"] == planted_line(script, "DATA_LINE")
            assert f"{planted_line(script, 'DATA_LINE')} (__getitem__)" in f["message"]
    for s in report["steps"]:  # every step's parts sum to its wall time
        assert sum(s["time_breakdown"].values()) == pytest.approx(s["wall_time_s"], rel=0.05, abs=1e-6)
    assert report["roofline"]["related_findings"] in ([], ["input_bound"])


@pytest.mark.xdist_group("txla_scripts")  # clean_loop.py's run is test_profile_findings.py's
def test_a_loop_that_does_not_wait_for_data_is_not_input_bound(profiled):
    report = profiled(SCRIPTS / "clean_loop.py").report
    assert not [f for f in report["findings"] if f["kind"] == "input_bound"]
