"""A session's outputs, as functions of data: the run's facts (`RunFacts`), the output settings (`OutputConfig`),
the report (`report_of`: the analysis, the facts and the sections, no session), and `ReportOutput`, which writes
the report with its page beside it, the TensorBoard scalars and the console summary. The session calls these at a
periodic flush and at the end; nothing here runs per step."""
from __future__ import annotations

import datetime as _dt
import os
import sys
import types
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from ..analysis import memory, roofline
from ..analysis.iterset import Iterations
from .. import peaks
from . import render, assemble as report_mod, retention
from ..backends.base import Adapter, Capabilities
from ..model import summary_keys as K
from ..model.faults import FAULTS, Fault, check, errors_json, guarded
from ..rules.iteration import Analysis, Finding, run_end
from ..model.outcome import Outcome
from ..model.records import StepRecord
from ..model.summary import StepRow
from ..model.finding import RUN, Evidence, severity_counts
from .tb_scalars import ScalarLog
from ..trace.section import TraceSection


@dataclass(frozen=True)
class RunFacts:
    """What the report says of the run itself, fixed once the session starts (the rank is settled at the first
    boundary, where the runtime can say it: the session then replaces its facts)."""

    backend: str
    run_id: str
    rank: int
    started_at: str
    info: Mapping[str, Any]  # kind, argv, script/recipe, run_id_source... as the entry point gave them

    def __post_init__(self):
        object.__setattr__(self, "info", types.MappingProxyType(dict(self.info)))

    @property
    def argv(self) -> list[str]:
        return list(self.info.get("argv") or [])

    @property
    def kind(self) -> str | None:
        return self.info.get("kind")

    @property
    def script(self) -> str | None:
        return self.info.get("script")

    def run_section(self, end: Outcome) -> dict[str, Any]:
        """The report's `run` section, before the adapter's part (step detection, attribution)."""
        return dict(self.info, run_id=self.run_id, rank=self.rank, pid=os.getpid(), started_at=self.started_at or "",
                    ended_at=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                    status=end.status, exit_code=end.exit_code, stop_reason=end.reason)


@dataclass(frozen=True)
class OutputConfig:
    """Where and how a session's outputs go: fixed when the session is made."""

    report_path: str | None = "ptxla_perf_report.json"
    rank_suffix: bool = False  # a spawned child writes REPORT.rankN.json even as rank 0
    console: bool = True  # asked for; only rank 0 prints
    summary: bool = True  # the console summary at the end
    tensorboard_dir: str | None = None  # per-step scalars (tb_scalars.py); None: not written
    steps_file: str | None = None  # every step's record as a JSON line (steps_file.py); None: not written

    def path(self, rank: int, path: str | None = None) -> str | None:
        """The report's path for this rank: REPORT.rankN.json for any rank but an unsuffixed 0 (`path`: another
        file of the rank's, e.g. the steps file, named the same way)."""
        path = self.report_path if path is None else path
        if path and (rank or self.rank_suffix):
            root, ext = os.path.splitext(path)
            path = f"{root}.rank{rank}{ext or '.json'}"
        return path

    def prints(self, rank: int) -> bool:
        return self.console and rank == 0


@dataclass
class Sections:
    """The report's derived sections, computed next to the analysis (roofline.py, memory.py)."""

    roofline: roofline.RooflineSection | None
    memory: memory.MemorySection | None


def sections_of(analysis: Analysis, adapter: Adapter, caps: Capabilities, env: Mapping[str, Any], trace: TraceSection | None,
                sinks: list[roofline.Sink], roofline_cfg: Mapping[str, Any], final: bool,
                device: DeviceMemory | None = None) -> Sections:
    """The roofline and memory sections. A report flushed mid-run (`final` False) never calibrates the CPU peak and
    compiles no HLO for memory figures. `device`: the runtime's figures and the capacity, derived once before the
    analysis (`device_memory`), else here."""
    return Sections(_roofline(analysis, adapter, env, trace, sinks, roofline_cfg, final),
                    _memory(analysis, caps, env, roofline_cfg, final, device))


