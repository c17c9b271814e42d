"""report.html in a real headless Chromium (issue 12): the page of a planted-problem run (a recompile every step)
and of a clean run load with no console errors and no network requests, the timeline has one mark per step, the
recompile card shows the culprit line's source, and a screenshot is not blank. A negative control proves the
console and network checks can fail."""
from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from conftest import SCRIPTS, planted_line, run_cli
from test_tensorboard_browser import CHROME_FLAGS, _chromium

# the runs of index_by_step.py and clean_loop.py are shared with test_profile_findings.py (one xdist worker)
pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("txla_scripts")]

CONSOLE = re.compile(r":CONSOLE[^\]]*\]\s*(.*)")


def _open(chrome: str, page: Path, tmp: Path, *args: str) -> dict:
    """Load `page` once: the DOM after scripts ran, console messages, and the URLs the page itself requested
    (from Chromium's net log: requests whose isolation key is the file:// page, not the browser's own)."""
    netlog = tmp / f"net-{page.stem}-{len(args)}.json"
    res = subprocess.run([chrome, *CHROME_FLAGS, f"--user-data-dir={tmp / 'profile'}", "--enable-logging=stderr",
                          "--v=0", f"--log-net-log={netlog}", *args, page.resolve().as_uri()],
                         capture_output=True, text=True, timeout=120)
    console = [m.group(1) for m in map(CONSOLE.search, res.stderr.splitlines()) if m]
    requested = []
    if netlog.exists():
        log = json.loads(netlog.read_text() or "{}")
        types = {v: k for k, v in log.get("constants", {}).get("logEventTypes", {}).items()}
        for e in log.get("events", []):
            p = e.get("params") or {}
            if types.get(e.get("type")) == "URL_REQUEST_START_JOB" and "file://" in str(
                    p.get("network_isolation_key", "")) and not str(p.get("url", "")).startswith("file:"):
                requested.append(p["url"])
    return {"dom": res.stdout, "console": console, "requests": requested, "stderr": res.stderr}


@pytest.fixture(scope="module")
def chrome():
    return _chromium()


@pytest.fixture(scope="module")
def pages(profiled):
    out = {}
    for name in ("index_by_step", "clean_loop"):
        proc, report, path = profiled(SCRIPTS / f"{name}.py")
        assert path.with_suffix(".html").exists(), proc.stderr[-3000:]
        out[name] = (path.with_suffix(".html"), report)
    return out


def test_negative_control_console_and_network_are_seen(chrome, tmp_path):
    page = tmp_path / "bad.html"
    page.write_text('<html><body><img src="http://127.0.0.1:9/x.png"><script>console.error("boom");'
                    "missing()</script></body></html>")
    got = _open(chrome, page, tmp_path, "--dump-dom")
    assert any("boom" in c for c in got["console"]) and any("missing" in c for c in got["console"]), got["stderr"]
    assert got["requests"] == ["http://127.0.0.1:9/x.png"]


@pytest.mark.parametrize("name", ["index_by_step", "clean_loop"])
def test_page_loads_clean_with_one_mark_per_step(chrome, pages, tmp_path, name):
    page, rep = pages[name]
    got = _open(chrome, page, tmp_path, "--dump-dom")
    assert got["console"] == [], got["console"]
    assert got["requests"] == []
    dom = got["dom"]
    assert 'data-ptxla-ready="1"' in dom, "the page's script did not run to its end"
    marks = re.findall(r'<rect class="m ([a-z ]+)"', dom)
    assert len(marks) == len(rep["steps"]) > 0
    warnings = [f for f in rep["findings"] if f["severity"] == "warning"]
    assert dom.count('class="card warning"') == len(warnings)


