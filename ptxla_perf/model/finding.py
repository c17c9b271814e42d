"""The shape of a finding and of a rule, for every scope: what a finding says (kind, severity, message, line), where
it came from (`origin`) and what it costs (`Cost`) as typed fields, so views read a cost by name instead of
guessing evidence keys; one severity order and one count of severities for every view; one way to run a list of
rules (`run`), whatever they read.

A rule declares its `scope`, which says what it reads: `iteration` (the analysis context of one process's steps,
findings.Context), `trace` (a capture's step summary, trace/rules.py), `ranks` (the per-process reports of one
run, rules/ranks.py) or `run_end` (how the run ended and its memory section, rules/end.py). registry.py lists them
all. Modelled on torch.profiler's pattern matcher: each verdict a small class, run from one list."""
from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Iterable, Mapping, Sequence

from .faults import FAULTS, check
from .records import Location

# where a finding came from
RUNTIME, TRACE, RANKS, RUN = "runtime", "trace", "ranks", "run"
ORIGINS = (RUNTIME, TRACE, RANKS, RUN)
# what a rule reads (its scope) -> the origin of its findings
ITERATION, TRACE_SCOPE, RANKS_SCOPE, RUN_END = "iteration", "trace", "ranks", "run_end"
ORIGIN_OF_SCOPE = {ITERATION: RUNTIME, TRACE_SCOPE: TRACE, RANKS_SCOPE: RANKS, RUN_END: RUN}

SEVERITIES = ("error", "warning", "info")  # worst first: the one order every view sorts and counts by


def severity_rank(severity: str | None) -> int:
    """0 for the worst severity; an unknown one after every known one."""
    return SEVERITIES.index(severity) if severity in SEVERITIES else len(SEVERITIES)


def severity_counts(findings: Iterable["Finding"]) -> dict[str, int]:
    """{severity: count} over findings (a written report's are read with `Finding.from_json` first)."""
    sev = [f.severity for f in findings]
    return {k: sev.count(k) for k in SEVERITIES}


def worst_first(findings: Sequence["Finding"]) -> list["Finding"]:
    """Findings worst severity first; stable, so a report's own order stays within one."""
    return sorted(findings, key=lambda f: severity_rank(f.severity))


@dataclass(frozen=True)
class Cost:
    """What a finding costs, in the units it was measured in; None where it was not measured. The HTML card and
    the roofline read these by name (docs/report.md: `findings[].cost`)."""

    ms_per_step: float | None = None  # time it takes (waiting, working, launching) per step it is measured over
    share_of_wall: float | None = None  # that time's share of the step's wall time (compiles: of the run's)
    share_of_measured: float | None = None  # host_bound / launch_bound: share of the step's measured time (its
    #                                         wall time less `other` and ptxla_perf's own time)
    per_step: float | None = None  # occurrences per step (the finding's `per_step`)
    compile_s: float | None = None  # seconds spent compiling
    extra_graphs_per_step: float | None = None  # graphs launched early per step (the step split)
    bytes_per_step: float | None = None  # device memory added per step

    def to_json(self) -> dict[str, float]:
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}

    @classmethod
    def from_json(cls, d: dict[str, Any] | None) -> "Cost":
        d = d or {}
        return cls(**{f.name: d[f.name] for f in fields(cls) if isinstance(d.get(f.name), (int, float))})


