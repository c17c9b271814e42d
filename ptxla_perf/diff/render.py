"""A comparison as a table (plain or rich), markdown or JSON."""
from __future__ import annotations

import json

from ..fmt import value as format_value
from .compare import Comparison, Row
from .rules import Violation
from .sources import NOT_A_FALLBACK


def _ratio(r: float | None) -> str:
    return "-" if r is None else f"x{r:.3g}"


def _cells(row: Row) -> list[str]:
    status = {"new": "NEW", "vanished": "gone"}.get(row.status, row.status)
    return [row.name, format_value(row.a, row.unit), format_value(row.b, row.unit),
            format_value(row.delta, row.unit, signed=True) if row.status != "same" else "0", _ratio(row.ratio),
            status]


_HEAD = ["name", "A", "B", "delta", "ratio", "status"]
_GROUP_TITLES = {"headline": "Headline", "fallback": "Fallback ops (aten::*)", "metric": "Metrics",
                 "counter": "Counters"}


def _preamble(cmp: Comparison) -> list[str]:
    lines = [f"A: {cmp.a.describe()}", f"B: {cmp.b.describe()}"]
    if cmp.per_step:
        lines.append("Totals are per step (each divided by its side's step count).")
    new_real = [op for op in cmp.new_fallback_ops if op not in NOT_A_FALLBACK]
    if new_real:
        lines.append("!!! NEW FALLBACK OPS in B (run on the CPU, not lowered to XLA): " + ", ".join(new_real))
    new_reads = [op for op in cmp.new_fallback_ops if op in NOT_A_FALLBACK]
    if new_reads:
        lines.append("!!! NEW in B: " + ", ".join(new_reads) + " (device-to-host reads such as .item())")
    if cmp.vanished_fallback_ops:
        lines.append("Fallback ops gone in B: " + ", ".join(cmp.vanished_fallback_ops))
    if cmp.new_counters:
        lines.append("New counters in B: " + ", ".join(cmp.new_counters))
    if cmp.vanished_counters:
        lines.append("Counters gone in B: " + ", ".join(cmp.vanished_counters))
    lines.extend(f"note: {n}" for n in cmp.notes)
    if any(r.status == "noise" for r in cmp.rows):
        lines.append(f"Step-time noise band: +/-{format_value(cmp.noise_band_s, 's')} (the larger per-step spread "
                     "p90 - p50 of A and B); a step-time change within it is marked noise.")
    return lines


def _rule_lines(violations: list[Violation] | None, n_rules: int, noise: list[Violation] = ()) -> list[str]:
    if violations is None:
        return []
    waived = [f"NOISE {v.message}: not failing (--strict fails it)" for v in noise]
    if not violations:
        return [f"All {n_rules} rule(s) passed" + (", some within the noise band:" if waived else ".")] + waived
    return [f"FAILED {len(violations)} rule check(s):"] + [f"FAIL {v.message}" for v in violations] + waived


def render_table(cmp: Comparison, violations: list[Violation] | None = None, n_rules: int = 0,
                 rich: bool = False) -> str:
    """Aligned plain text (stable for logs); with rich=True a rich table rendered to text with colours."""
    if rich:
        try:
            return _render_rich(cmp, violations, n_rules)
        except ImportError:
            pass
    out = list(_preamble(cmp))
    for group in ("headline", "fallback", "metric", "counter"):
        rows = [r for r in cmp.rows if r.group == group]
        if not rows:
            continue
        cells = [_HEAD] + [_cells(r) for r in rows]
        widths = [max(len(c[i]) for c in cells) for i in range(len(_HEAD))]
        out.append("")
        out.append(f"== {_GROUP_TITLES[group]}")
        for k, c in enumerate(cells):
            line = "  ".join(c[i].ljust(widths[i]) if i == 0 or i == 5 else c[i].rjust(widths[i])
                             for i in range(len(c)))
            out.append(line.rstrip())
            if k == 0:
                out.append("  ".join("-" * w for w in widths))
    rl = _rule_lines(violations, n_rules, cmp.within_noise)
    if rl:
        out.append("")
        out.extend(rl)
    return "\n".join(out) + "\n"


def _render_rich(cmp: Comparison, violations, n_rules) -> str:
    import io
    import shutil

    from rich.console import Console
    from rich.table import Table

    console = Console(file=io.StringIO(), width=max(80, shutil.get_terminal_size((120, 40)).columns),
                      force_terminal=True, color_system="standard")
    for line in _preamble(cmp):
        console.print(line, style="bold red" if line.startswith("!!!") else None, markup=False, highlight=False)
    styles = {"new": "bold red", "vanished": "yellow", "changed": "cyan", "noise": "dim", "same": "dim", "n/a": "dim"}
    for group in ("headline", "fallback", "metric", "counter"):
        rows = [r for r in cmp.rows if r.group == group]
        if not rows:
            continue
        table = Table(title=_GROUP_TITLES[group], title_justify="left")
        for i, h in enumerate(_HEAD):
            table.add_column(h, justify="left" if i in (0, 5) else "right")
        for r in rows:
            table.add_row(*_cells(r), style=styles.get(r.status))
        console.print(table)
    for line in _rule_lines(violations, n_rules, cmp.within_noise):
        console.print(line, style="bold red" if line.startswith("FAIL") else "yellow" if line.startswith("NOISE")
                      else "green", markup=False,
                      highlight=False)
    return console.file.getvalue()


def render_markdown(cmp: Comparison, violations: list[Violation] | None = None, n_rules: int = 0) -> str:
    esc = lambda s: s.replace("|", "\\|")
    out = [f"- {esc(line)}" for line in _preamble(cmp)]
    for group in ("headline", "fallback", "metric", "counter"):
        rows = [r for r in cmp.rows if r.group == group]
        if not rows:
            continue
        out += ["", f"### {_GROUP_TITLES[group]}", "", "| " + " | ".join(_HEAD) + " |",
                "|" + "|".join([":---"] + ["---:"] * 4 + [":---"]) + "|"]
        for r in rows:
            cells = [esc(c) for c in _cells(r)]
            cells[0] = f"`{cells[0]}`"
            if r.status == "new" and r.group == "fallback":
                cells[5] = "**NEW**"
            out.append("| " + " | ".join(cells) + " |")
    rl = _rule_lines(violations, n_rules, cmp.within_noise)
    if rl:
        out += ["", rl[0]] + [f"- `{esc(v.rule)}`: {esc(v.message)}" for v in violations or []]
        out += [f"- noise, not failing: `{esc(v.rule)}`: {esc(v.message)}" for v in cmp.within_noise]
    return "\n".join(out) + "\n"


def render_json(cmp: Comparison, violations: list[Violation] | None = None, n_rules: int = 0) -> str:
    doc = cmp.to_dict()
    if violations is not None:
        doc["rules_checked"] = n_rules
        doc["violations"] = [v.to_dict() for v in violations]
    return json.dumps(doc, indent=2) + "\n"
