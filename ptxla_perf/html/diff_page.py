"""`diff A B --html OUT`: before and after on one self-contained page, in the order the console diff reads: the
--fail-on results, the findings that appeared, disappeared or changed severity, the rows that changed, then the
unchanged rows (folded), and, when both sides are ptxla_perf reports, the headline, step-time timeline (both on
one time scale) and findings of A and B side by side. What a fix changed is at the top, not under 38 rows."""
from __future__ import annotations

import os
from html import escape
from typing import Any

from . import charts, headline_section, page, timeline_section
from ..diff import format_value

_STATUS = {"new": "NEW", "vanished": "gone"}


def render(comparison: dict[str, Any], *, violations: list[dict[str, Any]] | None = None, n_rules: int = 0,
           reports: tuple[dict | None, dict | None] = (None, None)) -> str:
    """`comparison`: diff.Comparison.to_dict(); `violations`: Violation.to_dict() rows (None: no rules given);
    `reports`: the two report dicts when the sides are ptxla_perf reports (None for metrics text)."""
    a, b = comparison["a"], comparison["b"]
    sections = [f"<header><h1>ptxla_perf diff — {escape(_name(a['label']))} → {escape(_name(b['label']))}</h1>"
                f"<div class=\"sub\">A: {escape(a['label'])} ({escape(_kind(a))}) · B: {escape(b['label'])} "
                f"({escape(_kind(b))})</div></header>"]
    sections.append(_rules(violations, n_rules))
    notes = [("new fallback ops in B", comparison.get("new_fallback_ops")),
             ("fallback ops gone in B", comparison.get("vanished_fallback_ops")),
             ("new counters in B", comparison.get("new_counters")),
             ("counters gone in B", comparison.get("vanished_counters"))]
    items = [f"<li>{escape(label)}: <code>{escape(', '.join(v))}</code></li>" for label, v in notes if v]
    items += [f"<li>{escape(n)}</li>" for n in comparison.get("notes") or []]
    if items:
        sections.append(f"<section class=\"box\" style=\"margin-top:12px\"><ul>{''.join(items)}</ul></section>")
    sections.append(_finding_changes(comparison.get("finding_changes") or [], reports))
    sections += _comparison(comparison)
    ra, rb = reports
    if ra is not None and rb is not None:
        times = [t for r in (ra, rb) for t in charts.step_times(r.get("steps") or [])]
        sections.append("<div class=\"sides\">"
                        + "".join(f"<div class=\"side\" data-side=\"{k}\"><h2>{k}: {escape(_name(side['label']))}</h2>"
                                  f"{headline_section(r)}"
                                  f"{timeline_section(r, title=f'{k}: step time', zoom=False, yvalues=times)}</div>"
                                  for k, r, side in (("A", ra, a), ("B", rb, b)))
                        + "</div>")
        sections.append(_findings_side_by_side(ra, rb))
    style = ("<style>.sides{display:grid;grid-template-columns:1fr 1fr;gap:16px}.side .headline{grid-template-columns:"
             "repeat(auto-fill,minmax(140px,1fr))}tr.chg td{background:#fff6e0}th.grp{padding-top:12px;color:#1d1f23}"
             ".rules.ok{color:#17693f}.rules.bad{color:#c0262d}"
             "details.same>summary{cursor:pointer;margin:8px 0}</style>")
    return page(f"ptxla_perf diff: {_name(a['label'])} vs {_name(b['label'])}", [style] + sections)


def _finding_changes(changes: list[dict[str, Any]], reports: tuple) -> str:
    """The findings that appeared, disappeared or changed severity (A -> B), worst first: the page's first table."""
    if not changes:
        known = all(r is not None for r in reports)
        say = "No finding appeared, disappeared or changed severity." if known else \
            "Findings are compared when both sides are ptxla_perf reports."
        return f"<h2>Findings that changed</h2><section class=\"box\"><p class=\"empty\">{say}</p></section>"
    rows = "".join(
        f"<tr data-change=\"{escape(str(c['status']))}\" data-finding=\"{escape(str(c['kind']))}\">"
        f"<td>{escape(_change_head(c))}</td>"
        f"<td><code>{escape(str(c['kind']))}</code></td><td>{escape(c.get('where') or '-')}</td>"
        f"<td>{escape(str(c.get('message') or ''))}</td></tr>" for c in changes)
    return ("<h2>Findings that changed (A → B)</h2><section class=\"box\"><table class=\"chg\"><tr><th>change</th>"
            f"<th>kind</th><th>where</th><th>message (B's; A's for one gone)</th></tr>{rows}</table></section>")


def _change_head(c: dict[str, Any]) -> str:
    """As the console says it: "NEW warning", "GONE warning", "warning → info"."""
    if c["status"] == "appeared":
        return f"NEW {c['b']}"
    if c["status"] == "disappeared":
        return f"GONE {c['a']}"
    return f"{c['a']} → {c['b']}"