class Evidence:
    """What every finding's evidence is: a dataclass of its kind's figures, written as the report's
    `findings[].evidence` by `to_json` (its fields, in order, unless the class says which it writes). The one shape a
    finding carries; a written report's evidence read back is a `WrittenEvidence`."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)  # type: ignore[call-overload]  # every subclass is a dataclass


@dataclass(frozen=True)
class NoEvidence(Evidence):
    """The evidence of a finding whose message says all there is (run_stopped): `{}` in the report."""


@dataclass(frozen=True)
class WrittenEvidence(Evidence):
    """A written finding's evidence read back (merge, view, a trace section merged into a report): the keys as
    that report's version wrote them, kept as they are, so a report re-assembled from its findings writes them
    unchanged (`Finding.from_json` makes one)."""

    written: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return dict(self.written)


@dataclass
class Finding:
    kind: str
    severity: str  # info | warning | error
    message: str
    count: int
    location: Location | None = None
    evidence: Evidence = field(default_factory=NoEvidence)  # the kind's evidence class (its JSON: `to_json`); a
    #                                                         written report's, read back, is a WrittenEvidence
    per_step: float | None = None
    steps: list[int] = field(default_factory=list)
    origin: str = RUNTIME  # runtime | trace | ranks | run
    cost: Cost = field(default_factory=Cost)
    ranks: list[int] | None = None  # ranks scope: the ranks it is about
    # the finding's source lines where a written report had them (sources.attach writes them once, at assembly):
    # a report re-assembled from its findings (merge, analyze --report) keeps its own
    source: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if isinstance(self.evidence, Mapping):  # a recipe's own finding as 0.6.0 took it: kept as written
            self.evidence = WrittenEvidence(dict(self.evidence))
        elif not isinstance(self.evidence, Evidence):
            raise TypeError(f"{self.kind}: evidence must be an Evidence, not {type(self.evidence).__name__}")
        if self.cost.per_step is None and self.per_step is not None:
            self.cost = Cost(**{**self.cost.to_json(), "per_step": self.per_step})

    def __eq__(self, other: object) -> bool:
        """Field by field, the evidence as written: a finding read back from its report (a WrittenEvidence)
        equals the live one it was written from."""
        if not isinstance(other, Finding):
            return NotImplemented
        return all(getattr(self, f.name) == getattr(other, f.name) for f in fields(self) if f.name != "evidence") \
            and self.evidence_json() == other.evidence_json()

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Finding":
        """A written finding (a report's, any version's) as a Finding: the load edges' one reader. A 0.4.0 one (no
        origin, no cost) gets them as `origin_of`/`cost_of` read them; its evidence, a WrittenEvidence, writes the
        keys it was read with."""
        loc, ev = d.get("location"), d.get("evidence")
        return cls(str(d.get("kind") or ""), str(d.get("severity") or "info"), str(d.get("message") or ""),
                   int(d.get("count") or 0),
                   Location(loc.get("file"), loc.get("line"), loc.get("function")) if isinstance(loc, Mapping) and loc
                   else None,
                   WrittenEvidence(dict(ev) if isinstance(ev, Mapping) else {}), d.get("per_step"),
                   list(d.get("steps") or []),
                   origin_of(dict(d)), cost_of(dict(d)), list(d["ranks"]) if d.get("ranks") is not None else None,
                   d.get("source"))

    def evidence_json(self) -> dict[str, Any]:
        return self.evidence.to_json()

    def to_json(self) -> dict[str, Any]:
        d = {"kind": self.kind, "severity": self.severity, "message": self.message, "count": self.count,
             "location": asdict(self.location) if isinstance(self.location, Location) else self.location,
             "evidence": self.evidence_json(), "per_step": self.per_step, "steps": first_runs(self.steps),
             "origin": self.origin, "cost": self.cost.to_json()}
        if self.source is not None:  # before `ranks`: a merged finding's order (merge.merge_findings)
            d["source"] = self.source
        if self.ranks is not None:
            d["ranks"] = list(self.ranks)
        return d


def origin_of(f: dict[str, Any]) -> str:
    """A written finding's origin (Finding.from_json reads it); a 0.4.0 report has none: its trace findings say `evidence.source == "trace"`,
    its cross-rank ones are `straggler` / `rank_divergence`, its run-end ones `run_stopped` / `oom` / headroom."""
    if f.get("origin") in ORIGINS:
        return f["origin"]
    if (f.get("evidence") or {}).get("source") == "trace":
        return TRACE
    kind = f.get("kind")
    return RANKS if kind in ("straggler", "rank_divergence") else (
        RUN if kind in ("run_stopped", "oom", "memory_headroom") else RUNTIME)


def cost_of(f: dict[str, Any]) -> Cost:
    """A written finding's cost (Finding.from_json reads it; `run` for a rule that sets none); for a 0.4.0 report (no `cost`), read from the evidence keys it used then."""
    if isinstance(f.get("cost"), dict):
        return Cost.from_json(f["cost"])
    ev = f.get("evidence") or {}
    num = lambda k: ev[k] if isinstance(ev.get(k), (int, float)) and not isinstance(ev.get(k), bool) else None  # noqa: E731
    measured = num("share") if "share_of_wall" in ev else None  # host/launch_bound: `share` was of measured time
    return Cost(ms_per_step=num("wait_ms_per_step") or num("ms_per_step"),
                share_of_wall=num("share_of_wall") or num("share_of_wall_time") or (None if measured else num("share")),
                share_of_measured=measured, per_step=f.get("per_step"), compile_s=num("compile_time_s"),
                extra_graphs_per_step=num("extra_executions_per_step"), bytes_per_step=num("bytes_per_step"))


