"""A slow input pipeline is found on every run, without a capture (issue 18, first part): the time the loop waits
in its loader's next() is measured per step, and a loop that waits for its batches most of each step gets an
`input_bound` warning at the loop's line, with the measured wait."""
from __future__ import annotations

import pytest

from conftest import SCRIPTS, planted_line

PLANTED_WAIT_S = 2 * 0.02  # batch_size x the sleep in __getitem__ (0 workers)


@pytest.mark.parametrize("workers", ["0", "2"])
def test_slow_loader_is_input_bound_at_the_loop_line(profile, workers):
    script = SCRIPTS / "slow_loader.py"
    proc, report = profile(script, workers)
    assert proc.returncode == 0 and "trained 12 steps" in proc.stdout, proc.stderr[-2000:]
    found = [f for f in report["findings"] if f["kind"] == "input_bound"]
    assert len(found) == 1 and found[0]["severity"] == "warning", report["findings"]
    f = found[0]
    assert f["location"]["line"] == planted_line(script)
    assert f["evidence"]["call"] == "DataLoader" and f["evidence"]["share"] >= 0.3
    steady = [s for s in report["steps"] if s["steady"]]
    assert all(s["data_wait_s"] is not None for s in steady)
    if workers == "0":  # every sample's sleep is on the loop's own time: the wait is the planted one
        assert f["evidence"]["wait_ms_per_step"] == pytest.approx(PLANTED_WAIT_S * 1e3, rel=0.25)
        # the breakdown's data part is that wait, and the sampler names the line inside __getitem__
        split = report["summary"]["time_breakdown"]
        assert split["components_s"]["data"] == pytest.approx(PLANTED_WAIT_S, rel=0.25)
        assert max((p for p in split["components_s"] if p != "other"), key=split["components_s"].get) == "data"
        assert f["evidence"]["lines"][0]["line"] == planted_line(script, "DATA_LINE")
        assert f"{planted_line(script, 'DATA_LINE')} (__getitem__)" in f["message"]
    for s in report["steps"]:  # every step's parts sum to its wall time
        assert sum(s["time_breakdown"].values()) == pytest.approx(s["wall_time_s"], rel=0.05, abs=1e-6)
    assert report["roofline"]["related_findings"] in ([], ["input_bound"])


def test_a_loop_that_does_not_wait_for_data_is_not_input_bound(profile):
    _, report = profile(SCRIPTS / "clean_loop.py")
    assert not [f for f in report["findings"] if f["kind"] == "input_bound"]