def _comparison(comparison: dict[str, Any]) -> list[str]:
    """The rows that changed, then the unchanged ones folded under a summary line (open it to see them)."""
    changed = [r for r in comparison["rows"] if r["status"] not in ("same", "n/a")]
    same = [r for r in comparison["rows"] if r["status"] in ("same", "n/a")]
    per_step = " (totals per step)" if comparison.get("per_step") else ""
    out = [f"<h2>Rows that changed{per_step}</h2><section class=\"box\">"
           + (_table(changed) if changed else "<p class=\"empty\">No row changed.</p>") + "</section>"]
    if same:
        out.append(f"<details class=\"same\"><summary>{len(same)} unchanged row(s)</summary>"
                   f"<section class=\"box\">{_table(same)}</section></details>")
    return out


def _table(rows_in: list[dict[str, Any]]) -> str:
    rows = []
    group = None
    for r in rows_in:
        if r["group"] != group:
            group = r["group"]
            rows.append(f"<tr><th colspan=\"6\" class=\"grp\">{escape(group)}</th></tr>")
        changed = r["status"] not in ("same", "n/a")
        delta = "0" if r["status"] == "same" else format_value(_f(r["delta"]), r.get("unit"), signed=True)
        ratio = "-" if r["ratio"] is None else f"x{_f(r['ratio']):.3g}"
        rows.append(f"<tr class=\"{'chg' if changed else ''}\" data-row=\"{escape(r['name'])}\">"
                    f"<td><code>{escape(r['name'])}</code></td>"
                    f"<td class=\"r\">{escape(format_value(_f(r['a']), r.get('unit')))}</td>"
                    f"<td class=\"r\">{escape(format_value(_f(r['b']), r.get('unit')))}</td>"
                    f"<td class=\"r\">{escape(delta)}</td><td class=\"r\">{escape(ratio)}</td>"
                    f"<td>{escape(_STATUS.get(r['status'], r['status']))}</td></tr>")
    return ("<table class=\"cmp\"><tr><th>name</th><th class=\"r\">A</th><th class=\"r\">B</th>"
            f"<th class=\"r\">delta</th><th class=\"r\">ratio</th><th>status</th></tr>{''.join(rows)}</table>")


def _f(v: Any) -> float | None:
    """A value of Comparison.to_dict() back to a float ("inf"/"-inf" are strings there)."""
    return None if v is None else float(v)


def _name(label: str) -> str:
    return os.path.basename(str(label)) or str(label)


def _kind(side: dict[str, Any]) -> str:
    kind = "report JSON" if side.get("kind") == "report_json" else "metrics text"
    steps = side.get("steps")
    return f"{kind}, {steps} steps" if steps is not None else f"{kind}, step count unknown"


def _rules(violations: list[dict[str, Any]] | None, n_rules: int) -> str:
    if violations is None:
        return ""
    if not violations:
        return f"<p class=\"rules ok\"><b>All {n_rules} rule(s) passed.</b></p>"
    items = "".join(f"<li>{escape(v['message'])}</li>" for v in violations)
    return f"<div class=\"rules bad\"><b>FAILED {len(violations)} rule check(s):</b><ul>{items}</ul></div>"


def _findings_side_by_side(ra: dict[str, Any], rb: dict[str, Any]) -> str:
    """One row per (kind, file:line) with its severity and count in A and in B: what a fix removed or added."""
    def index(r: dict[str, Any]) -> dict[tuple, dict]:
        out = {}
        for f in r.get("findings") or []:
            loc = f.get("location") or {}
            out.setdefault((f.get("kind"), os.path.basename(str(loc.get("file") or "")), loc.get("line")), f)
        return out
    fa, fb = index(ra), index(rb)
    keys = list(fa) + [k for k in fb if k not in fa]
    if not keys:
        return "<h2>Findings</h2><section class=\"box\"><p class=\"empty\">No findings on either side.</p></section>"

    def cell(f: dict | None) -> str:
        return "<td>-</td>" if f is None else f"<td>{escape(str(f.get('severity')))} ×{f.get('count')}</td>"
    rows = "".join(f"<tr data-finding=\"{escape(str(k[0]))}\"><td><code>{escape(str(k[0]))}</code></td>"
                   f"<td>{escape(f'{k[1]}:{k[2]}' if k[1] else '-')}</td>{cell(fa.get(k))}{cell(fb.get(k))}</tr>"
                   for k in keys)
    return ("<h2>Findings</h2><section class=\"box\"><table><tr><th>kind</th><th>where</th><th>A</th><th>B</th></tr>"
            f"{rows}</table></section>")
