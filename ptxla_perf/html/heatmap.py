"""The merged page's ranks x steps heat map (the merged report's `aggregate.heatmap`, pods/heatmap.py): one row
per rank - hosts grouped, the slow ranks on top - one column per step (or per few steps), colour from the fastest
to the slowest cell. A second map shows the straggler's slow part. Plain SVG: no script, no request."""
from __future__ import annotations

from html import escape
from typing import Any

from ..model import fmt

# light to dark: a cell's value from the map's lowest to its highest
_RAMP = ((247, 251, 255), (253, 208, 162), (241, 105, 19), (127, 39, 4))


def _colour(t: float) -> str:
    t = min(max(t, 0.0), 1.0) * (len(_RAMP) - 1)
    i = min(int(t), len(_RAMP) - 2)
    f = t - i
    a, b = _RAMP[i], _RAMP[i + 1]
    return "#%02x%02x%02x" % tuple(round(a[j] + (b[j] - a[j]) * f) for j in range(3))


def _map(hm: dict[str, Any], values: list[list[float | None]], what: str, cls: str) -> str:
    ranks, hosts = hm["ranks"], hm["hosts"]
    cols = int(hm["columns"])
    left, cell_h, top = 150.0, 12.0 if len(ranks) <= 48 else 6.0, 4.0
    cell_w = max(4.0, min(24.0, 600.0 / max(cols, 1)))
    flat = sorted(v for row in values for v in row if v is not None)
    # light from the 10th percentile (a short last step would wash every other cell dark), dark at the maximum
    lo, hi = (flat[len(flat) // 10], flat[-1]) if flat else (0.0, 1.0)
    span = (hi - lo) or 1.0
    width, height = max(left + cell_w * cols + 10, 620.0), top + cell_h * len(ranks) + 22
    out = [f'<svg class="heatmap {cls}" data-rows="{len(ranks)}" data-cols="{cols}" viewBox="0 0 {width:.0f} '
           f'{height:.0f}" width="{width:.0f}" height="{height:.0f}" role="img" aria-label="{escape(what)}">']
    prev_host = object()
    for i, (rank, host, row) in enumerate(zip(ranks, hosts, values)):
        y = top + i * cell_h
        if host != prev_host and i:
            out.append(f'<line class="axis" x1="0" x2="{width:.0f}" y1="{y:.1f}" y2="{y:.1f}"/>')
        if cell_h >= 10 or host != prev_host:
            label = f"{host or '?'} · rank {rank}" if host != prev_host else f"rank {rank}"
            out.append(f'<text x="{left - 6:.0f}" y="{y + cell_h - 2:.1f}" text-anchor="end">{escape(label)}</text>')
        prev_host = host
        for c, v in enumerate(row):
            if v is None:
                continue
            out.append(f'<rect class="hm" x="{left + c * cell_w:.1f}" y="{y:.1f}" width="{cell_w:.1f}" '
                       f'height="{cell_h:.1f}" fill="{_colour((v - lo) / span)}"><title>rank {rank}, column {c}: '
                       f'{v:.2f} ms</title></rect>')
    out.append(f'<text x="{left:.0f}" y="{height - 6:.0f}">steady steps → ({hm["steps_per_column"]} per column); '
               f'{escape(fmt.ms(lo / 1e3, 2))} or less light … {escape(fmt.ms(hi / 1e3, 2))} dark</text></svg>')
    return "".join(out)


def section(report: dict[str, Any]) -> str:
    """The heat map(s) of a merged report, or "" (a single process's report has none)."""
    hm = (report.get("aggregate") or {}).get("heatmap") if isinstance(report.get("aggregate"), dict) else None
    if not isinstance(hm, dict) or not hm.get("ranks"):
        return ""
    note = ("ranks x steady steps; hosts grouped, the slow ranks first"
            + (f"; {hm['ranks_left_out']} faster ranks not shown" if hm.get("ranks_left_out") else ""))
    body = [f'<p class="sub">{escape(note)}</p><h3>Step time</h3>', _map(hm, hm["step_ms"], "step time per rank "
                                                                        "and step", "step")]
    if hm.get("part") and hm.get("part_ms"):
        slow = ", ".join(str(k) for k in (hm.get("slow_ranks") or [])[:4])
        body += [f"<h3>{escape(hm['part'])} time (the straggler's slow part{', rank ' + slow if slow else ''})</h3>",
                 _map(hm, hm["part_ms"], f"{hm['part']} time per rank and step", "part")]
    return f'<h2>Ranks × steps</h2><section class="box" id="heatmap">{"".join(body)}</section>'
