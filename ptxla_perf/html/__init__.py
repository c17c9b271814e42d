"""One self-contained `report.html` from a report dict (docs/html.md): the headline, the step-time timeline with
per-step counts aligned under it, the findings as cards (worst first, with the user's source lines), and a
capture's breakdown when the report has one. Tables, cards and charts are rendered here as HTML and SVG, so the
page needs no network and reads without JavaScript; a content security policy forbids any request."""
from __future__ import annotations

import json
import os
from html import escape
from typing import Any

from ..model import fmt
from ..model import summary_keys as K
from ..analysis.figures import basis_text
from ..trace.section import TraceSection
from ..model.finding import Cost, Finding, worst_first
from . import assets, charts, heatmap, memory_panel

_SEV_LABEL = {"error": "ERROR", "warning": "WARN", "info": "info"}
# a finding's typed cost (findings[].cost; read from the evidence of a 0.4.0 report), shown in its cost line
_COST_FIELDS = (("ms_per_step", "ms/step", lambda v: f"{v:.2f}"),
                ("extra_graphs_per_step", "extra graphs/step", lambda v: f"{v:.2f}"),
                ("compile_s", "compile time", lambda v: fmt.seconds(v)),
                ("share_of_wall", "of wall time", lambda v: fmt.pct(v)),
                ("share_of_measured", "of measured time", lambda v: fmt.pct(v)),
                ("bytes_per_step", "bytes/step", lambda v: fmt.nbytes(v)))


def html_path(report_path: str) -> str:
    """Where the page of a report goes: beside it, same name, .html (report.rank1.json -> report.rank1.html)."""
    root, ext = os.path.splitext(report_path)
    return (root if ext.lower() == ".json" else report_path) + ".html"


def write(report: dict[str, Any], path: str) -> str:
    """Write the page atomically (a browser reloading it never sees half a page); returns its absolute path."""
    path = os.path.abspath(path)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    page = render(report)
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(page)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def render(report: dict[str, Any]) -> str:
    run = report.get("run") or {}
    title = _what(report)
    body = [_header(report, title), headline_section(report), heatmap.section(report), _processes(report), timeline_section(report),
            _findings(report), memory_panel.section(report), _trace(report), _footer(report)]
    return page(f"ptxla_perf: {title} ({run.get('status') or '-'})", body)


def page(title: str, sections: list[str]) -> str:
    """The document around the sections: inline style and script, and a policy that forbids any request."""
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta http-equiv=\"Content-Security-Policy\" content=\"{assets.CSP}\">"
            "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">"
            "<link rel=\"icon\" href=\"data:,\">"
            f"<title>{escape(title)}</title>"
            f"<style>{assets.STYLE}</style></head><body><main>"
            + "".join(sections) + f"</main><script>{assets.SCRIPT}</script></body></html>\n")


# --- sections ---------------------------------------------------------------------------------------------
def _what(report: dict[str, Any]) -> str:
    run = report.get("run") or {}
    what = run.get("recipe") or run.get("script") or run.get("kind") or "run"
    return os.path.basename(str(what)) if run.get("script") else str(what)


def _header(report: dict[str, Any], title: str) -> str:
    run = report.get("run") or {}
    env = report.get("environment") or {}
    status = str(run.get("status") or "-")
    cls = {"completed": "", "running": "mid", "interrupted": "mid"}.get(status, "bad")
    bits = [f"backend {escape(str(report.get('backend')))}"]
    if env.get("device_kind") or env.get("device"):
        bits.append(escape(str(env.get("device_kind") or env.get("device"))))
    if run.get("started_at"):
        bits.append(f"started {escape(str(run['started_at']))}")
    if run.get("script"):
        bits.append(f"<code>{escape(str(run['script']))}</code>")
    if run.get("stop_reason"):
        bits.append(f"stopped: {escape(str(run['stop_reason']))}")
    return (f"<header><h1>ptxla_perf — {escape(title)} <span class=\"status {cls}\">{escape(status)}</span></h1>"
            f"<div class=\"sub\">{' · '.join(bits)}</div></header>")


def _kpi(name: str, value: str, note: str = "", key: str = "") -> str:
    return (f"<div class=\"kpi\" data-k=\"{escape(key or name)}\"><div class=\"k\">{escape(name)}</div>"
            f"<div class=\"v\">{escape(value)}</div><div class=\"n\">{escape(note)}</div></div>")


