"""report.html (issue 12): written beside every report, self-contained, one timeline mark per step, finding cards
with the culprit's source lines, small for long runs; `view` rebuilds it and rejects broken or older reports with
one line and exit 2. The page in a real browser: test_html_browser.py."""
from __future__ import annotations

import copy
import json
import re

import pytest

from conftest import SCRIPTS, planted_line, run_cli
from ptxla_perf import html as H
from ptxla_perf.report import assemble as R
from ptxla_perf.report.excerpts import attach, excerpt

MARK = re.compile(r'<rect class="m ([a-z ]+)"')


def _marks(page: str) -> list[str]:
    return MARK.findall(page)


@pytest.mark.xdist_group("txla_scripts")  # the run of index_by_step.py is shared with test_profile_findings.py
def test_profile_writes_page_beside_report_with_culprit_source(profiled):
    script = SCRIPTS / "index_by_step.py"
    proc, rep, report_path = profiled(script)
    line = planted_line(script)
    (rec,) = [f for f in rep["findings"] if f["kind"] == "recompilation"]
    assert rec["location"]["line"] == line
    src = rec["source"]  # stored in the report (validated by load_report), so the page works elsewhere
    assert src["first_line"] <= line < src["first_line"] + len(src["lines"])
    assert "table[step]" in src["lines"][line - src["first_line"]]
    page_path = report_path.with_suffix(".html")
    assert page_path.exists(), proc.stderr[-2000:]
    assert "html:" in proc.stderr and "report.html" in proc.stderr
    page = page_path.read_text()
    marks = _marks(page)
    assert len(marks) == len(rep["steps"])
    assert sum("cp" in m.split() for m in marks) == sum(1 for s in rep["steps"] if s["compiles"])
    # the culprit line is the highlighted line of the recompilation card
    card = page[page.index('data-kind="recompilation"'):]
    hit = re.search(r'<span class="l hit"><span class="n">(\d+)</span>([^<]*)</span>', card)
    assert hit and int(hit.group(1)) == line and "table[step]" in hit.group(2)


def test_page_is_self_contained():
    rep = _synthetic(40)
    page = H.render(rep)
    assert "Content-Security-Policy" in page and "default-src 'none'" in page
    # nothing the browser would fetch: no external src/href, no @import or url() in the style
    assert not re.search(r'\b(src|href)\s*=\s*"(?!data:|#)', page)
    assert "@import" not in page and "url(" not in page
    assert len(_marks(page)) == 40


def test_findings_worst_first_and_text_without_javascript():
    rep = _synthetic(10)
    rep["findings"] = [_finding("compile_time", "info"), _finding("recompilation", "warning"),
                       _finding("run_stopped", "error")]
    page = H.render(rep)
    order = re.findall(r'data-kind="([a-z_]+)"', page)
    assert order == ["run_stopped", "recompilation", "compile_time"]
    text = re.sub(r"<script>.*?</script>", "", page, flags=re.S)  # what a reader without JavaScript gets
    assert "step time p50" in text and "the message of recompilation" in text


def test_2000_step_report_stays_small():
    rep = _synthetic(2000)
    page = H.render(rep)
    assert len(_marks(page)) == 2000
    assert len(page.encode()) <= 2_000_000


def test_page_failure_never_fails_the_report(tmp_path, capsys, monkeypatch):
    rep = _synthetic(5)
    monkeypatch.setattr(H, "render", lambda r: 1 / 0)
    path = R.write(rep, str(tmp_path / "r.json"))
    assert json.loads((tmp_path / "r.json").read_text())["schema"] == rep["schema"]
    assert not (tmp_path / "r.html").exists()
    err = capsys.readouterr().err
    assert "could not write" in err and "r.html" in err and path.endswith("r.json")


def test_source_excerpt_bounds(tmp_path):
    f = tmp_path / "s.py"
    f.write_text("".join(f"line{i}\n" for i in range(1, 11)))
    assert excerpt(str(f), 1) == {"first_line": 1, "lines": ["line1", "line2", "line3", "line4"]}
    assert excerpt(str(f), 10)["lines"][-1] == "line10"
    assert excerpt(str(f), 11) is None and excerpt(str(tmp_path / "missing.py"), 3) is None
    findings = [{"location": {"file": str(f), "line": 5, "function": "f"}}, {"location": None}]
    attach(findings)
    assert findings[0]["source"]["first_line"] == 2 and "source" not in findings[1]