def report_of(analysis: Analysis, facts: RunFacts, sections: Sections, *, end: Outcome, adapter: Adapter,
              env: dict[str, Any], steps: Sequence[StepRecord], tail: StepRecord | None = None,
              extra_findings: Sequence[Finding] = (), profiler: dict[str, Any] | None = None,
              extra: dict[str, Any] | None = None, trace: TraceSection | None = None,
              faults: Sequence[Fault] = (), rows: list[StepRow] | None = None,
              retention: retention.Retention | None = None, steps_file: str | None = None) -> dict[str, Any]:
    """The report of the boundaries `steps` (analysed as `analysis`, its StepRows `rows`), assembled once
    (report.from_analysis); `faults`: our own failures during the run (faults.py), as `profiler_errors` and a
    `profiler_error` finding; `retention`: a long run's steps[] trimmed (retention.py)."""
    run = facts.run_section(end)
    run.setdefault("step_detection", adapter.step_detection)
    run["attribution"] = dict(adapter.cfg, steps=[r.index for r in steps if r.attributed][:50],
                              notes=list(adapter.notes)[:10])
    if tail is not None:
        run["after_last_step"] = {"device_to_host": tail.device_to_host.count,
                                  "compiles": tail.compiles, "executions": tail.executions,
                                  "note": "work after the last step boundary (e.g. a final .item()) is not a "
                                          "step: never a per-step cost, its compiles only explained (info)"}
    mem = sections.memory.to_json() if sections.memory else None
    found = run_end(end.status, end.reason, list(steps), mem, dict(adapter.advice)) + list(extra_findings)
    if faults:
        found.append(profiler_error(faults))
    rep = report_mod.from_analysis(analysis, backend=facts.backend, run=run, env=env, extra_findings=found,
                                    rows=rows, retention=retention, steps_file=steps_file, profiler=profiler,
                                    extra=extra or None, trace=trace,
                                    roofline=sections.roofline, memory=sections.memory)
    if faults:
        rep["profiler_errors"] = errors_json(list(faults))
    return rep


def profiler_error(faults: Sequence[Fault]) -> Finding:
    """One `profiler_error` finding (info): where our own code failed, and that the program was not affected."""
    points = ", ".join(f"{f.where} ({f.error}{f' x{f.count}' if f.count > 1 else ''})" for f in faults[:6])
    more = f" and {len(faults) - 6} more" if len(faults) > 6 else ""
    msg = (f"ptxla_perf's own code failed in {points}{more}. Your program ran as it does without us; what those "
           "parts measure may be missing from this report (profiler_errors holds each traceback). Please report it "
           "with the output of `python -m ptxla_perf doctor`.")
    return Finding("profiler_error", "info", msg, sum(f.count for f in faults), None,
                   FaultEvidence([f.where for f in faults]), origin=RUN)


@dataclass
class FaultEvidence(Evidence):
    """profiler_error's evidence: the points where ptxla_perf's own code failed (faults.py)."""

    points: list[str]


def with_faults(report: dict[str, Any], faults: Sequence[Fault]) -> None:
    """A report given the failures that came after it was assembled (writing its views)."""
    report["profiler_errors"] = errors_json(list(faults))
    report["findings"] = [f for f in report.get("findings", []) if f.get("kind") != "profiler_error"] + [
        profiler_error(faults).to_json()]
    report["summary"][K.FINDINGS_BY_SEVERITY] = severity_counts(Finding.from_json(f) for f in report["findings"])


def minimal_report(facts: RunFacts, end: Outcome, faults: Sequence[Fault]) -> dict[str, Any]:
    """The report when assembling the real one failed: the run's facts and our failures, nothing measured."""
    rep = report_mod.assemble(backend=facts.backend, run=facts.run_section(end), env=report_mod.environment({}),
                              steps=[], summary={},
                              findings=[profiler_error(faults)] if faults else [])
    rep["profiler_errors"] = errors_json(list(faults))
    return rep


class ReportOutput:
    """Writes a report: the JSON and its page, the scalars of the iterations so far, the console summary."""

    def __init__(self, config: OutputConfig, say: Callable[[str], None]):
        self.config = config
        self.say = say
        self._scalars: ScalarLog | None = None

    def open_scalars(self, rank: int, started_at: str | None) -> dict[str, Any] | None:
        if not self.config.tensorboard_dir:
            return None
        tb = self.config.tensorboard_dir
        self._scalars = ScalarLog(os.path.join(tb, f"rank{rank}") if rank else tb, started_at)
        return self._scalars.to_json()

    def write(self, report: dict[str, Any], rank: int, final: bool, scalars: bool = True,
              faults: Callable[[], list[Fault]] | None = None, rows: list[StepRow] | None = None) -> str | None:
        """The report and its page; the scalars of the iterations so far (`rows`: every iteration's StepRow, where
        the report's steps[] may be trimmed; else its steps[]); at the end, the console summary.
        `faults`: our failures so far; one in writing a view (scalars, page, summary) is added to the JSON."""
        if scalars:
            self._write_scalars(report["steps"] if rows is None else rows, final)
        path = self.config.path(rank)
        if not path:
            return None
        path = report_mod.write(report, path)
        lines = None
        if final and self.config.prints(rank) and self.config.summary:
            lines = guarded("summary", render.summary_lines, report, path)
            trimmed = retention.retention_line(report)
            if lines and trimmed:
                lines = [*lines, trimmed]
        if faults is not None and len(faults()) > len(report.get("profiler_errors") or []):
            with_faults(report, faults())
            report_mod.write(report, path, html=False)
        if lines:
            print("\n".join(lines), file=sys.stderr, flush=True)
        return path

    def _write_scalars(self, steps: Sequence[Any], final: bool) -> None:
        """TensorBoard scalars of the iterations so far (never per step: at a flush and at the end)."""
        if self._scalars is None:
            return
        try:
            check("tensorboard")
            self._scalars.write(steps, final)
        except Exception as exc:  # noqa: BLE001 - scalars are a view; the run and its report go on
            FAULTS.record("tensorboard", exc)
            self.say(f"ptxla_perf: note: no TensorBoard scalars in {self._scalars.logdir}: {exc}")
            self._scalars = None


