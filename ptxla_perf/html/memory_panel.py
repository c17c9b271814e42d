"""The page's memory panel (report `memory`, memory.py): one stacked bar per step graph (arguments, outputs not
aliased, temporaries) on one scale with the device's capacity where it is known, and live device memory per step
(the sampled `steps[].live_bytes`, else `live_arrays`) under it, and the largest buffers at each graph's peak
with their op and line (`graphs[].largest_buffers`). SVG and tables, no script."""
from __future__ import annotations

from html import escape
from typing import Any

from ..model import fmt
from ..analysis import memory as M

PARTS = (("arguments", "#4e79a7"), ("outputs", "#f28e2b"), ("temps", "#e15759"))


def section(report: dict[str, Any]) -> str:
    sec = report.get("memory")
    if not isinstance(sec, dict):
        return ""
    rows = list(M.graph_rows(sec))
    cap = (sec.get("capacity") or {}).get("bytes")
    out = ["<h2>Memory</h2><section class=\"box\" id=\"memory\">"]
    line = " ".join(M.summary_line(sec, largest=False)).replace("  memory      ", "")  # the table below has them
    out.append(f"<p class=\"sub\">{escape(line)}</p>")
    if rows:
        out.append(_bars(rows, cap, sec.get("capacity") or {}, places(report.get("steps") or [])))
        out.append(_buffers(sec, places(report.get("steps") or [])))
    else:
        out.append(f"<p>{escape('; '.join(sec.get('notes') or ['no per-graph figures']))}</p>")
    out.append(_live(report.get("steps") or [], sec.get("live") or {}))
    out.append("</section>")
    return "".join(out)


def places(steps: list[dict[str, Any]]) -> dict[str, str]:
    """Graph id -> where it runs, as the user knows it: the step (or eval step) whose boundary ran it first
    (`steps[].graph_hashes`, `site`): "step at train.py:273". A torch_xla graph's id is a hash nobody recognises."""
    out: dict[str, str] = {}
    for s in steps:
        site = s.get("site") or {}
        if not site.get("file"):
            continue
        what = "eval step" if s.get("phase") == "eval" else "step"
        for h in s.get("graph_hashes") or []:
            out.setdefault(h, f"{what} at {site['file'].rsplit('/', 1)[-1]}:{site['line']}")
    return out


def _bars(rows: list[dict[str, Any]], cap: int | None, capacity: dict[str, Any],
          where: dict[str, str] | None = None) -> str:
    width, label_w, bar_h, gap = 720, 200, 18, 8
    scale_max = max([r["peak"] for r in rows] + [cap or 0]) or 1
    h = len(rows) * (bar_h + gap) + 24
    px = (width - label_w - 80) / scale_max  # room on the right for the peak label
    parts = [f"<svg class=\"chart\" viewBox=\"0 0 {width} {h}\" width=\"{width}\" height=\"{h}\" role=\"img\" "
             "aria-label=\"memory per step graph\">"]
    for i, r in enumerate(rows):
        y = i * (bar_h + gap) + 4
        name = str(r["id"])
        label = (where or {}).get(name, name)  # where it runs; the id (a hash) only where that is unknown
        parts.append(f"<text x=\"0\" y=\"{y + bar_h - 5}\" font-size=\"11\"><title>{escape(name)}</title>"
                     f"{escape(label[:32])}</text>")
        x = float(label_w)
        for key, colour in PARTS:
            w = r[key] * px
            if w > 0:
                parts.append(f"<rect x=\"{x:.1f}\" y=\"{y}\" width=\"{w:.1f}\" height=\"{bar_h}\" fill=\"{colour}\">"
                             f"<title>{escape(name)}: {key} {fmt.nbytes(r[key])}</title></rect>")
                x += w
        parts.append(f"<text x=\"{x + 4:.1f}\" y=\"{y + bar_h - 5}\" font-size=\"11\">"
                     f"{escape(fmt.nbytes(r['peak']))}</text>")
    if cap:
        cx = label_w + cap * px
        parts.append(f"<line x1=\"{cx:.1f}\" y1=\"0\" x2=\"{cx:.1f}\" y2=\"{h - 14}\" stroke=\"#333\" "
                     "stroke-dasharray=\"4 3\"/>"
                     f"<text x=\"{max(cx - 150, 0):.1f}\" y=\"{h - 2}\" font-size=\"11\">capacity {fmt.nbytes(cap)} "
                     f"({escape(M.capacity_words(capacity))})</text>")
    parts.append("</svg>")
    legend = "".join(f"<span><i style=\"background:{c}\"></i>{k}</span>" for k, c in PARTS)
    return f"<div class=\"legend\" style=\"margin-left:0\">{legend}</div>" + "".join(parts)