def test_view_rebuilds_page(tmp_path):
    rep = _synthetic(12)
    src = tmp_path / "r.json"
    R.write(rep, str(src), html=False)
    out = tmp_path / "sub" / "page.html"
    proc = run_cli("view", str(src), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert len(_marks(out.read_text())) == 12
    proc = run_cli("view", str(src))
    assert proc.returncode == 0 and (tmp_path / "r.html").exists()


@pytest.mark.parametrize("content,needle", [
    ('{"schema": "ptxla_perf.report/0", "steps": []}', "ptxla_perf.report/0"),
    ('{"schema": "ptxla_perf.report/1", "steps": [', "not valid JSON"),
    ("[1, 2]", "not a ptxla_perf report"),
    ('{"schema": "ptxla_perf.report/1", "steps": 5}', "does not follow schema v1"),
])
def test_view_rejects_old_schema_and_broken_files(tmp_path, content, needle):
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    proc = run_cli("view", str(bad))
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ptxla_perf: error:") and needle in lines[0], proc.stderr
    assert not list(tmp_path.glob("bad.html*"))


def test_view_missing_file(tmp_path):
    proc = run_cli("view", str(tmp_path / "nope.json"))
    assert proc.returncode == 2 and proc.stderr.strip() == f"ptxla_perf: error: no such report: {tmp_path / 'nope.json'}"


# --- synthetic reports (the real runs above give the shape; these give size and order) -----------------------
def _finding(kind: str, severity: str) -> dict:
    return {"kind": kind, "severity": severity, "message": f"the message of {kind}", "count": 3, "per_step": 1.0,
            "location": None, "evidence": {"compile_time_s": 0.5}, "steps": [1, 2, 3]}


def _synthetic(n: int) -> dict:
    from ptxla_perf.model.records import StepRecord, Transfers, Location
    steps = []
    for i in range(n):
        s = StepRecord(i, 0.5 if i == 0 else 0.01 + (i % 7) * 1e-3, site=Location("/x/train.py", 12, "<module>"),
                       compiles=1 if i in (0, n // 2) else 0, executions=1,
                       device_to_host=Transfers(1 if i % 10 == 0 else 0), attributed=i < 3,
                       phase="eval" if i % 25 == 24 else "train", optimizer_steps=1)
        steps.append(s)
    rep = R.build(backend="torch_xla", run={"kind": "api", "status": "completed", "argv": []},
                  env=R.environment({}), steps=steps)
    R.validate(rep)
    return copy.deepcopy(rep)



def test_processes_side_by_side():
    rep = _synthetic(8)
    procs = [{"rank": r, "host": "h0", "status": "completed", "steps": 8, "compiles": 2,
              "step_time_s": {"p50": 0.01 * (r + 1), "p90": 0.012 * (r + 1), "mean": 0.01, "min": 0.01,
                              "max": 0.02, "n": 5},
              "device_to_host_per_step": 0.0, "throughput": {"samples_per_s": 100.0 / (r + 1)},
              "findings_by_severity": {"error": 0, "warning": r, "info": 0}} for r in range(3)]
    rep["processes"], rep["aggregate"] = procs, {"processes": 3, "hosts": 1, "slowest_rank": 2,
                                                 "step_time_spread_s": 0.02, "throughput": {}}
    rep["findings"] = [dict(_finding("straggler", "warning"), ranks=[2])]
    page = H.render(rep)
    assert re.findall(r'<tr data-rank="(\d+)">', page) == ["0", "1", "2"]
    widths = [float(w) for w in re.findall(r'<rect class="rk" x="[\d.]+" y="[\d.]+" width="([\d.]+)"', page)]
    assert len(widths) == 3 and widths[0] < widths[1] < widths[2]  # side by side, to one scale
    assert "slowest rank 2" in page and "ranks 2" in page
    assert "Processes" not in H.render(_synthetic(8))


def test_diff_html_before_after_side_by_side(tmp_path):
    a, b = _synthetic(12), _synthetic(20)
    b["findings"] = []
    R.write(a, str(tmp_path / "a.json"), html=False)
    R.write(b, str(tmp_path / "b.json"), html=False)
    out = tmp_path / "d" / "diff.html"
    proc = run_cli("diff", str(tmp_path / "a.json"), str(tmp_path / "b.json"), "--fail-on", "steps>+0",
                   "--html", str(out))
    assert proc.returncode == 1, proc.stderr  # the rule broke: same exit code as without --html
    assert f"html: {out}" in proc.stderr
    page = out.read_text()
    assert re.findall(r'data-side="([AB])"', page) == ["A", "B"]
    assert len(_marks(page)) == 12 + 20
    assert "FAILED 1 rule check(s)" in page and 'data-row="compiles"' in page
    assert "default-src 'none'" in page


def test_diff_html_of_metrics_text_has_the_table_only(tmp_path):
    from conftest import ROOT
    texts = [ROOT / "tests" / "fixtures" / "metrics" / f"{n}.txt" for n in ("item_fixed", "item_per_step")]
    out = tmp_path / "diff.html"
    proc = run_cli("diff", str(texts[0]), str(texts[1]), "--html", str(out))
    assert proc.returncode == 0, proc.stderr
    page = out.read_text()
    assert "data-side" not in page and page.count("data-row=") > 3
    assert "aten::_local_scalar_dense" in page  # what B added, as the console says it


@pytest.mark.xdist_group("mlp_runs")  # the sweep is shared with test_runner.py (one xdist worker)
def test_sweep_page_has_a_chart_per_metric_and_links_each_job(mlp_sweep):
    proc, sweep, _ = mlp_sweep
    page_path = sweep / "sweep.html"
    assert "html: sweep/sweep.html" in proc.stdout + proc.stderr  # relative to the working directory, as runs
    page = page_path.read_text()
    jobs = re.findall(r'<tr data-job="(\d+)"><td><a href="([^"]+)"', page)
    assert [j for j, _ in jobs] == ["0", "1"]  # batch 4, then 8
    assert all((page_path.parent / href).is_file() for _, href in jobs)  # each job's own report.html
    charts = re.findall(r'data-metric="([^"]+)"(.*?)</svg>', page, flags=re.S)
    names = [n for n, _ in charts]
    assert "step time p50" in names and "compiles" in names
    assert all(body.count('<rect class="hb"') == 2 for _, body in charts)
    assert ">recipe.batch_size=8</text>" in page  # each job named by what differs between the jobs
    assert not list(sweep.glob("*/tensorboard"))  # profiler.scalars=false


def test_capture_section_stacks_each_traced_step():
    rep = _synthetic(6)
    cats = ("execution", "compile", "data", "host", "idle")
    rep["trace"] = {"source": {"path": "/x/y.xplane.pb"},
                    "step_summary": {"steps": 3, "steady_steps": 2, "detection": "annotations",
                                     "breakdown_share": {c: 0.2 for c in cats}},
                    "steps": [{"step": 3 + k, "duration_ms": 10.0,
                               "breakdown_ms": {c: 2.0 for c in cats}} for k in range(3)],
                    "gaps": {"largest": [{"duration_ms": 1.5, "step": 4, "host_activity": [
                        {"thread": "python", "path": "train_step > StepMarker"}]}]},
                    "top_ops": [{"name": "dot.9", "category": "matmul", "share": 0.4,
                                 "self_time_ms_per_device": 1.2, "occurrences": 3}]}
    page = H.render(rep)
    section = page[page.index('id="capture"'):]
    assert section.count('<g class="bar">') == 3
    assert section.count('<rect class="b ') == 3 * len(cats)
    assert "train_step &gt; StepMarker" in section and "dot.9" in section


def test_long_runs_are_binned_and_stay_small():
    from ptxla_perf.html import charts
    rep = _synthetic(9001)
    rep["steps"][4500]["wall_time_s"] = rep["steps"][4500]["step_time_s"] = 9.0  # a spike inside a bin stays visible
    page = H.render(rep)
    k = charts.bin_size(9001)
    assert k == 4 and len(_marks(page)) == 2251 and "one bar per 4 steps" in page
    assert "steps 4500-4503 (slowest) (train): step time 9000.00 ms (wall time 9000.00 ms)" in page
    assert len(page.encode()) <= 2_000_000


def test_view_open_and_sources_for_an_older_report(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("a = 1\nb = 2\nloss.item()  # the culprit\nc = 3\n")
    rep = _synthetic(4)
    rep["findings"] = [dict(_finding("device_to_host_sync", "warning"),
                            location={"file": str(script), "line": 3, "function": "<module>"})]
    src = tmp_path / "old.json"
    R.write(rep, str(src), html=False)  # no findings[].source: written before it existed
    opener = tmp_path / "opener"  # stands in for the web browser: records the URL it was asked to open
    opener.write_text(f"#!/bin/sh\nprintf %s \"$1\" > {tmp_path / 'opened.txt'}\n")
    opener.chmod(0o755)
    proc = run_cli("view", str(src), "--open", BROWSER=str(opener))
    assert proc.returncode == 0, proc.stderr
    page = (tmp_path / "old.html").read_text()
    assert re.search(r'<span class="l hit"><span class="n">3</span>loss.item\(\)', page)
    assert (tmp_path / "opened.txt").read_text() == (tmp_path / "old.html").as_uri()
    assert "source" not in json.loads(src.read_text())["findings"][0]  # view never rewrites the report


def test_report_text_is_escaped():
    rep = _synthetic(3)
    rep["findings"] = [dict(_finding("x</b><script>alert(1)</script>", "warning"),
                            message="<img src=x onerror=alert(1)>", evidence={"<k>": "<v>"})]
    page = H.render(rep)
    assert "<script>alert(1)" not in page and "<img src=x" not in page and "<k>" not in page
    assert page.count("<script>") == 1  # the page's own


def test_headline_shows_mfu_only_when_known():
    rep = _synthetic(3)
    assert 'data-k="mfu"' not in H.render(rep)
    rep["roofline"] = {"mfu": 0.4217}
    page = H.render(rep)
    # issue 31: XLA's FLOPs make it hardware FLOPs utilisation; model-FLOPs MFU beside it only where given
    assert re.search(r'data-k="mfu"><div class="k">HFU</div><div class="v">42.2%</div>', page)
    assert '<div class="k">MFU</div>' not in page
    rep["roofline"] = {"mfu": 0.4217, "hfu": 0.4217, "model_mfu": 0.3512}
    assert re.search(r'<div class="k">MFU</div><div class="v">35.1%</div>', H.render(rep))
