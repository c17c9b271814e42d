"""Trace rules (scope `trace`): verdicts of a captured window, from its step summary and per-device collective
share. A cost in every traced step, so `warning` (never `error`, which the report keeps for a run that was
stopped); how strong it is shows in the share it states. Thresholds are thresholds.py's (`trace_*`)."""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from ..model.thresholds import value as threshold
from .section import CollectiveShare, Gaps, StepSummary
from ..model.finding import TRACE_SCOPE, Cost, Evidence, Finding, Rule, run as run_rules


@dataclass
class Window:
    """What a trace rule reads: the traced window's step summary, collective share, gaps and op source."""

    step_summary: StepSummary
    collective: CollectiveShare = field(default_factory=CollectiveShare)
    gaps: Gaps = field(default_factory=Gaps)
    op_source: str | None = None

    @property
    def steps(self) -> int:
        return self.step_summary.steady_steps

    def share(self, part: str) -> float:
        return self.step_summary.share(part)

    def ms(self, part: str) -> float:
        return self.step_summary.ms(part)


@dataclass
class WindowEvidence(Evidence):
    """A window finding's evidence: `source: trace` first (kept for readers of 0.4.0 reports; origin is the field
    since 0.5.0), the rule's own figures (a subclass's fields), and `distorted_window` where trace/relate.py found
    the traced steps slowed by that ratio."""

    source: str = field(default="trace", kw_only=True)
    distorted_window: float | None = field(default=None, kw_only=True)

    def to_json(self) -> dict[str, Any]:
        own = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("source", "distorted_window")}
        return {"source": self.source, **own,
                **({} if self.distorted_window is None else {"distorted_window": self.distorted_window})}


@dataclass
class WindowInputEvidence(WindowEvidence):
    """input_bound (warning): the window's data share and time per step, its idle share."""

    data_share: float
    data_ms_per_step: float
    idle_share: float
    steps: int


@dataclass
class WindowIdleEvidence(WindowEvidence):
    """input_bound (info): the window's untraced idle share and time per step."""

    idle_share: float
    idle_ms_per_step: float
    steps: int


@dataclass
class WindowHostEvidence(WindowEvidence):
    """host_bound: the window's host and execution time per step, the host's share."""

    host_ms_per_step: float
    execution_ms_per_step: float
    host_share: float
    steps: int


@dataclass
class WindowCollectiveEvidence(WindowEvidence):
    """collective_bound: the collectives' share of op time per device (mean, max) and where the ops came from."""

    collective_share_mean: float
    collective_share_max: float
    op_source: str | None


def _finding(kind: str, severity: str, message: str, count: int, evidence: WindowEvidence, cost: Cost) -> Finding:
    return Finding(kind, severity, message, int(count), None, evidence, cost=cost)


class TraceInputBound(Rule):
    """The device waits on input: data loading / transfer with no op running (a warning), or else untraced time
    with no op running, often loading outside the step annotation (info)."""

    kind, scope = "input_bound", TRACE_SCOPE

    def run(self, w: Window) -> list[Finding]:
        n = w.steps
        if not n:
            return []
        data_s, idle_s = w.share("data"), w.share("idle")
        if data_s >= threshold("trace_input_bound_share"):
            return [_finding(
                "input_bound", "warning",
                f"the device waits on input: {data_s:.0%} of step time ({w.ms('data'):.2f} ms/step) is data "
                f"loading/transfer with no op running", n,
                WindowInputEvidence(data_s, w.ms("data"), idle_s, n),
                Cost(ms_per_step=w.ms("data"), share_of_wall=data_s))]
        if idle_s >= threshold("trace_idle_share"):
            return [_finding(
                "input_bound", "info",
                f"{idle_s:.0%} of step time ({w.ms('idle'):.2f} ms/step) is untraced with no op running, often data "
                f"loading outside the step annotation; annotate the loader (xp.Trace / TraceAnnotation) to confirm",
                n, WindowIdleEvidence(idle_s, w.ms("idle"), n),
                Cost(ms_per_step=w.ms("idle"), share_of_wall=idle_s))]
        return []


class TraceHostBound(Rule):
    """Host tracing, graph building and dispatch take a large share of the traced step, longer than execution."""

    kind, scope = "host_bound", TRACE_SCOPE

    def run(self, w: Window) -> list[Finding]:
        host_s = w.share("host")
        if not w.steps or host_s < threshold("trace_host_bound_share") or w.ms("host") <= w.ms("execution"):
            return []
        return [_finding(
            "host_bound", "warning",
            f"host-bound: host tracing/graph building/dispatch ({w.ms('host'):.2f} ms/step, {host_s:.0%}) takes "
            f"longer than execution ({w.ms('execution'):.2f} ms/step); the device idles while the host works",
            w.steps, WindowHostEvidence(w.ms("host"), w.ms("execution"), host_s, w.steps),
            Cost(ms_per_step=w.ms("host"), share_of_wall=host_s))]


class CollectiveBound(Rule):
    """Collectives take a large share of each device's op time."""

    kind, scope = "collective_bound", TRACE_SCOPE

    def run(self, w: Window) -> list[Finding]:
        cs = w.collective.mean
        if cs < threshold("trace_collective_share"):
            return []
        return [_finding(
            "collective_bound", "warning",
            f"collectives take {cs:.0%} of op time per device (max {w.collective.max:.0%}); on the CPU "
            f"this includes waiting at the rendezvous for the slowest device", len(w.collective.per_device),
            WindowCollectiveEvidence(cs, w.collective.max, w.op_source), Cost())]


RULES: tuple[Rule, ...] = (TraceInputBound(), TraceHostBound(), CollectiveBound())


def findings(step_summary: StepSummary, collective: CollectiveShare, gaps: Gaps, op_source: str | None
             ) -> list[Finding]:
    """The trace scope's findings of a window (the trace section holds them as Finding objects)."""
    return run_rules(RULES, Window(step_summary, collective, gaps, op_source)).findings


def judge(step_summary: StepSummary | dict, collective: CollectiveShare | dict, gaps: Gaps | dict,
          op_source: str | None) -> list[dict[str, Any]]:
    """The same findings as JSON, from typed parts or a written section's dicts (offline tools, tests)."""
    typed = (step_summary if isinstance(step_summary, StepSummary) else StepSummary.from_json(step_summary),
             collective if isinstance(collective, CollectiveShare) else CollectiveShare.from_json(collective),
             gaps if isinstance(gaps, Gaps) else Gaps.from_json(gaps))
    return [f.to_json() for f in findings(*typed, op_source)]
