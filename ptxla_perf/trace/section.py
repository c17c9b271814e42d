"""The report's `trace` section as a typed value (docs/analyze.md): what `trace.analyze_trace` computes next to the
analysis, what the session, the roofline, the renderers and `analyze --report` read by attribute, and what
report.assemble serializes once (`to_json`). `from_json` reads a written report's section back (0.4.0 reports
too: keys it lacks get empty defaults), so the HTML page reads the same types as the live run.

Light on purpose (no numpy, no protobuf, unlike the trace package): the HTML page and the offline tools import it.
The parts a consumer reads are typed (source, window, step summary, gaps, collective share, findings); the long
tables (steps, devices, top ops, compiles, the largest gaps, per-host rows) stay lists of dicts: each row is only
rendered or copied key by key, and the docs define their keys (trace.analyses.TopOp types the top-op rows)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from ..model.summary import Stats
from ..model.finding import Finding


def _d(x: Any) -> dict[str, Any]:
    return x if isinstance(x, Mapping) else {}


@dataclass
class TraceSource:
    """Which capture was analysed and how: the files, the hosts, the guessed backend, where op statistics came from."""

    path: str | None = None
    run: str | None = None
    files: list[str] = field(default_factory=list)
    hosts: list[str] = field(default_factory=list)
    size_bytes: int | None = None
    backend: str | None = None  # guessed from the capture's thread and event names
    device_planes: list[str] = field(default_factory=list)
    op_source: str | None = None  # "host executor events" | "device plane events" | "xprof device tables"
    xprof_tools: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "run": self.run, "files": list(self.files), "hosts": list(self.hosts),
                "size_bytes": self.size_bytes, "backend": self.backend, "device_planes": list(self.device_planes),
                "op_source": self.op_source, "xprof_tools": list(self.xprof_tools), "errors": list(self.errors)}

    @classmethod
    def from_json(cls, d: Mapping[str, Any] | None) -> "TraceSource":
        d = _d(d)
        return cls(d.get("path"), d.get("run"), list(d.get("files") or []), list(d.get("hosts") or []),
                   d.get("size_bytes"), d.get("backend"), list(d.get("device_planes") or []), d.get("op_source"),
                   list(d.get("xprof_tools") or []), list(d.get("errors") or []))


@dataclass
class TraceWindow:
    """The analysed window (first step start to last step end, else every event), in ms from the first event;
    `profile_ms` the duration the profiler recorded (trace/ownership.py dates a capture by it)."""

    start_ms: float = 0.0
    duration_ms: float = 0.0
    events_span_ms: float = 0.0
    profile_ms: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {"start_ms": self.start_ms, "duration_ms": self.duration_ms, "events_span_ms": self.events_span_ms,
                "profile_ms": self.profile_ms}

    @classmethod
    def from_json(cls, d: Mapping[str, Any] | None) -> "TraceWindow":
        d = _d(d)
        return cls(d.get("start_ms", 0.0), d.get("duration_ms", 0.0), d.get("events_span_ms", 0.0),
                   d.get("profile_ms"))


@dataclass
class StepSummary:
    """The traced steps' summary (trace.summarize_steps): steady steps (no compile, not the first run after one),
    their step time and mean breakdown per category (trace.analyses.CATEGORIES). The trace rules read it."""

    steps: int = 0
    steady_steps: int = 0
    step_time_ms: Stats | None = None
    breakdown_ms_per_step: dict[str, float] = field(default_factory=dict)
    breakdown_share: dict[str, float] = field(default_factory=dict)
    detection: str = ""  # how steps were found (step annotations, StepMarker events, none)

    def share(self, part: str) -> float:
        return self.breakdown_share.get(part, 0.0)

    def ms(self, part: str) -> float:
        return self.breakdown_ms_per_step.get(part, 0.0)

    def to_json(self) -> dict[str, Any]:
        return {"steps": self.steps, "steady_steps": self.steady_steps,
                "step_time_ms": self.step_time_ms.to_json() if self.step_time_ms is not None else None,
                "breakdown_ms_per_step": dict(self.breakdown_ms_per_step),
                "breakdown_share": dict(self.breakdown_share), "detection": self.detection}

    @classmethod
    def from_json(cls, d: Mapping[str, Any] | None) -> "StepSummary":
        d = _d(d)
        return cls(int(d.get("steps") or 0), int(d.get("steady_steps") or 0), Stats.from_json(d.get("step_time_ms")),
                   dict(_d(d.get("breakdown_ms_per_step"))), dict(_d(d.get("breakdown_share"))),
                   str(d.get("detection") or ""))


@dataclass
class CollectiveShare:
    """Collectives' share of each device's op time: mean, min and max over the devices, and each device's row
    ({device, collective_ms, op_time_ms, share})."""

    mean: float = 0.0
    min: float = 0.0
    max: float = 0.0
    per_device: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"mean": self.mean, "min": self.min, "max": self.max, "per_device": list(self.per_device)}

    @classmethod
    def from_json(cls, d: Mapping[str, Any] | None) -> "CollectiveShare":
        d = _d(d)
        return cls(d.get("mean", 0.0), d.get("min", 0.0), d.get("max", 0.0), list(d.get("per_device") or []))


@dataclass
class Gaps:
    """Windows in which no device ran an op (>= `min_gap_ms`): how many, their total, the share of the window some
    device was busy, the largest ones (each split like the breakdown, with the host threads' activity), and
    xprof's device duty cycle where its tables were read."""

    min_gap_ms: float = 0.0
    count: int = 0
    total_ms: float = 0.0
    any_device_duty_cycle: float | None = None
    largest: list[dict[str, Any]] = field(default_factory=list)
    xprof_device_duty_cycle: float | None = None  # absent from the JSON where xprof gave none

    def to_json(self) -> dict[str, Any]:
        out = {"min_gap_ms": self.min_gap_ms, "count": self.count, "total_ms": self.total_ms,
               "any_device_duty_cycle": self.any_device_duty_cycle, "largest": list(self.largest)}
        if self.xprof_device_duty_cycle is not None:
            out["xprof_device_duty_cycle"] = self.xprof_device_duty_cycle
        return out

    @classmethod
    def from_json(cls, d: Mapping[str, Any] | None) -> "Gaps":
        d = _d(d)
        return cls(d.get("min_gap_ms", 0.0), int(d.get("count") or 0), d.get("total_ms", 0.0),
                   d.get("any_device_duty_cycle"), list(d.get("largest") or []), d.get("xprof_device_duty_cycle"))


@dataclass
class TraceSection:
    """The report's `trace` section. `session` is set where a session related the window to its steps
    (trace/relate.py); `per_host` where the capture holds several hosts (trace/hosts.py)."""

    source: TraceSource = field(default_factory=TraceSource)
    window: TraceWindow = field(default_factory=TraceWindow)
    step_summary: StepSummary = field(default_factory=StepSummary)
    steps: list[dict[str, Any]] = field(default_factory=list)  # per step: start, duration, breakdown_ms, compiles
    devices: list[dict[str, Any]] = field(default_factory=list)  # per device: busy, duty cycle, idle gaps
    gaps: Gaps = field(default_factory=Gaps)
    top_ops: list[dict[str, Any]] = field(default_factory=list)  # trace.analyses.TopOp rows
    op_categories: dict[str, float] = field(default_factory=dict)
    collective_share: CollectiveShare = field(default_factory=CollectiveShare)
    compiles: list[dict[str, Any]] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)  # scope `trace` (trace/rules.py)
    timing_s: dict[str, float] = field(default_factory=dict)
    per_host: dict[str, Any] | None = None  # {hosts: [...], aligned_steps, step_spread_ms, slowest_host?}
    session: dict[str, Any] | None = None  # trace/relate.py: numbering, phases, distortion

    def to_json(self) -> dict[str, Any]:
        out = {"source": self.source.to_json(), "window": self.window.to_json(),
               "step_summary": self.step_summary.to_json(), "steps": list(self.steps), "devices": list(self.devices),
               "gaps": self.gaps.to_json(), "top_ops": list(self.top_ops), "op_categories": dict(self.op_categories),
               "collective_share": self.collective_share.to_json(), "compiles": list(self.compiles),
               "findings": [f.to_json() for f in self.findings], "timing_s": dict(self.timing_s)}
        if self.per_host is not None:
            out["per_host"] = self.per_host
        if self.session is not None:
            out["session"] = self.session
        return out

    @classmethod
    def from_json(cls, d: Mapping[str, Any] | None) -> "TraceSection | None":
        """A written report's `trace` section; None where the report has none."""
        if not isinstance(d, Mapping):
            return None
        return cls(TraceSource.from_json(d.get("source")), TraceWindow.from_json(d.get("window")),
                   StepSummary.from_json(d.get("step_summary")), list(d.get("steps") or []),
                   list(d.get("devices") or []), Gaps.from_json(d.get("gaps")), list(d.get("top_ops") or []),
                   dict(_d(d.get("op_categories"))), CollectiveShare.from_json(d.get("collective_share")),
                   list(d.get("compiles") or []), [Finding.from_json(f) for f in d.get("findings") or []
                                                   if isinstance(f, Mapping)],
                   dict(_d(d.get("timing_s"))), d.get("per_host") if isinstance(d.get("per_host"), dict) else None,
                   d.get("session") if isinstance(d.get("session"), dict) else None)
