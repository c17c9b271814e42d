"""Console and markdown renderings of a report: one concise summary, findings first-to-fix first."""
from __future__ import annotations

import os
import re
from typing import Any

from ..analysis import memory as _memory
from ..analysis import breakdown as _breakdown
from ..analysis import roofline as _roofline
from ..model import summary_keys as K
from ..analysis.figures import basis_text
from ..rules.iteration import short_path as _rel
from ..model.fmt import ms as _ms
from ..model.fmt import num as _fixed
from ..model.fmt import slowest_rank as _slowest_rank
from ..html import html_path

_SEV = {"error": "ERROR", "warning": "WARN ", "info": "info "}


def _num(v) -> str:
    return _fixed(v, 2, keep_int=False)


def summary_lines(report: dict[str, Any], report_path: str | None = None, max_findings: int = 8) -> list[str]:
    s = report["summary"]
    run = report.get("run", {})
    what = run.get("recipe") or (_rel(run["script"]) if run.get("script") else None) or run.get("kind")
    st = s.get(K.STEP_TIME) or {}
    modes = [m for m in (report.get("environment") or {}).get("execution_modes") or [] if m != "lazy"]
    backend = ", ".join([report["backend"], *modes])  # torch_xla: how the script cut its graphs, when not lazy
    lines = [f"ptxla_perf [{backend}] {what}: {s[K.STEPS]} steps ({s[K.WARMUP_STEPS]} warm-up), "
             f"status {run.get('status')}"]
    if run.get("status") == "crashed" and not s[K.STEPS]:
        # the crash is the story: nothing per step to say
        lines[0] += f" before its first step ({run.get('stop_reason') or 'exit code ' + str(run.get('exit_code'))})"
        return lines + _written(report_path)
    lines.append(f"  step time   p50 {_ms(st.get('p50'))}  p90 {_ms(st.get('p90'))}  mean {_ms(st.get('mean'))}"
                 f"  ({basis_text(s.get(K.STEP_TIME_BASIS), st.get('n', 0))})")
    split = _breakdown.line(s.get(K.TIME_BREAKDOWN))
    if split:  # where the steady step's time goes (summary.time_breakdown)
        lines.append(f"  time/step   {split}")
    lines.append(f"  compiles    {s[K.COMPILES]} ({s[K.COMPILE_TIME]:.2f} s), {s[K.RECOMPILES]} after "
                 f"warm-up;  executions/step {_num(s[K.EXECUTIONS_PER_STEP])};  "
                 f"device->host/step {_num(s[K.D2H_PER_STEP])};  "
                 f"host->device/step {_num(s[K.H2D_PER_STEP])}")
    tp = s.get(K.THROUGHPUT) or {}
    if tp:
        parts = []
        if "samples_per_s" in tp:
            parts.append(f"{tp['samples_per_s']:.1f} samples/s ({tp['us_per_sample']:.0f} us/sample)")
        if "tokens_per_s" in tp:
            parts.append(f"{tp['tokens_per_s']:.0f} tokens/s")
        if "mb_per_s" in tp:
            parts.append(f"{tp['mb_per_s']:.2f} MB/s host->device")
        lines.append("  throughput  " + ", ".join(parts))
    lines += _processes_lines(report)
    lines += _roofline.summary_lines(report.get("roofline"))  # HFU (and MFU), TFLOP/s, predicted vs observed
    lines += _memory.summary_line(report.get("memory"))  # peak of the largest graph against the capacity
    if s.get(K.FALLBACK_OPS):
        lines.append("  CPU fallback ops  " + ", ".join(f"{k} x{v}" for k, v in s[K.FALLBACK_OPS].items()))
    findings = report.get("findings", [])
    shown = [f for f in findings if f["severity"] != "info"] + [f for f in findings if f["severity"] == "info"]
    if not findings:
        lines.append("  no findings")
    for f in shown[:max_findings]:
        where = _bracket(f)
        ranks = f" (ranks {_ranks_text(f['ranks'])})" if len(procs_of(report)) > 1 and f.get("ranks") else ""
        lines.append(f"  {_SEV[f['severity']]} {f['kind']}{where}{ranks}: {f['message']}")
    if len(shown) > max_findings:
        lines.append(f"  ... {len(shown) - max_findings} more finding(s) in the report")
    return lines + _written(report_path)


