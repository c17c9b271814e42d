"""A session's outputs: its report assembled once (report.from_analysis) from the analysis, the roofline and the
capture's trace analysis; written with its page beside it; the TensorBoard scalars; the console summary. The
session calls these at a periodic flush and at the end; nothing here runs per step."""
from __future__ import annotations

import datetime as _dt
import os
import sys
from typing import Any

from . import memory, peaks, render, report as report_mod, roofline
from .findings import Analysis, run_end


class ReportOutput:
    def __init__(self, session):
        self.session = session
        self._scalars = None

    def open_scalars(self, tensorboard_dir: str, rank: int, started_at: str | None) -> dict[str, Any]:
        from .tb_scalars import ScalarLog
        logdir = os.path.join(tensorboard_dir, f"rank{rank}") if rank else tensorboard_dir
        self._scalars = ScalarLog(logdir, started_at)
        return self._scalars.to_json()

    def path(self) -> str:
        s = self.session
        path = s.report_path
        if s.rank or s.rank_suffix:
            root, ext = os.path.splitext(path)
            path = f"{root}.rank{s.rank}{ext or '.json'}"
        return path

    def write(self, report: dict[str, Any], final: bool, scalars: bool = True) -> str | None:
        """The report and its page; the scalars of the iterations so far; at the end, the console summary."""
        s = self.session
        if scalars:
            self._write_scalars(report, final)
        if not s.report_path:
            return None
        path = report_mod.write(report, self.path())
        if final and s.console and s.print_summary:
            print("\n".join(render.summary_lines(report, path)), file=sys.stderr, flush=True)
        return path

    def _write_scalars(self, report: dict[str, Any], final: bool) -> None:
        """TensorBoard scalars of the iterations so far (never per step: at a flush and at the end)."""
        if self._scalars is None:
            return
        try:
            self._scalars.write(report["steps"], final)
        except Exception as exc:  # noqa: BLE001 - scalars are a view; the run and its report go on
            self.session.say(f"ptxla_perf: note: no TensorBoard scalars in {self._scalars.logdir}: {exc}")
            self._scalars = None

    def build(self, status: str, exit_code: int | None, stop_reason: str | None) -> dict[str, Any]:
        """The report of the boundaries so far, assembled once (report.from_analysis) from the analysis, the
        roofline, the capture's trace analysis and the run's facts."""
        s = self.session
        adapter = s.adapter
        settle = getattr(adapter, "settle", None)
        if settle is not None:  # measurements an adapter completes in batches (torch_xla's device times)
            settle(final=status != "running")
        env = report_mod.environment(adapter.environment())
        run = dict(s.run_info, run_id=s.run_id, rank=s.rank, pid=os.getpid(), started_at=s.started_at or "",
                   ended_at=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                   status=status, exit_code=exit_code, stop_reason=stop_reason)
        run.setdefault("step_detection", adapter.step_detection)
        run["attribution"] = dict(adapter.cfg, steps=[r.index for r in s.steps if r.attributed][:50],
                                  notes=list(adapter.notes)[:10])
        if s.tail is not None:
            run["after_last_step"] = {"device_to_host": s.tail.device_to_host.count,
                                      "compiles": s.tail.compiles, "executions": s.tail.executions,
                                      "note": "work after the last step boundary (e.g. a final .item()) is not a "
                                              "step: never a per-step cost, its compiles only explained (info)"}
        extra_findings = list(s.extra_findings)
        analysis = s.analysis(status)
        found = roofline.sinks(extra_findings + analysis.findings + list((s.trace or {}).get("findings", [])))
        sec = self._roofline(analysis, env, found, measure_cpu=status != "running")
        mem = self._memory(analysis, env, final=status != "running")
        extra_findings = run_end(status, stop_reason, s.steps, mem.to_json() if mem else None, dict(adapter.advice)) + extra_findings
        return report_mod.from_analysis(analysis, backend=s.backend, run=run, env=env,
                                        extra_findings=extra_findings, profiler=s.profiler,
                                        extra=s.extra or None, trace=s.trace, roofline=sec, memory=mem)

    def _memory(self, analysis: Analysis, env: dict[str, Any], final: bool) -> memory.MemorySection:
        """The memory section (memory.py): the adapter's per-graph figures (torch_xla compiles its graphs' HLO for
        them only when the run ends: `final`), the device's capacity, live memory per step. Never fails the
        report."""
        s = self.session
        adapter = s.adapter
        try:
            runtime = adapter.device_memory() if hasattr(adapter, "device_memory") else None
            info = adapter.graph_memory(final) if hasattr(adapter, "graph_memory") else {
                "graphs": [], "notes": ["this backend gives no memory analysis"]}
            live = memory.live_figures(analysis.train, analysis.warmup, analysis.iterations)
            return memory.section(info, runtime, [env.get("device_model"), env.get("device_kind")],
                                  s.roofline_cfg.get("device_memory_gb"), live)
        except Exception as exc:  # a diagnostic of the diagnostics: said, never fatal
            return memory.section({"graphs": [], "notes": [f"memory analysis failed: {exc}"]}, None, [], None, None)

    def _roofline(self, analysis: Analysis, env: dict[str, Any], found: list[roofline.Sink], measure_cpu: bool
                  ) -> roofline.RooflineSection:
        """The roofline section (roofline.py). A report flushed mid-run never calibrates the CPU peak (it uses
        the cached one, if any). Never fails the report."""
        s = self.session
        try:
            peak = peaks.select([env.get("device_model"), env.get("device_kind")], s.roofline_cfg,
                                calibrate_cpu=measure_cpu, cpu_devices=int(env.get("local_devices") or 1))
            p50 = analysis.figures.step_time
            sec = roofline.section(analysis.steady, s.adapter.graph_costs(), peak, p50.p50 if p50 else None, found,
                                   breakdown=analysis.figures.steady_breakdown())
            ops = (s.trace or {}).get("top_ops")
            if ops and sec.source != "unavailable":  # a capture's top ops, with their instructions' costs
                sec.top_ops = roofline.top_ops(ops, s.adapter.hlo_modules(), peak)
                if not sec.top_ops:
                    sec.notes.append("no per-op costs: the capture's ops are not in a module whose optimized "
                                        "HLO is known (torch_xla gives only the HLO it builds, before fusion)")
        except Exception as exc:  # a diagnostic of the diagnostics: said, never fatal
            sec = roofline.section([], {"source": "unavailable", "notes": [f"roofline failed: {exc}"]},
                                   peaks.Peak(None, None, "unknown", "unknown", "roofline failed"))
        return sec