def headline_section(report: dict[str, Any]) -> str:
    s = report.get("summary") or {}
    st = s.get(K.STEP_TIME) or {}
    tp = s.get(K.THROUGHPUT) or {}
    sev = s.get(K.FINDINGS_BY_SEVERITY) or {}
    kpis = [_kpi("step time p50", fmt.ms(st.get("p50"), 2), basis_text(s.get(K.STEP_TIME_BASIS), st.get("n", 0)), "p50"),
            _kpi("step time p90", fmt.ms(st.get("p90"), 2), f"mean {fmt.ms(st.get('mean'), 2)}", "p90")]
    if "samples_per_s" in tp:
        kpis.append(_kpi("throughput", f"{tp['samples_per_s']:.1f} samples/s",
                         f"{tp['tokens_per_s']:.0f} tokens/s" if "tokens_per_s" in tp else "", "throughput"))
    elif "tokens_per_s" in tp:
        kpis.append(_kpi("throughput", f"{tp['tokens_per_s']:.0f} tokens/s", "", "throughput"))
    elif "mb_per_s" in tp:
        kpis.append(_kpi("throughput", f"{tp['mb_per_s']:.2f} MB/s", "host→device", "throughput"))
    else:
        kpis.append(_kpi("throughput", fmt.MISSING, "no samples per step given", "throughput"))
    roof = report.get("roofline") if isinstance(report.get("roofline"), dict) else {}
    hfu = roof.get("hfu", roof.get("mfu"))  # `mfu` before issue 31: the same, hardware, figure
    basis = roof.get("mfu_time_basis")
    over = f", over the {'device' if basis == 'device' else 'wall'} time" if basis else ""
    if hfu is not None:  # over the time the section says (the device's busy time on torch_xla)
        lower = roof.get("flops_lower_bound")  # partial FLOPs: a lower bound, never shown as a measurement
        kpis.append(_kpi("HFU", ("≥ " if lower else "") + fmt.pct(hfu, 1), "hardware FLOPs utilisation: XLA's "
                         "FLOPs (rematerialised and auxiliary ops counted)" + over
                         + ("; a lower bound: the FLOPs are partial" if lower else ""), "mfu"))
    if roof.get("model_mfu") is not None:
        kpis.append(_kpi("MFU", fmt.pct(roof["model_mfu"], 1), "model FLOPs utilisation: the model FLOPs given "
                         "per step" + over, "model_mfu"))
    kpis += [_kpi("compiles", fmt.num(s.get(K.COMPILES)),
                  f"{fmt.seconds(s.get(K.COMPILE_TIME))}, {fmt.num(s.get(K.RECOMPILES))} "
                  "after warm-up", "compiles"),
             _kpi("host reads / step", fmt.num(s.get(K.D2H_PER_STEP)), "device→host, net of fallback copies", "reads"),
             _kpi("executions / step", fmt.num(s.get(K.EXECUTIONS_PER_STEP)),
                  f"host→device/step {fmt.num(s.get(K.H2D_PER_STEP))}", "executions"),
             _kpi("steps", fmt.num(s.get(K.STEPS)),
                  f"{fmt.num(s.get(K.WARMUP_STEPS))} warm-up, {fmt.num(s.get(K.EVAL_STEPS))} eval", "steps"),
             _kpi("findings", f"{sev.get('warning', 0) + sev.get('error', 0)} to fix",
                  f"{sev.get('error', 0)} error, {sev.get('warning', 0)} warning, {sev.get('info', 0)} info",
                  "findings")]
    return f"<section class=\"headline\">{''.join(kpis)}</section>"


MAX_PROCESS_ROWS = 32  # the processes table and bars of a pod: its slowest ranks only