def _written(report_path: str | None) -> list[str]:
    """The `report:` line and, when the page was written beside it, the `html:` line (a crashed run's too)."""
    if not report_path:
        return []
    out = [f"  report: {_rel(report_path)}"]
    page = html_path(report_path)  # report.write puts the page beside it (docs/html.md)
    if os.path.exists(page):
        out.append(f"  html:   {_rel(page)}")
    return out


def _bracket(f: dict[str, Any]) -> str:
    """`  [file:line]` as the message writes that file (a merged report's messages were written in the ranks'
    working directory): one path for the line in the bracket and the text."""
    loc = f.get("location")
    if not loc:
        return ""
    path = _rel(loc["file"])
    said = re.search(rf"(\S*{re.escape(os.path.basename(str(loc['file'])))}):{loc['line']}\b", f.get("message") or "")
    return f"  [{said.group(1) if said else path}:{loc['line']}]"


MAX_RANK_LINES = 8  # the console names at most this many ranks of a merged report (a pod has thousands)


def _ranks_text(ranks: list[int]) -> str:
    """`0, 1` or `0, 1, 2, 3 and 252 more` (at most 4 named)."""
    head = ", ".join(map(str, ranks[:4]))
    return head + (f" and {len(ranks) - 4} more" if len(ranks) > 4 else "")


def procs_of(report: dict[str, Any]) -> list:
    return report.get("processes") or []


def _processes_lines(report: dict[str, Any]) -> list[str]:
    """A merged report (merge.py): one line per rank and the run-level throughput; steps above are rank 0's."""
    procs = report.get("processes")
    if not procs:
        return []
    agg = report.get("aggregate") or {}
    slowest = _slowest_rank(agg)
    lines = [f"  processes   {len(procs)} on {agg.get('hosts', 1)} host(s); the lines above are rank "
             f"{procs[0]['rank']}'s" + (f"; {slowest}" if slowest else "")]
    shown = procs
    if len(procs) > MAX_RANK_LINES:  # a pod: the stragglers, then the slowest ranks; the rest in the report
        first = {k: i for i, k in enumerate((agg.get("heatmap") or {}).get("slow_ranks") or [])}
        shown = sorted(procs, key=lambda p: (first.get(p["rank"], len(first)),
                                             -((p.get("step_time_s") or {}).get("p50") or 0.0)))[:MAX_RANK_LINES]
        lines.append(f"    the {len(shown)} slowest ranks of {len(procs)} (every rank: the report and its page)")
    for p in shown:
        st = p.get("step_time_s") or {}
        tp = (p.get("throughput") or {}).get("samples_per_s")
        lines.append(f"    rank {p['rank']:<3} {p.get('host') or '?'}: {p['steps']} steps, p50 {_ms(st.get('p50'))}, "
                     f"{p['compiles']} compiles, device->host/step {_num(p.get('device_to_host_per_step'))}"
                     + (f", {tp:.1f} samples/s" if tp else "") + f", {p.get('status')}")
    tp = agg.get("throughput") or {}
    parts = [f"{tp['samples_per_s']:.1f} samples/s" if "samples_per_s" in tp else None,
             f"{tp['tokens_per_s']:.0f} tokens/s" if "tokens_per_s" in tp else None]
    parts = [x for x in parts if x]
    if parts:
        lines.append("  aggregate   " + ", ".join(parts) + " (all ranks, at the slowest rank's pace)")
    return lines


def markdown(report: dict[str, Any]) -> str:
    s = report["summary"]
    st = s.get(K.STEP_TIME) or {}
    rows = [("steps (warm-up)", f"{s[K.STEPS]} ({s[K.WARMUP_STEPS]})"),
            ("step time p50 / p90", f"{_ms(st.get('p50'))} / {_ms(st.get('p90'))}"),
            ("compiles (after warm-up)", f"{s[K.COMPILES]} ({s[K.RECOMPILES]})"),
            ("executions / step", _num(s[K.EXECUTIONS_PER_STEP])),
            ("device->host / step", _num(s[K.D2H_PER_STEP])),
            ("host->device / step", _num(s[K.H2D_PER_STEP]))]
    out = ["| metric | value |", "|---|---|"] + [f"| {a} | {b} |" for a, b in rows]
    if report.get("findings"):
        out += ["", "| severity | kind | where | message |", "|---|---|---|---|"]
        for f in report["findings"]:
            loc = f.get("location")
            where = f"`{os.path.basename(loc['file'])}:{loc['line']}`" if loc else ""
            out.append(f"| {f['severity']} | {f['kind']} | {where} | {f['message'].replace('|', '/')} |")
    return "\n".join(out) + "\n"
