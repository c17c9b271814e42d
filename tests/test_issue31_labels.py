"""Issue 31 item 7 on a torch_xla loop written for it (tests/scripts/torch_labels.py): the page names each step
graph by where it runs, the step-time legend never gives two different things one colour, and the console says
which device figure is the host's wait and which the device's whole busy time."""
from __future__ import annotations

import re

import pytest

from conftest import SCRIPTS, planted_line

SCRIPT = SCRIPTS / "torch_labels.py"


@pytest.fixture
def run(profiled):
    pytest.importorskip("torch_xla")
    r = profiled(SCRIPT)
    assert r.proc.returncode == 0, r.proc.stderr[-3000:]
    return r


def test_memory_panel_names_graphs_by_the_line_that_runs_them(run):
    page = run.path.with_suffix(".html").read_text()
    panel = page[page.index('id="memory"'):]
    ids = [g["id"] for g in run.report["memory"]["graphs"]]
    assert ids and all(re.fullmatch(r"[0-9a-f]{16,}", i) for i in ids), ids  # torch_xla's graph hashes
    at = f"step at torch_labels.py:{planted_line(SCRIPT)}"
    for gid in ids:  # the label says where; the hash stays in the tooltip
        assert f"<title>{gid}</title>{at}" in panel, gid
    assert f"Largest buffers at the peak: the {at} (graph " in panel


def test_step_time_legend_gives_each_label_its_own_colour(run):
    page = run.path.with_suffix(".html").read_text()
    legend = re.findall(r'<span><i style="background:(#[0-9a-fA-F]+)"></i>([^<]+)</span>', page)
    colour = {label.split(" ")[0] if label.startswith(("compile", "read")) else label: c for c, label in legend}
    names = [label for _, label in legend]
    assert "compiled" in names and any(n.startswith("compile ") or n == "compile" for n in names), names
    assert colour["compiled"] != colour["compile"], legend
    assert colour["host read"] != colour["read"], legend  # the flag "host read" and the split's "read wait"
    assert "step time split:" in page


def test_console_tells_the_device_wait_from_the_device_busy_time(run):
    err = run.proc.stderr
    split = next(ln for ln in err.splitlines() if ln.startswith("  time/step"))
    assert not re.search(r"(^|· |   )device \d", split), split  # "device wait", never a bare "device"
    roof = "\n".join(ln for ln in err.splitlines() if ln.startswith(("  roofline", "              predicted")))
    assert run.report["roofline"]["device_step_time_s"] is not None, run.report["roofline"]
    assert re.search(r"device busy [0-9.]+ \w+/step \([^)]*overlap with the host included\)", roof), roof