def _processes(report: dict[str, Any]) -> str:
    """A merged multi-process report: each rank's step time side by side and a row of numbers per rank (the
    timeline below is rank 0's steps)."""
    procs = [p for p in (report.get("processes") or []) if isinstance(p, dict)]
    if not procs:
        return ""
    agg = report.get("aggregate") if isinstance(report.get("aggregate"), dict) else {}
    total = len(procs)
    if total > MAX_PROCESS_ROWS:  # a pod: the slow ranks first (the heat map's order), the rest counted
        first = {k: i for i, k in enumerate((agg.get("heatmap") or {}).get("ranks") or [])}
        procs = sorted(procs, key=lambda p: (first.get(p.get("rank"), len(first)),
                                             -((p.get("step_time_s") or {}).get("p50") or 0.0)))[:MAX_PROCESS_ROWS]
    rows = []
    for p in procs:
        st = p.get("step_time_s") or {}
        tp = (p.get("throughput") or {}).get("samples_per_s")
        sev = p.get("findings_by_severity") or {}
        rows.append(f"<tr data-rank=\"{escape(str(p.get('rank')))}\"><td>{escape(str(p.get('rank')))}</td>"
                    f"<td>{escape(str(p.get('host') or '-'))}</td><td>{escape(str(p.get('status') or '-'))}</td>"
                    f"<td class=\"r\">{fmt.num(p.get('steps'))}</td><td class=\"r\">{fmt.ms(st.get('p50'), 2)}</td>"
                    f"<td class=\"r\">{fmt.ms(st.get('p90'), 2)}</td><td class=\"r\">{fmt.num(p.get('compiles'))}</td>"
                    f"<td class=\"r\">{fmt.num(p.get('device_to_host_per_step'))}</td>"
                    f"<td class=\"r\">{'-' if tp is None else f'{tp:.1f}'}</td>"
                    f"<td class=\"r\">{sev.get('warning', 0) + sev.get('error', 0)}</td></tr>")
    note = [f"{total} processes on {agg.get('hosts', 1)} host(s); the timeline below is rank 0's steps"]
    if total > len(procs):
        note.append(f"the {len(procs)} slowest ranks shown")
    if agg.get("slowest_rank") is not None:
        note.append(fmt.slowest_rank(agg))
    tp = agg.get("throughput") or {}
    if "samples_per_s" in tp:
        note.append(f"{tp['samples_per_s']:.1f} samples/s all ranks, at the slowest rank's pace")
    return ("<h2>Processes</h2><section class=\"box\" id=\"processes\">"
            f"<p class=\"sub\">{escape('; '.join(note))}</p>{charts.rank_bars(procs)}"
            "<table><tr><th>rank</th><th>host</th><th>status</th><th class=\"r\">steps</th>"
            "<th class=\"r\">p50</th><th class=\"r\">p90</th><th class=\"r\">compiles</th>"
            "<th class=\"r\">host reads/step</th><th class=\"r\">samples/s</th><th class=\"r\">to fix</th></tr>"
            f"{''.join(rows)}</table></section>")


def _legend_item(colour: str, label: str) -> str:
    return f"<span><i style=\"background:{colour}\"></i>{escape(label)}</span>"


def timeline_section(report: dict[str, Any], title: str = "Step time", zoom: bool = True,
                     yvalues: list[float] | None = None) -> str:
    """The timeline with the count strips under it; `zoom`: the page's one zoomable chart (ids for the script)."""
    steps = report.get("steps") or []
    if not steps:
        return (f"<h2>{escape(title)}</h2><section class=\"box\"><p class=\"empty\">No steps in this report "
                "(nothing synced, or a trace-only report).</p></section>")
    captures = (report.get("profiler") or {}).get("captures") or []
    tl = charts.timeline(steps, warmup=(report.get("summary") or {}).get("warmup_steps") or 0, captures=captures,
                         yvalues=yvalues)
    ct = charts.counts(steps)
    split = charts.step_split(steps)  # where each step's time went, aligned under its bar
    if split:
        ct = {"plot": split["plot"] + ct["plot"], "labels": split["labels"] + ct["labels"]}
    ticks = "".join(f"<span style=\"left:{x:.3f}%\">{steps[k].get('index', k)}</span>"  # a trimmed report's
                    for x, k in charts.x_ticks(len(steps)))  # kept steps: labelled with their own indices
    c = charts.COLOURS
    legend = [_legend_item(c["train"], "train step"), _legend_item(c["eval"], "eval step"),
              _legend_item(c["compile"], "compiled"), _legend_item(c["attributed"], "attribution step"),
              _legend_item(c["read"], "host read"), _legend_item(c["fallback"], "CPU fallback"),
              _legend_item("#dddddd", "warm-up")]
    if any(cap.get("path") for cap in captures):
        legend.append(_legend_item("#f2e2a0", "capture window"))
    if split:
        tb = (report.get("summary") or {}).get(K.TIME_BREAKDOWN) or {}
        share = tb.get("share") or {}
        legend += ["<span>step time split:</span>"] + [
            _legend_item(colour, f"{c.replace('_', ' ')}" + (f" {fmt.pct(share[c])}" if c in share else ""))
            for c, colour in charts.SPLIT.items()]
    tools = ("<span class=\"tools\"><button id=\"tl-out\" type=\"button\">−</button><span id=\"tl-zoom\">1x</span>"
             "<button id=\"tl-in\" type=\"button\">+</button><button id=\"tl-reset\" type=\"button\">reset</button>"
             "</span>") if zoom else ""
    ids = (" id=\"tl-scroll\"", " id=\"tl-inner\"") if zoom else ("", "")
    each = "one bar each" if tl["bin"] == 1 else f"one bar per {tl['bin']} steps (the slowest; the largest counts)"
    note = (f"{len(steps)} steps, {each}; {'logarithmic' if tl['scale'] == 'log' else 'linear'} time axis; "
            "hover a bar for its numbers")
    kept = (report.get("run") or {}).get("step_retention") or {}
    if kept.get("trimmed"):  # a long run's report (retention.py): the bars are the kept steps, side by side
        note += (f". Steps trimmed: {kept.get('kept')} of {kept.get('total')} steps are kept in full (the first, "
                 f"the last and those around anomalies); step_buckets in the report sum up every step")
    return (f"<h2>{escape(title)}</h2><section class=\"box timeline\">"
            f"<div class=\"legend\">{''.join(legend)}{tools}</div>"
            f"<div class=\"chart\"><div class=\"ycol\">{tl['labels']}<div class=\"spacer\"></div>{ct['labels']}</div>"
            f"<div class=\"scroll\"{ids[0]}><div class=\"inner\"{ids[1]}>{tl['plot']}"
            f"<div class=\"xticks\">{ticks}</div>{ct['plot']}</div></div></div>"
            f"<div class=\"sub\">{escape(note)}</div></section>")


