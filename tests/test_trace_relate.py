"""A session's capture window related to its steps (trace/relate.py): numbering, phases, distortion."""
from __future__ import annotations

from ptxla_perf.model.records import StepRecord
from ptxla_perf.trace import summarize_steps
from ptxla_perf.trace.relate import boundary_owners, relate
from ptxla_perf.trace.section import CollectiveShare, StepSummary, TraceSection, TraceSource
from ptxla_perf.model.finding import Finding, WrittenEvidence


def _row(step, ms, host=0.5):
    return {"step": step, "start_ms": 0.0, "duration_ms": ms, "annotation_ms": ms, "compiles": 0,
            "breakdown_ms": {"execution": ms * (1 - host), "compile": 0.0, "data": 0.0, "host": ms * host,
                             "idle": 0.0}}


def _trace(rows):
    return TraceSection(source=TraceSource(op_source="host executor events"), steps=rows,
                        step_summary=summarize_steps(rows, "step annotations"), collective_share=CollectiveShare())


def _its(phases, boundaries_per_it=1):
    return [StepRecord(index=i, wall_time_s=0.01, phase=p,
                       boundaries=[{"index": i * boundaries_per_it + k} for k in range(boundaries_per_it)]
                       if boundaries_per_it > 1 else []) for i, p in enumerate(phases)]


def test_owners_follow_grouped_boundaries():
    assert boundary_owners(_its(["train", "train"], 2)) == [0, 0, 1, 1]


def test_trace_steps_get_the_reports_numbers_and_phases_are_kept_apart():
    # StepTrace numbered these 3, 0, 1 (per annotation name); the session calls them 8, 9, 10
    trace = _trace([_row(3, 40.0, host=0.9), _row(0, 900.0, host=0.1), _row(1, 5.0, host=0.1)])
    its = _its(["train"] * 8 + ["train", "eval", "eval"])
    sec = relate(trace, its, 8, 0.038)
    assert sec is trace and isinstance(sec.step_summary, StepSummary)
    assert all(isinstance(f, Finding) and f.origin == "trace" for f in sec.findings)  # the train step's, judged again
    trace = sec.to_json()
    assert TraceSection.from_json(trace) == sec
    assert [r["step"] for r in trace["steps"]] == [8, 9, 10]
    assert [r["trace_step"] for r in trace["steps"]] == [3, 0, 1]
    assert trace["session"]["phases"] == {"eval": 2, "train": 1}
    assert trace["step_summary"]["steps"] == 1  # the breakdown is the train step's alone
    assert [f["kind"] for f in trace["findings"]] == ["host_bound"]
    assert "distorted" not in trace["session"]


def test_a_window_much_slower_than_the_run_says_so():
    sec = _trace([_row(0, 100.0, host=0.9), _row(1, 100.0, host=0.9)])
    sec.findings = [Finding("host_bound", "warning", "host-bound", 2, evidence=WrittenEvidence({}))]  # read back
    relate(sec, _its(["train"] * 6), 2, 0.025)  # untraced steps: 25 ms
    assert sec.session["distorted"] and sec.findings[0].evidence_json()["distorted_window"] == 4.0
    trace = sec.to_json()
    assert trace["session"]["distorted"] and trace["session"]["slowdown"] == 4.0
    assert "4.0x slower" in trace["findings"][0]["message"]
    assert trace["findings"][0]["evidence"]["distorted_window"] == 4.0


def test_unmatched_windows_keep_the_annotations_numbers():
    trace = relate(_trace([_row(5, 10.0), _row(6, 10.0)]), _its(["train"] * 3), 2, None).to_json()
    # the window claims steps 2..3, the run has 3 boundaries
    assert trace["session"]["numbered_as"] == "annotation"
    assert [r["step"] for r in trace["steps"]] == [5, 6]