# --- rules -----------------------------------------------------------------------------------------------------
class Rule:
    """One finding kind, judged from what its scope reads: `unmet(ctx)` says why it cannot be judged (it is then
    listed as not judged, never silently absent), `run(ctx)` returns its findings."""

    kind: str = ""
    scope: str = ITERATION
    # "attribution": judged only from events of attribution steps (lines, calls, shapes); without one it is
    # reported as not judged
    needs: tuple[str, ...] = ()

    def unmet(self, ctx: Any) -> str | None:
        if "attribution" in self.needs and not getattr(ctx, "attribution", True):
            return "attribution was off: this rule reads only what attribution sees (calls, lines, shapes)"
        return None

    def run(self, ctx: Any) -> list[Finding]:
        raise NotImplementedError


@dataclass
class Verdicts:
    """What running a list of rules gave: the findings worst first, the kinds judged and those not judged."""

    findings: list[Finding] = field(default_factory=list)
    judged: list[str] = field(default_factory=list)
    not_judged: list[dict[str, str]] = field(default_factory=list)  # {"kind", "reason"}


def run(rules: Sequence[Rule], ctx: Any) -> Verdicts:
    """Run rules on their context, every scope the same way: unmet ones listed as not judged, findings stamped
    with the origin of their scope, worst first (most frequent first within a severity)."""
    out = Verdicts()
    for rule in rules:
        try:  # a rule of ours that fails is a profiler error (faults.py), never the report's end
            check(f"rule.{rule.kind}")
            reason = rule.unmet(ctx)
            found = [] if reason else list(rule.run(ctx))
        except Exception as exc:
            FAULTS.record(f"rule.{rule.kind}", exc)
            reason = "ptxla_perf failed judging it (see profiler_errors)"
        if reason:
            out.not_judged.append({"kind": rule.kind, "reason": reason})
            continue
        if rule.kind not in out.judged:
            out.judged.append(rule.kind)
        for f in found:
            f.origin = ORIGIN_OF_SCOPE.get(rule.scope, RUNTIME)
            if not set(f.cost.to_json()) - {"per_step"}:  # a rule that sets no cost (a backend's): its evidence's
                f.cost = cost_of({"evidence": f.evidence_json(), "per_step": f.per_step})
            out.findings.append(f)
    out.findings.sort(key=lambda f: (severity_rank(f.severity), -f.count))
    return out


def short_path(path: str) -> str:
    """Relative to the working directory when under it: messages stay readable, JSON keeps absolute paths."""
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return path if rel.startswith("..") else rel


def where(loc: Location | None) -> str:
    return f" at {short_path(loc.file)}:{loc.line} ({loc.function})" if loc else ""


def first_runs(steps, runs: int = 20) -> list[int]:
    """A finding's steps as the report keeps them: every step of its first `runs` runs of consecutive steps, so
    an every-step read of 30 steps keeps 0-29 (the card's header and its text name the same steps; a cap of 20
    steps made it "steps 0-19" beside "(steps 0-29)"), and a long run of scattered steps stays short."""
    out: list[int] = []
    n = 0
    for i in steps:
        if not out or i != out[-1] + 1:
            n += 1
            if n > runs:
                break
        out.append(i)
    return out