def _sorted_findings(findings: list[dict[str, Any]]) -> list[tuple[Finding, dict[str, Any]]]:
    """A written report's findings, each read as a Finding (the page's load edge) beside its JSON, worst first
    (stable: report order within a severity)."""
    read = {id(t): (t, f) for t, f in ((Finding.from_json(f), f) for f in findings)}
    return [read[id(t)] for t in worst_first([t for t, _ in read.values()])]


def _findings(report: dict[str, Any]) -> str:
    findings = _sorted_findings(report.get("findings") or [])
    if not findings:
        return "<h2>Findings</h2><section class=\"box\"><p class=\"empty\">No findings.</p></section>"
    return "<h2>Findings</h2><div class=\"cards\">" + "".join(_card(f, t.cost, k) for k, (t, f) in
                                                               enumerate(findings)) + "</div>"


def _card(f: dict[str, Any], paid: Cost, k: int) -> str:
    sev = str(f.get("severity") or "info")
    loc = f.get("location") or None
    where = ""
    if loc:
        where = (f"<span class=\"where\">{escape(os.path.basename(str(loc.get('file'))))}:{escape(str(loc.get('line')))} "
                 f"({escape(str(loc.get('function') or '?'))})</span>")
    ev = f.get("evidence") or {}
    cost = [f"<b>{fmt.num(f.get('count'))}</b> times"]
    if f.get("per_step") is not None:
        cost.append(f"<b>{fmt.num(f['per_step'])}</b> per step")
    for key, label, show in _COST_FIELDS:
        v = getattr(paid, key)
        if v is not None:
            cost.append(f"<b>{escape(show(v))}</b> {escape(label)}")
    if isinstance(ev.get("compiles"), (int, float)) and not isinstance(ev.get("compiles"), bool):
        cost.append(f"<b>{escape(fmt.num(ev['compiles']))}</b> compiles")
    if isinstance(f.get("ranks"), list) and f["ranks"]:
        cost.append("ranks " + escape(", ".join(str(r) for r in f["ranks"])))
    if f.get("steps"):
        cost.append(escape(fmt.steps(f["steps"])))
    return (f"<article class=\"card {escape(sev)}\" id=\"finding-{k}\" data-kind=\"{escape(str(f.get('kind')))}\">"
            f"<h3><span class=\"sev\">{_SEV_LABEL.get(sev, escape(sev))}</span>{escape(str(f.get('kind')))}{where}</h3>"
            f"<div class=\"cost\">{' · '.join(cost)}</div>{_source(f)}"
            f"<p class=\"msg\">{escape(str(f.get('message') or ''))}</p>{_evidence(ev)}</article>")


def _source(f: dict[str, Any]) -> str:
    src, loc = f.get("source"), f.get("location") or {}
    if not isinstance(src, dict) or not src.get("lines"):
        if loc:
            return (f"<p class=\"sub\">{escape(str(loc.get('file')))}:{escape(str(loc.get('line')))} "
                    "(source not stored in the report)</p>")
        return ""
    first = int(src.get("first_line") or 1)
    rows = []
    for i, text in enumerate(src["lines"]):
        n = first + i
        hit = " hit" if n == loc.get("line") else ""
        rows.append(f"<span class=\"l{hit}\"><span class=\"n\">{n}</span>{escape(str(text))}</span>")
    return (f"<pre class=\"src\" title=\"{escape(str(loc.get('file', '')))}\">{''.join(rows)}</pre>")


