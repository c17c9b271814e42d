"""One source of truth (issue 17): every figure is derived once (figures.py) and every view shows the same number.
One real profiled run is read back through the JSON report, the console summary, report.html, the TensorBoard
scalars, `diff` and `merge`; the keys and thresholds the docs list are the ones the code defines."""
from __future__ import annotations

import json
import re
from pathlib import Path
from statistics import median

import pytest

from conftest import load_report, run_cli
from ptxla_perf.model import fmt, summary_keys as K, thresholds

ROOT = Path(__file__).resolve().parents[1]


pytestmark = pytest.mark.xdist_group("reads_and_fallback")  # its run is test_findings_typed.py's too


@pytest.fixture(scope="module")
def run(reads_and_fallback_run):
    """One profiled run that every view of this module reads: a host read and a CPU fallback every step."""
    return dict(reads_and_fallback_run, report=load_report(reads_and_fallback_run["path"]))


def test_reads_are_net_of_fallback_copies_everywhere_in_the_json(run):
    rep = run["report"]
    s, train = rep["summary"], [x for x in rep["steps"] if x.get("phase") != "eval"]
    assert s[K.FALLBACK_COPIES] > 0  # the fallback's copies are counted apart...
    assert s[K.D2H] == sum(x[K.STEP_HOST_READS] for x in train)  # ...and the reads are the steps' own
    assert sum(x[K.STEP_D2H_TRANSFERS]["count"] for x in train) == s[K.D2H_TRANSFERS] == s[K.D2H] + s[K.FALLBACK_COPIES]
    assert s[K.D2H_PER_STEP] == pytest.approx(1.0)  # one .item() per step: the copies are not reads
    finding = next(f for f in rep["findings"] if f["kind"] == "device_to_host_sync")
    assert finding["count"] == s[K.D2H] and finding["per_step"] == pytest.approx(s[K.D2H_PER_STEP])


def test_step_time_is_the_steady_steps(run):
    rep = run["report"]
    steady = [x["wall_time_s"] for x in rep["steps"] if x[K.STEP_STEADY]]
    st = rep["summary"][K.STEP_TIME]
    assert st["n"] == len(steady) == rep["summary"][K.STEADY_STEPS] > 0
    assert st["p50"] == pytest.approx(median(steady))


def test_console_shows_the_summary_numbers(run):
    s, err = run["report"]["summary"], run["proc"].stderr
    assert f"p50 {fmt.ms(s[K.STEP_TIME]['p50'])}" in err
    assert re.search(rf"compiles\s+{s[K.COMPILES]} \(", err)
    assert f"device->host/step {fmt.num(s[K.D2H_PER_STEP], 2, keep_int=False)}" in err
    assert f"executions/step {fmt.num(s[K.EXECUTIONS_PER_STEP], 2, keep_int=False)}" in err


def test_html_shows_the_summary_numbers(run):
    s = run["report"]["summary"]
    page = run["path"].with_suffix(".html").read_text()

    def kpi(key: str) -> str:
        m = re.search(rf'data-k="{key}">.*?<div class="v">([^<]*)</div>', page)
        assert m, key
        return m.group(1)
    assert kpi("p50") == fmt.ms(s[K.STEP_TIME]["p50"], 2)
    assert kpi("reads") == fmt.num(s[K.D2H_PER_STEP])
    assert kpi("compiles") == fmt.num(s[K.COMPILES])


def test_tensorboard_scalars_are_the_report_steps(run):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.util import tensor_util
    acc = EventAccumulator(str(run["logdir"]))
    acc.Reload()
    rep = run["report"]
    import numpy as np

    def scalars(tag: str) -> list:
        return [(e.step, float(np.asarray(tensor_util.make_ndarray(e.tensor_proto)))) for e in acc.Tensors(tag)]
    by_step = dict(scalars("ptxla_perf/step_time_ms"))
    steady = [x["index"] for x in rep["steps"] if x[K.STEP_STEADY]]
    assert median(by_step[i] for i in steady) == pytest.approx(rep["summary"][K.STEP_TIME]["p50"] * 1e3, rel=1e-4)
    reads = [v for _, v in scalars("ptxla_perf/device_to_host")]
    assert sum(reads) == rep["summary"][K.D2H]  # host reads, not the fallback's copies
    assert sum(v for _, v in scalars("ptxla_perf/compiles")) == rep["summary"][K.COMPILES]


