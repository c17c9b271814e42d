"""A session's own capture window, related to the session's steps: trace steps numbered as the report numbers them,
phases kept apart, and a window whose traced steps ran much slower than the untraced ones marked as distorted.

StepTrace numbers its steps per annotation name ("train_step" 3, "eval" 5 ...); the report numbers iterations.
The window knows the session boundary it started after, and each step annotation ends at one boundary, so the
k-th traced step is the window's k-th boundary, whose iteration the analysis knows. When the counts disagree
(an annotation that does not sync, or syncs outside annotations), nothing is renumbered and the section says so.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..model.finding import WrittenEvidence
from ..model.records import StepRecord
from .section import TraceSection
from . import summarize_steps
from .rules import WindowEvidence, findings as judge_window

DISTORTED = 1.5  # traced steps this many times slower than untraced ones: the window is not the run as it runs


def boundary_owners(iterations: list[StepRecord]) -> list[int]:
    """For each session boundary (in order), the index of the iteration that holds it."""
    out: list[int] = []
    for it in iterations:
        out += [it.index] * max(1, len(it.boundaries))
    return out


def relate(trace: TraceSection, iterations: list[StepRecord], first_boundary: int | None,
           untraced_p50_s: float | None) -> TraceSection:
    """Renumber, split by phase and judge distortion, in place; returns the trace section."""
    rows = trace.steps
    owners = boundary_owners(iterations)
    phases = {it.index: it.phase or "train" for it in iterations}
    info: dict[str, Any] = {"first_boundary": first_boundary}
    if first_boundary is not None and rows and first_boundary + len(rows) <= len(owners):
        for k, row in enumerate(rows):
            row["trace_step"] = row.get("step")
            row["step"] = owners[first_boundary + k]
            row["phase"] = phases[row["step"]]
        info["numbered_as"] = "session"
    else:
        info["numbered_as"] = "annotation"
        info["note"] = ("the traced steps could not be matched to the session's steps; step numbers are the "
                        "annotations' own")
    in_window = sorted({r.get("phase") for r in rows if r.get("phase")})
    if len(in_window) > 1:  # a breakdown over train and eval steps together describes neither
        keep = "train" if "train" in in_window else in_window[0]
        info["phases"] = {p: sum(r.get("phase") == p for r in rows) for p in in_window}
        info["summary_phase"] = keep
        trace.step_summary = summarize_steps([r for r in rows if r.get("phase") == keep],
                                             trace.step_summary.detection)
        trace.findings = judge_window(trace.step_summary, trace.collective_share, trace.gaps, trace.source.op_source)
    st = trace.step_summary.step_time_ms
    traced = st.p50 if st is not None else None
    if traced and untraced_p50_s:
        ratio = traced / (untraced_p50_s * 1e3)
        info["traced_p50_ms"], info["untraced_p50_ms"] = traced, round(untraced_p50_s * 1e3, 4)
        info["slowdown"] = round(ratio, 2)
        if ratio >= DISTORTED:
            info["distorted"] = True
            for f in trace.findings:
                f.message += (f" (the traced steps ran {ratio:.1f}x slower than the untraced steps of this run: "
                              "tracing overhead distorts this window, so read the shares with care)")
                f.evidence = (replace(f.evidence, distorted_window=round(ratio, 2))
                              if isinstance(f.evidence, WindowEvidence) else  # a written window's, read back
                              WrittenEvidence({**f.evidence_json(), "distorted_window": round(ratio, 2)}))
    trace.session = info
    return trace