@dataclass(frozen=True)
class DeviceMemory:
    """The runtime's memory figures (the adapter's `device_memory()`: JAX memory_stats, torch_xla
    get_memory_info; None on the CPU) and the device's capacity derived from them once (memory.capacity: the user's
    --device-memory-gb / roofline.device_memory_gb, else the runtime's, else the spec table), read by the analysis
    (`memory_growth`'s rating) and the memory section alike."""

    runtime: dict[str, Any] | None
    capacity: dict[str, Any]


def device_memory(caps: Capabilities, env: Mapping[str, Any], roofline_cfg: Mapping[str, Any]) -> DeviceMemory:
    """The device's memory figures and capacity, once per report. Never fails: unknown on an error."""
    devices = [env.get("device_model"), env.get("device_kind")]
    runtime = None
    try:
        runtime = caps.device_memory() if caps.device_memory else None
    except Exception as exc:  # a diagnostic of the diagnostics: said, never fatal
        FAULTS.record("section.memory", exc)
    return DeviceMemory(runtime, memory.capacity(runtime, devices, roofline_cfg.get("device_memory_gb")))


def _memory(analysis: Analysis, caps: Capabilities, env: Mapping[str, Any], roofline_cfg: Mapping[str, Any],
            final: bool, device: DeviceMemory | None = None) -> memory.MemorySection:
    """The memory section (memory.py): the adapter's per-graph figures (torch_xla compiles its graphs' HLO for
    them only when the run ends: `final`), the device's capacity, live memory per step. Never fails the report."""
    try:
        check("section.memory")
        device = device or device_memory(caps, env, roofline_cfg)
        info = caps.graphs(final)
        live = memory.live_figures(analysis.train, analysis.warmup, analysis.iterations)
        return memory.section(info, device.runtime, [env.get("device_model"), env.get("device_kind")],
                              roofline_cfg.get("device_memory_gb"), live, cap=device.capacity)
    except Exception as exc:  # a diagnostic of the diagnostics: said, never fatal
        FAULTS.record("section.memory", exc)
        return memory.section({"graphs": [], "notes": [f"memory analysis failed: {exc}"]}, None, [], None, None)


def _roofline(analysis: Analysis, adapter: Adapter, env: Mapping[str, Any], trace: TraceSection | None,
              sinks: list[roofline.Sink], roofline_cfg: Mapping[str, Any], measure_cpu: bool
              ) -> roofline.RooflineSection:
    """The roofline section (roofline.py). A report flushed mid-run never calibrates the CPU peak (it uses the
    cached one, if any). Never fails the report."""
    try:
        check("section.roofline")
        peak = peaks.select([env.get("device_model"), env.get("device_kind")], dict(roofline_cfg),
                            calibrate_cpu=measure_cpu, cpu_devices=int(env.get("local_devices") or 1))
        p50 = analysis.figures.step_time
        sec = roofline.section(analysis.figures.steady_its, adapter.graph_costs(), peak, p50.p50 if p50 else None,
                               sinks, breakdown=analysis.figures.steady_breakdown())
        ops = trace.top_ops if trace is not None else None
        if ops and sec.source != "unavailable":  # a capture's top ops, with their instructions' costs
            sec.top_ops = roofline.top_ops(ops, adapter.hlo_modules(), peak)
            if not sec.top_ops:
                sec.notes.append("no per-op costs: the capture's ops are not in a module whose optimized "
                                    "HLO is known (torch_xla gives only the HLO it builds, before fusion)")
    except Exception as exc:  # a diagnostic of the diagnostics: said, never fatal
        FAULTS.record("section.roofline", exc)
        sec = roofline.section(Iterations([]), {"source": "unavailable", "notes": [f"roofline failed: {exc}"]},
                               peaks.Peak(None, None, "unknown", "unknown", "roofline failed"))
    return sec