def _buffers(sec: dict[str, Any], runs_at: dict[str, str], graphs: int = 3) -> str:
    """The largest buffers at each graph's peak (graphs[].largest_buffers), the largest graph first."""
    order = sorted((g for g in sec.get("graphs") or [] if g.get("largest_buffers")),
                   key=lambda g: (g.get("id") != sec.get("largest_graph"), -(g.get("peak_bytes") or 0)))[:graphs]
    out = []
    for g in order:
        rows = []
        for r in g["largest_buffers"]:
            loc = r.get("location") or {}
            where = f"{loc['file'].rsplit('/', 1)[-1]}:{loc['line']}" if loc.get("file") else "-"
            title = f" title=\"{escape(loc['file'])}\"" if loc.get("file") else ""
            rows.append(f"<tr><td class=\"r\">{escape(fmt.nbytes(r['bytes']))}</td><td>{escape(r['kind'])}</td>"
                        f"<td>{escape(r.get('shape') or '?')}</td><td>{escape(r.get('op') or '?')}</td>"
                        f"<td>{escape(r.get('op_name') or r.get('instruction') or '')}</td>"
                        f"<td{title}>{escape(where)}</td></tr>")
        note = f"<p class=\"sub\">{escape(g['buffers_note'])}</p>" if g.get("buffers_note") else ""
        gid = str(g.get("id"))
        name = f"the {runs_at[gid]} (graph {gid[:12]})" if gid in runs_at else gid
        out.append(f"<h3 style=\"margin-top:12px\">Largest buffers at the peak: {escape(name)}</h3>"
                   "<table><tr><th class=\"r\">bytes</th><th>kind</th><th>shape</th><th>op</th><th>name</th>"
                   f"<th>line</th></tr>{''.join(rows)}</table>{note}")
    return "".join(out)


def _live(steps: list[dict[str, Any]], live: dict[str, Any]) -> str:
    """Live memory per step, at the step indices of the timeline above."""
    key = "live_bytes" if any(s.get("live_bytes") is not None for s in steps) else "live_arrays"
    pts = [(s["index"], s[key]) for s in steps if s.get(key) is not None]
    if len(pts) < 2:
        return ""
    width, h = 720, 80
    n = max(s["index"] for s in steps) or 1
    lo, hi = min(v for _, v in pts), max(v for _, v in pts)
    span = (hi - lo) or 1
    poly = " ".join(f"{i / n * (width - 10) + 5:.1f},{h - 10 - (v - lo) / span * (h - 20):.1f}" for i, v in pts)
    unit = "B" if key == "live_bytes" else None
    per = live.get("bytes_per_step") if unit else live.get("arrays_per_step")
    note = (f"live device {'memory' if unit else 'arrays'} per step: {fmt.value(lo, unit)} → {fmt.value(hi, unit)}"
            + (f", {fmt.value(per, unit, signed=True)}/step after warm-up" if per is not None else ""))
    return (f"<h3 style=\"margin-top:12px\">Live device memory</h3><p class=\"sub\">{escape(note)}</p>"
            f"<svg class=\"chart\" viewBox=\"0 0 {width} {h}\" width=\"{width}\" height=\"{h}\" role=\"img\" "
            f"aria-label=\"live device memory per step\"><polyline points=\"{poly}\" fill=\"none\" "
            "stroke=\"#4e79a7\" stroke-width=\"2\"/></svg>")
