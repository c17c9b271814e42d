"""Console table / markdown for a `trace` section (trace_section.TraceSection)."""
from __future__ import annotations

from ..model import fmt
from .section import TraceSection
from .analyses import CATEGORIES as A_CATEGORIES


def _pct(x) -> str:
    return fmt.pct(x if isinstance(x, (int, float)) else None, 1)


def _rows(trace: TraceSection) -> list[tuple[str, list[str], list[list[str]]]]:
    """(title, header, rows) blocks shared by the table and markdown renderers."""
    blocks = []
    src, ss = trace.source, trace.step_summary
    st = ss.step_time_ms
    info = [["capture", str(src.path)], ["backend (guessed)", str(src.backend)],
            ["op statistics from", str(src.op_source)],
            ["steps", f"{ss.steps} ({ss.steady_steps} steady) via {ss.detection}"],
            ["step time", f"p50 {st.p50:.3f} ms, mean {st.mean:.3f} ms" if st else "-"],
            ["window", f"{trace.window.duration_ms:.1f} ms"]]
    blocks.append(("Capture", ["", ""], info))
    if ss.steps:
        per, share = ss.breakdown_ms_per_step, ss.breakdown_share
        blocks.append(("Step breakdown (per steady step)", ["category", "ms/step", "share"],
                       [[k, f"{per[k]:.3f}", _pct(share.get(k))] for k in per]))
    ph = trace.per_host
    if ph:
        sp = ph.get("step_spread_ms") or {}
        slow = ph.get("slowest_host") or {}
        blocks.append((f"Hosts side by side (aligned on {ph['aligned_steps']} step numbers; step-time spread across "
                       f"hosts p50 {sp.get('p50', 0):.3f} ms, max {sp.get('max', 0):.3f} ms; slowest most often: "
                       f"{slow.get('host', '-')})",
                       ["host", "steps", "p50 ms"] + list(A_CATEGORIES),
                       [[h["host"], str(h["steps"]), f"{(h.get('step_time_ms') or {}).get('p50', 0):.3f}"]
                        + [f"{h['breakdown_ms_per_step'].get(k, 0):.3f}" for k in A_CATEGORIES]
                        for h in ph["hosts"]]))
    devs = trace.devices
    if devs:
        blocks.append(("Executor / device activity", ["device", "busy ms", "duty cycle", "idle gaps",
                                                      "largest gap ms", "collective share"],
                       [[d["device"], f"{d['busy_ms']:.2f}", _pct(d["duty_cycle"]), str(d["idle_gaps"]),
                         f"{d['largest_gap_ms']:.3f}", _pct(d.get("collective_share"))] for d in devs[:16]]))
    g = trace.gaps
    if g.largest:
        rows = []
        for x in g.largest:
            what = "; ".join(f"{a['thread']}: {a['path']} ({a['overlap_ms']:.2f} ms)" for a in x["host_activity"][:2])
            idle = (x.get("breakdown_ms") or {}).get("idle")
            rows.append([f"{x['duration_ms']:.3f}", f"{x['start_ms']:.2f}", str(x["step"]),
                         "-" if idle is None else f"{idle:.3f}", what or "untraced"])
        blocks.append((f"Largest windows with no op running (>= {g.min_gap_ms} ms: {g.count}, "
                       f"{g.total_ms:.1f} ms; idle = nothing traced, as in the breakdown)",
                       ["ms", "at ms", "step", "idle ms", "host threads meanwhile"], rows))
    if trace.top_ops:
        blocks.append((f"Top HLO ops by self time (per device; collectives {_pct(trace.collective_share.mean)})",
                       ["op", "category", "count", "ms/device", "share"],
                       [[o["name"], o["category"], str(o["occurrences"]), f"{o['self_time_ms_per_device']:.3f}",
                         _pct(o["share"])] for o in trace.top_ops]))
    if trace.compiles:
        blocks.append((f"Compiles in the window ({len(trace.compiles)})", ["name", "thread", "ms", "step"],
                       [[c["name"], c["thread"], f"{c['duration_ms']:.1f}", str(c["step"])]
                        for c in trace.compiles[:10]]))
    if trace.findings:
        blocks.append(("Findings", ["severity", "kind", "message"],
                       [[f.severity, f.kind, f.message] for f in trace.findings]))
    return blocks


def to_markdown(trace: TraceSection) -> str:
    out = []
    for title, header, rows in _rows(trace):
        out.append(f"### {title}\n")
        if header == ["", ""]:
            out.extend(f"- **{k}**: {v}" for k, v in rows)
        else:
            out.append("| " + " | ".join(header) + " |")
            out.append("|" + "|".join("---" for _ in header) + "|")
            out.extend("| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in rows)
        out.append("")
    return "\n".join(out)


def print_table(trace: TraceSection, file=None) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(file=file, width=140)
    for title, header, rows in _rows(trace):
        t = Table(title=title, title_justify="left", show_header=header != ["", ""])
        for h in header:
            t.add_column(h, overflow="fold")
        for r in rows:
            t.add_row(*r)
        console.print(t)