def test_diff_and_merge_read_the_same_numbers(run):
    s = run["report"]["summary"]
    res = run_cli("diff", str(run["path"]), str(run["path"]), "--format", "json")
    assert res.returncode == 0, res.stderr
    rows = {r["name"]: r for r in json.loads(res.stdout)["rows"]}
    assert rows["step_time_p50"]["a"] == pytest.approx(s[K.STEP_TIME]["p50"], rel=1e-6)
    assert rows["device_to_host_per_step"]["a"] == pytest.approx(s[K.D2H_PER_STEP])
    assert rows["compiles"]["a"] == s[K.COMPILES]
    from ptxla_perf.pods import merge
    proc = merge.merge([run["report"]], [str(run["path"])])["processes"][0]
    assert proc["device_to_host_per_step"] == s[K.D2H_PER_STEP] and proc["step_time_s"] == s[K.STEP_TIME]
    assert proc["host_time_s"] == s[K.HOST_TIME]


def test_the_docs_list_every_summary_key_and_threshold():
    doc = (ROOT / "docs" / "report.md").read_text()
    missing = [k for k in K.FIELDS if f"| `{k}` |" not in doc]
    assert not missing, f"docs/report.md's summary table lacks {missing}"
    assert thresholds.markdown_table() in doc  # regenerate it from thresholds.markdown_table() when it changes


def test_every_summary_key_the_code_writes_is_named_once():
    from ptxla_perf.report.assemble import build, environment
    from ptxla_perf.model.records import Location, StepRecord
    steps = [StepRecord(i, 0.01, site=Location("/x/t.py", 3, "<module>"), executions=1, optimizer_steps=1,
                        compiles=int(i == 0)) for i in range(4)]
    rep = build(backend="torch_xla", run={"kind": "api", "status": "completed"}, env=environment({}), steps=steps)
    sections = {K.MFU, K.ACHIEVED_TFLOPS, K.FLOPS_PER_STEP, K.ROOFLINE_VERDICT,  # from the roofline and memory
                K.PEAK_BYTES, K.TEMP_BYTES, K.ARGUMENT_BYTES, K.DEVICE_MEMORY, K.MEMORY_HEADROOM, K.LIVE_BYTES_PER_STEP}
    assert set(rep["summary"]) - sections <= set(K.FIELDS)
    assert set(K.FIELDS) - set(rep["summary"]) <= sections


def test_every_view_shows_the_same_time_breakdown(run):
    """Where the step's time goes (issue 18): derived once (figures.py), the same numbers in the JSON's steps and
    summary, the console line, the page's stacked bars, the TensorBoard tags, `diff` and `merge`."""
    from ptxla_perf.analysis import breakdown
    rep = run["report"]
    split = rep["summary"][K.TIME_BREAKDOWN]
    steady = [x for x in rep["steps"] if x[K.STEP_STEADY]]
    assert split["steps"] == len(steady) > 0
    for part in breakdown.COMPONENTS:  # the summary is the mean of the steady steps' parts
        mean = sum(x[K.STEP_BREAKDOWN][part] for x in steady) / len(steady)
        assert split["components_s"][part] == pytest.approx(mean, rel=1e-4, abs=1e-6)
    assert f"time/step   {breakdown.line(split)}" in run["proc"].stderr
    page = run["path"].with_suffix(".html").read_text()
    top = split["largest"]
    assert 'class="plot split"' in page and f"{top.replace('_', ' ')} {fmt.pct(split['share'][top])}" in page
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.util import tensor_util
    import numpy as np
    acc = EventAccumulator(str(run["logdir"]))
    acc.Reload()
    for part in breakdown.COMPONENTS:
        tag = f"ptxla_perf/time_{part}_ms"
        got = {e.step: float(np.asarray(tensor_util.make_ndarray(e.tensor_proto))) for e in acc.Tensors(tag)}
        assert got and all(got[x["index"]] == pytest.approx(x[K.STEP_BREAKDOWN][part] * 1e3, rel=1e-4, abs=1e-6)
                           for x in rep["steps"] if x["index"] in got)
    res = run_cli("diff", str(run["path"]), str(run["path"]), "--format", "json")
    rows = {r["name"]: r for r in json.loads(res.stdout)["rows"]}
    for part in breakdown.COMPONENTS:
        assert rows[f"time_{part}_s"]["a"] == pytest.approx(split["components_s"][part], rel=1e-6, abs=1e-9)
    from ptxla_perf.pods import merge
    proc = merge.merge([rep], [str(run["path"])])["processes"][0]
    assert proc["time_breakdown"] == split
