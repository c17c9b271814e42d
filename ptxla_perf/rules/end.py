"""Run-end rules (scope `run_end`): what only the end of a run tells - `run_stopped` (ptxla_perf stopped it),
`oom` (it died out of device memory: what XLA said, joined with what the run measured before it died) and
`memory_headroom` (the largest graph's peak close to a known capacity, from the report's `memory` section).

`run_end(...)` is the one entry point: the session's report calls it once its memory section is known."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from ..model import fmt
from ..analysis import memory as M
from ..xla import oom
from ..frames import function_at, is_user_file
from ..model.records import Location, StepRecord
from ..model.thresholds import value as threshold
from ..model.finding import RUN_END, Evidence, Finding, NoEvidence, Rule, run as run_rules

ADVICE = {"memory_headroom": "Reduce the batch size or the activations (rematerialisation), or shard the state."}


@dataclass
class End:
    """What a run-end rule reads: how the run ended, its steps (boundary records), its memory section."""

    status: str | None
    stop_reason: str | None
    steps: list[StepRecord] = field(default_factory=list)
    memory: dict[str, Any] | None = None
    advice: Mapping[str, str] = field(default_factory=dict)


class RunStopped(Rule):
    kind, scope = "run_stopped", RUN_END

    def run(self, end: End) -> list[Finding]:
        if end.status != "stopped" or not end.stop_reason:
            return []
        return [Finding("run_stopped", "error", end.stop_reason, 1, end.steps[-1].site if end.steps else None,
                        NoEvidence())]


class Oom(Rule):
    """The run died out of device memory: what XLA's message says (oom.py), at the user's line of the largest
    allocation where its metadata names one, else at the last step boundary; with what the run measured before it
    died (the memory section: the largest graph's peak, live growth)."""

    kind, scope = "oom", RUN_END

    def run(self, end: End) -> list[Finding]:
        if end.status != "crashed" or not oom.is_oom(end.stop_reason):
            return []
        r = oom.parse(end.stop_reason)
        last = end.steps[-1] if end.steps else None
        loc = next((Location(a.source_file, a.source_line, function_at(a.source_file, a.source_line))
                    for a in r.largest if a.source_file and a.source_line and is_user_file(a.source_file)), None)
        # boundaries so far from the last one's index: a long run holds only its latest (fold.py)
        ev = OomEvidence(r, last.index if last else None)
        f = Finding("oom", "error", oom.message(r, last.index + 1 if last else 0), 1,
                    loc or (last.site if last else None), ev)
        if end.memory:
            _join(f, ev, end.memory)
        return [f]


@dataclass
class OomEvidence(Evidence):
    """oom's evidence: what XLA's message says (oom.OomReport, its keys at the top), the last step boundary before
    it, and what the run measured before it died (`memory`, where the report has a memory section)."""

    parsed: oom.OomReport
    after_boundary: int | None
    memory: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return {**self.parsed.to_json(), "after_boundary": self.after_boundary,
                **({} if self.memory is None else {"memory": self.memory})}


def _join(f: Finding, ev: OomEvidence, sec: dict[str, Any]) -> None:
    """The oom finding with what the run measured before it died: the largest graph's peak and whether live device
    memory grew step over step (and what held it)."""
    live = sec.get("live") or {}
    bufs = M.top_buffers(sec)
    ev.memory = {"largest_graph": sec.get("largest_graph"), "peak_bytes": sec.get("peak_bytes"),
                 "arrays_per_step": live.get("arrays_per_step"), "bytes_per_step": live.get("bytes_per_step"),
                 "largest_buffers": bufs}
    if bufs:
        f.message += (f" The largest step graph measured before it died ({sec.get('largest_graph')}, peak "
                      f"{fmt.nbytes(sec.get('peak_bytes'))}) holds at its peak: {M.buffers_text(bufs)}.")
    if live and M.grows(live):
        held = live.get("holder") or {}
        line = held.get("location") or {}
        f.message += (f" Before it died, live device memory grew every step (+{live['arrays_per_step']:.2f} arrays"
                      + (f", {fmt.nbytes(live['bytes_per_step'])}" if live.get("bytes_per_step") is not None else "")
                      + " per step" + (f", held by `{held['holder']}` at line {line.get('line')}" if held.get("holder")
                                      else "") + "): see memory_growth.")


class MemoryHeadroom(Rule):
    """The largest graph's peak (or the runtime's own peak in use) leaves less than `memory_headroom_share` of a
    known capacity free."""

    kind, scope = "memory_headroom", RUN_END

    def run(self, end: End) -> list[Finding]:
        sec = end.memory or {}
        if sec.get("headroom_share") is None:
            return []
        share = sec["headroom_share"]
        if share >= threshold("memory_headroom_share"):
            return []
        cap = sec["capacity"]
        need = cap["bytes"] - sec["headroom_bytes"]
        bufs = M.top_buffers(sec)
        over = share < 0
        msg = (f"The step graph {sec.get('largest_graph')} needs {M.fmt_gib(need)} GiB at its peak "
               f"({'more than' if over else 'within ' + fmt.pct(max(share, 0.0)) + ' of'} the "
               f"{M.fmt_gib(cap['bytes'])} GiB of {cap.get('name') or 'the device'}, {cap['source']}): arguments "
               f"{fmt.nbytes(sec.get('argument_bytes'))}, temporaries {fmt.nbytes(sec.get('temp_bytes'))}. "
               + (f"Its largest buffers: {M.buffers_text(bufs)}. " if bufs else "")
               + ("It does not fit. " if over else "A larger batch or a longer sequence will not fit. ")
               + (end.advice.get("memory_headroom") or ADVICE["memory_headroom"]))
        return [Finding("memory_headroom", "warning", msg, 1, _line_of(bufs),
                        HeadroomEvidence(sec.get("peak_bytes"), cap["bytes"], cap["source"], sec["headroom_bytes"],
                                         round(share, 4), sec.get("largest_graph"), bufs))]


@dataclass
class HeadroomEvidence(Evidence):
    peak_bytes: int | None
    capacity_bytes: int
    capacity_source: str
    headroom_bytes: int
    headroom_share: float  # of the capacity; below 0: it does not fit
    graph: str | None  # the largest graph
    largest_buffers: list[dict[str, Any]] = field(default_factory=list)  # its largest buffers at the peak


def _line_of(rows: list[dict[str, Any]]) -> Location | None:
    """The user's line of the largest buffer that has one (a temporary an op of the step made), else None."""
    loc = next((r["location"] for r in rows if r.get("location") and r.get("kind") != "parameter"
                and is_user_file(r["location"]["file"])), None)
    return Location(loc["file"], int(loc["line"]), loc.get("function") or "?") if loc else None


RULES: tuple[Rule, ...] = (RunStopped(), Oom(), MemoryHeadroom())


def run_end(status: str | None, stop_reason: str | None, steps: list[StepRecord] | None = None,
            memory: dict[str, Any] | None = None, advice: Mapping[str, str] | None = None) -> list[Finding]:
    """The run-end scope's findings: how the run ended (stopped, out of memory) and its memory headroom."""
    return run_rules(RULES, End(status, stop_reason, list(steps or []), memory, dict(advice or {}))).findings
