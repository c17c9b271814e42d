"""Issue 31 on torch_xla loops written for it. Item 7 (tests/scripts/torch_labels.py): the page names each step
graph by where it runs, the step-time legend never gives two different things one colour, and the console says
which device figure is the host's wait and which the device's whole busy time. Item 6
(tests/scripts/torch_multiscale.py): a multi-scale resize's recompiles point at the resize in the loop, not at the
loss's ops that follow its size."""
from __future__ import annotations

import re

import pytest

from conftest import SCRIPTS, planted_line

# the `profiled` run of torch_labels.py is read by three tests: one xdist worker, so that each is made once
pytestmark = pytest.mark.xdist_group("issue31_torch")

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


MULTISCALE = SCRIPTS / "torch_multiscale.py"


def test_multiscale_resize_recompiles_point_at_the_resize(profiled):
    pytest.importorskip("torch_xla")
    r = profiled(MULTISCALE)
    assert r.proc.returncode == 0, r.proc.stderr[-3000:]
    (f,) = [f for f in r.report["findings"] if f["kind"] == "recompilation"]
    assert f["location"]["line"] == planted_line(MULTISCALE), f  # not grid_loss's torch.arange
    assert f["evidence"]["cause"] == "internal_shapes", f["evidence"]
    assert any("inside interpolate(), called at torch_multiscale.py:" in d for d in f["evidence"]["differences"]), f