def _value(v: Any) -> str:
    if isinstance(v, list) and v and all(isinstance(x, str) for x in v):
        return "<br>".join(f"<code>{escape(x[:400])}</code>" for x in v[:12]) + (" …" if len(v) > 12 else "")
    if isinstance(v, str):
        if "\n" in v:
            return f"<pre>{escape(v[:4000])}</pre>"
        return f"<code>{escape(v[:400])}</code>"
    text = json.dumps(v, default=str)
    return f"<code>{escape(text[:400] + ('…' if len(text) > 400 else ''))}</code>"


def _evidence(ev: dict[str, Any]) -> str:
    if not ev:
        return ""
    rows = "".join(f"<tr><th>{escape(str(k))}</th><td>{_value(v)}</td></tr>" for k, v in ev.items())
    return f"<details class=\"ev\" open><summary>evidence</summary><table>{rows}</table></details>"


def _trace(report: dict[str, Any]) -> str:
    tr = TraceSection.from_json(report.get("trace"))  # a written report's section, 0.4.0's too
    if tr is None:
        return ""
    ss = tr.step_summary
    out = ["<h2>Capture</h2><section class=\"box\" id=\"capture\">"]
    out.append(f"<p class=\"sub\">{escape(str(tr.source.path or ''))} · {fmt.num(ss.steps)} steps traced, "
               f"{fmt.num(ss.steady_steps)} steady · {escape(ss.detection)}</p>")
    share = ss.breakdown_share
    if share:
        legend = "".join(_legend_item(c, f"{k} {fmt.pct(share.get(k))}") for k, c in charts.BREAKDOWN.items())
        out.append(f"<div class=\"legend\" style=\"margin-left:0\">{legend}</div>")
    out.append(charts.breakdown(tr.steps))
    gaps = tr.gaps.largest
    if gaps:
        rows = []
        for g in gaps:
            acts = "<br>".join(f"{escape(str(a.get('thread')))}: <code>{escape(str(a.get('path')))}</code>"
                               for a in (g.get("host_activity") or [])[:4])
            split = g.get("breakdown_ms") or {}
            parts = " · ".join(f"{k} {charts._plain(float(v))} ms" for k, v in split.items() if v) or "-"
            rows.append(f"<tr><td class=\"r\">{escape(str(g.get('duration_ms')))} ms</td><td class=\"r\">{escape(str(g.get('step')))}"
                        f"</td><td>{escape(parts)}</td><td>{acts or '-'}</td></tr>")
        # these windows have no op on any device; the breakdown above calls "idle" only what has no traced host
        # activity either: each window is split the same way (trace.analyses.split), so the two agree
        out.append("<h3 style=\"margin-top:12px\">Largest windows with no device op running</h3><p class=\"sub\">"
                   "split into the breakdown's categories: <em>idle</em> is only the part where nothing was traced"
                   "</p><table><tr><th class=\"r\">window</th><th class=\"r\">step</th><th>split</th>"
                   f"<th>what the host was doing</th></tr>{''.join(rows)}</table>")
    ops = tr.top_ops
    if ops:
        rows = "".join(f"<tr><td><code>{escape(str(o.get('name')))}</code></td><td>{escape(str(o.get('category')))}"
                       f"</td><td class=\"r\">{fmt.pct(o.get('share'), 1)}</td><td class=\"r\">"
                       f"{escape(str(o.get('self_time_ms_per_device')))}</td><td class=\"r\">{escape(str(o.get('occurrences')))}</td></tr>"
                       for o in ops[:15])
        out.append("<h3 style=\"margin-top:12px\">Top ops</h3><table><tr><th>op</th><th>category</th>"
                   "<th class=\"r\">share</th><th class=\"r\">self ms/device</th><th class=\"r\">count</th></tr>"
                   f"{rows}</table>")
    out.append("</section>")
    return "".join(out)


def _footer(report: dict[str, Any]) -> str:
    env = report.get("environment") or {}
    versions = env.get("versions") or {}
    vs = ", ".join(f"{k} {v}" for k, v in versions.items() if v)
    return (f"<footer>{escape(str(report.get('schema')))} · ptxla_perf {escape(str(report.get('tool_version')))}"
            f" · {escape(vs)} · python {escape(str(env.get('python') or '-'))} · "
            f"{escape(str(env.get('hostname') or ''))}</footer>")