def test_recompile_card_shows_culprit_source(chrome, pages, tmp_path):
    page, rep = pages["index_by_step"]
    dom = _open(chrome, page, tmp_path, "--dump-dom")["dom"]
    line = planted_line(SCRIPTS / "index_by_step.py")
    culprit = (SCRIPTS / "index_by_step.py").read_text().splitlines()[line - 1].strip()
    card = dom[dom.index('data-kind="recompilation"'):]
    card = card[:card.index("</article>")]
    hit = re.search(r'<span class="l hit"><span class="n">(\d+)</span>(.*?)</span>', card)
    assert hit and int(hit.group(1)) == line
    assert culprit.split("#")[0].strip() in hit.group(2)


@pytest.mark.parametrize("name", ["index_by_step", "clean_loop"])
def test_screenshot_is_not_blank(chrome, pages, tmp_path, name):
    from PIL import Image

    page, rep = pages[name]
    shot = tmp_path / f"{name}.png"
    _open(chrome, page, tmp_path, "--window-size=1300,1100", f"--screenshot={shot}")
    img = Image.open(shot).convert("RGB")
    assert img.size == (1300, 1100)
    colours = img.getcolors(maxcolors=1 << 20)
    assert len(colours) > 50  # text, cards, bars: not a blank page
    blue, red = (0x3b, 0x6f, 0xd4), (0xd6, 0x32, 0x2c)  # train-step bars; compile-step bars (charts.COLOURS)
    present = {c for _, c in colours}
    if any(s["compiles"] == 0 and not s["attributed"] for s in rep["steps"]):
        assert blue in present
    assert red in present  # both runs compile in their first step


def test_diff_page_loads_clean(chrome, pages, tmp_path):
    (pa, ra), (pb, rb) = pages["index_by_step"], pages["clean_loop"]
    out = tmp_path / "diff.html"
    proc = run_cli("diff", str(pa.with_suffix(".json")), str(pb.with_suffix(".json")), "--html", str(out))
    assert proc.returncode == 0, proc.stderr
    got = _open(chrome, out, tmp_path, "--dump-dom")
    assert got["console"] == [] and got["requests"] == []
    assert 'data-ptxla-ready="1"' in got["dom"]
    assert len(re.findall(r'<rect class="m ', got["dom"])) == len(ra["steps"]) + len(rb["steps"])


def test_merged_page_heat_map_renders(chrome, pages, tmp_path):
    """A merged report of 40 ranks (copies of a real run's report, 8 ranks per host): the page's ranks x steps
    heat map renders - one cell per rank and column - with no console error and no request."""
    import importlib.util
    from conftest import ROOT, load_report
    spec = importlib.util.spec_from_file_location("ptxla_merge_scale_benchmark", ROOT / "benchmarks" / "merge_scale.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    page, rep = pages["clean_loop"]
    bench.write_copies([rep, rep], 40, [], str(tmp_path / "pod"))
    out = tmp_path / "merged.json"
    proc = run_cli("merge", str(tmp_path / "pod"), "--report", str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    hm = load_report(out)["aggregate"]["heatmap"]
    got = _open(chrome, out.with_suffix(".html"), tmp_path, "--dump-dom")
    assert got["console"] == [] and got["requests"] == []
    dom = got["dom"]
    assert 'data-ptxla-ready="1"' in dom
    svg = re.search(r'<svg class="heatmap step" data-rows="(\d+)" data-cols="(\d+)"(.*?)</svg>', dom, re.S)
    assert svg and int(svg.group(1)) == len(hm["ranks"]) == 40 and int(svg.group(2)) == hm["columns"] > 0
    cells = sum(v is not None for row in hm["step_ms"] for v in row)
    assert len(re.findall(r'<rect class="hm"', svg.group(3))) == cells > 0
    assert len(set(re.findall(r'fill="(#[0-9a-f]{6})"', svg.group(3)))) > 1  # a heat map, not one flat colour
    table = dom[dom.index('id="processes"'):]
    assert len(re.findall(r"<tr data-rank=", table[:table.index("</section>")])) == 32  # a pod: its slowest 32
