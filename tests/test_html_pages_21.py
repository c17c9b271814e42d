"""The analyze and diff pages (issue 21, item 10): axis ticks people read ("6 s", not "6e+03 ms"), y-axis labels that
never overprint each other or the flag rows' labels, and a capture's idle share and its windows with no device op
from one derivation."""
from __future__ import annotations

import re

import pytest

from ptxla_perf.html import charts


def _labels(svg: str) -> list[tuple[float, str, str]]:
    return [(float(y), cls or "", text) for cls, y, text in
            re.findall(r'<text (?:class="(\w+)" )?x="[\d.]+" y="([\d.-]+)" text-anchor="end">([^<]*)</text>', svg)]


def test_breakdown_ticks_read_as_numbers_people_write():
    rows = [{"step": k, "duration_ms": 7000.0, "breakdown_ms": {"execution": 6000.0, "compile": 1000.0}}
            for k in range(3)]
    svg = charts.breakdown(rows)
    ticks = [t for _, _, t in _labels(svg)]
    assert ticks == ["0", "2 s", "4 s", "6 s", "8 s"], ticks
    assert "e+" not in svg
    small = charts.breakdown([{"step": 0, "duration_ms": 0.7, "breakdown_ms": {"execution": 0.7}}])
    assert [t for _, _, t in _labels(small)][1:] == ["0.2 ms", "0.4 ms", "0.6 ms", "0.8 ms"]


@pytest.mark.parametrize("times", [
    [2.0] + [0.008] * 19,  # log scale: "5 ms" sat 11.8 px above the "compile" row label (issue 21)
    [0.0052, 0.0049, 0.006] * 10 + [2.0],
    [0.05, 0.051, 0.049] * 10,
])
def test_timeline_labels_never_overprint(times):
    """The diff page draws both runs' step times on one scale: a tick near the bottom of the log axis ("5 ms")
    was drawn over the "compile" flag row's label."""
    steps = [{"index": i, "wall_time_s": t, "phase": "train", "compiles": int(i == 0)} for i, t in enumerate(times)]
    labels = sorted(_labels(charts.timeline(steps)["labels"]))
    assert [t for _, c, t in labels if c == "flag"] == ["compile", "attribution", "host read"]
    ticks = [(y, t) for y, c, t in labels if c != "flag"]
    assert ticks, labels
    ys = [y for y, _, _ in labels]
    assert all(b - a >= 12 for a, b in zip(ys, ys[1:])), labels
    assert all("e+" not in t for _, t in ticks)


def test_diff_page_timeline_labels_clear_of_flag_rows(tmp_path):
    """The same on the diff page itself (two reports on one time scale)."""
    import copy
    import json
    from pathlib import Path

    from ptxla_perf.diff import compare, from_report
    from ptxla_perf.html import diff_page
    base = json.loads((Path(__file__).parent / "fixtures" / "metrics" / "report_fixed.json").read_text())
    a, b = copy.deepcopy(base), copy.deepcopy(base)
    for k, s in enumerate(a["steps"]):
        s["wall_time_s"] = 2.0 if k == 0 else 0.008
    for k, s in enumerate(b["steps"]):
        s["wall_time_s"] = 1.5 if k == 0 else 0.0085
    comparison = compare(from_report(a, "a.json"), from_report(b, "b.json"))
    page = diff_page.render(comparison.to_dict(), reports=(a, b))
    for svg in re.findall(r'<svg class="ylabels".*?</svg>', page, flags=re.S)[::2]:  # each side's timeline labels
        ys = sorted(y for y, _, _ in _labels(svg))
        assert all(b2 - a2 >= 12 for a2, b2 in zip(ys, ys[1:])), _labels(svg)
