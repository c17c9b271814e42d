"""A comparison as a table (plain or rich), markdown or JSON."""
from __future__ import annotations

import json
import math

from ..model.fmt import value as format_value
from .compare import Comparison, Row
from .rules import Violation
from .sources import NOT_A_FALLBACK


def _ratio(r: float | None) -> str:
    return "-" if r is None else f"x{r:.3g}"


_SCALES = {"s": [(1.0, "s"), (1e-3, "ms"), (1e-6, "us")],
           "B": [(1024.0 ** 4, "TiB"), (1024.0 ** 3, "GiB"), (1024.0 ** 2, "MiB"), (1024.0, "KiB"), (1.0, "B")]}


def row_texts(row: Row) -> tuple[str, str, str]:
    """A, B and delta of one row in one unit and one precision (the delta from the unrounded values): never
    "4 B -> 0 B, delta -3 B". Four significant digits of the larger side, trailing zeros all three share cut."""
    vals = [row.a, row.b, row.delta if row.status != "same" else None]
    finite = [abs(v) for v in vals if v is not None and math.isfinite(v)]
    if not finite:
        return format_value(row.a, row.unit), format_value(row.b, row.unit), (
            "0" if row.status == "same" else format_value(row.delta, row.unit, signed=True))
    top = max(finite)
    scale, label = 1.0, ""
    for factor, name in _SCALES.get(row.unit or "", []):
        scale, label = factor, name
        if top >= factor or top == 0 and name == row.unit:
            break
    scaled = [v / scale if v is not None and math.isfinite(v) else v for v in vals]
    whole = all(v is None or not math.isfinite(v) or float(v).is_integer() for v in scaled)
    big = top / scale
    digits = 0 if whole else max(0, 3 - math.floor(math.log10(big))) if big > 0 else 0

    def text(v, d, signed=False):
        if v is None:
            return "-"
        if not math.isfinite(v):
            return format_value(v, None)
        if v == 0:  # an exact zero has no precision to show
            return "0"
        t = f"{v:+.{d}f}" if signed and v != 0 else f"{v:.{d}f}"
        return "0" if float(t) == 0 and signed else t
    while digits > 0 and all(v is None or not math.isfinite(v) or text(v, digits).endswith("0")
                             for v in scaled):
        digits -= 1
    unit = f" {label}" if label else ""
    a, b = (text(v, digits) + (unit if v is not None and math.isfinite(v) else "") for v in scaled[:2])
    if row.status == "same":
        return a, b, "0"
    d = scaled[2]
    return a, b, text(d, digits, signed=True) + (unit if d is not None and math.isfinite(d) and d != 0 else "")


def _cells(row: Row) -> list[str]:
    status = {"new": "NEW", "vanished": "gone"}.get(row.status, row.status)
    a, b, delta = row_texts(row)
    return [row.name, a, b, delta, _ratio(row.ratio), status]


def _shown(cmp: Comparison, group: str, show_all: bool) -> list[Row]:
    """A group's rows: all of them with `--all`, else only those whose value differs (new, gone, changed, noise)."""
    return [r for r in cmp.rows if r.group == group and (show_all or r.status not in ("same", "n/a"))]


def _hidden_line(cmp: Comparison, show_all: bool) -> list[str]:
    n = 0 if show_all else sum(1 for r in cmp.rows if r.status in ("same", "n/a"))
    return [f"({n} unchanged row(s) not shown; --all shows every row)"] if n else []


_HEAD = ["name", "A", "B", "delta", "ratio", "status"]
_GROUP_TITLES = {"headline": "Headline", "fallback": "Fallback ops (aten::*)", "metric": "Metrics",
                 "counter": "Counters"}


def _finding_lines(cmp: Comparison) -> list[str]:
    """What a reader wants first: findings that appeared, disappeared or changed severity between A and B."""
    if cmp.a.findings is None or cmp.b.findings is None:
        return []
    if not cmp.finding_changes:
        return ["Findings: the same kinds and severities in A and B."]
    return ["Findings that changed (A -> B):"] + [f"  {c.line()}" for c in cmp.finding_changes]


def _graphs_note(cmp: Comparison) -> list[str]:
    """`distinct_graphs` and `compiles` count different things; say so where they differ."""
    g, c = cmp.row("distinct_graphs"), cmp.row("compiles")
    if g is None or c is None or cmp.per_step:
        return []
    if all(x is None or y is None or x == y for x, y in ((g.a, c.a), (g.b, c.b))):
        return []
    return ["note: distinct_graphs counts the different graphs the steps ran, compiles the XLA compilations of the "
            "whole run: a graph compiled before the first step (or taken from the cache) runs without a compile "
            "of its own, and a compile outside the steps (before or after the loop) has no step graph."]


def _preamble(cmp: Comparison) -> list[str]:
    lines = [f"A: {cmp.a.describe()}", f"B: {cmp.b.describe()}"]
    lines.extend(_finding_lines(cmp))
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
    lines.extend(_graphs_note(cmp))
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
                 rich: bool = False, show_all: bool = False) -> str:
    """Aligned plain text (stable for logs); with rich=True a rich table rendered to text with colours. Rows whose
    value did not change are left out unless show_all."""
    if rich:
        try:
            return _render_rich(cmp, violations, n_rules, show_all)
        except ImportError:
            pass
    out = list(_preamble(cmp))
    for group in ("headline", "fallback", "metric", "counter"):
        rows = _shown(cmp, group, show_all)
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
    hidden = _hidden_line(cmp, show_all)
    if hidden:
        out += [""] + hidden
    rl = _rule_lines(violations, n_rules, cmp.within_noise)
    if rl:
        out.append("")
        out.extend(rl)
    return "\n".join(out) + "\n"


def _render_rich(cmp: Comparison, violations, n_rules, show_all: bool = False) -> str:
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
        rows = _shown(cmp, group, show_all)
        if not rows:
            continue
        table = Table(title=_GROUP_TITLES[group], title_justify="left")
        for i, h in enumerate(_HEAD):
            table.add_column(h, justify="left" if i in (0, 5) else "right")
        for r in rows:
            table.add_row(*_cells(r), style=styles.get(r.status))
        console.print(table)
    for line in _hidden_line(cmp, show_all):
        console.print(line, style="dim", markup=False, highlight=False)
    for line in _rule_lines(violations, n_rules, cmp.within_noise):
        console.print(line, style="bold red" if line.startswith("FAIL") else "yellow" if line.startswith("NOISE")
                      else "green", markup=False,
                      highlight=False)
    return console.file.getvalue()


def render_markdown(cmp: Comparison, violations: list[Violation] | None = None, n_rules: int = 0,
                    show_all: bool = False) -> str:
    esc = lambda s: s.replace("|", "\\|")
    out = [f"- {esc(line)}" for line in _preamble(cmp)]
    for group in ("headline", "fallback", "metric", "counter"):
        rows = _shown(cmp, group, show_all)
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
    out += ["", *_hidden_line(cmp, show_all)] if _hidden_line(cmp, show_all) else []
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
