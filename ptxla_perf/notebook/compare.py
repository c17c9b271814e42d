"""Runs side by side (`ptxla_perf.compare`, report.py): the `diff` command's comparison (ptxla_perf.diff: the same
rows, numbers, noise band and `fail_on` rules), the first run the baseline each other run is compared with - as
DataFrames and an HTML table."""
from __future__ import annotations

from functools import cached_property
from html import escape
from typing import Any

from .. import diff as D
from . import tables


class Comparison:
    """Run 0 (the baseline) against each later run. `pairs[i]` is the diff command's `Comparison` of the baseline
    and run i+1; `violations[i]` the `fail_on` rules it broke (None: no rules given)."""

    def __init__(self, reports: list[dict[str, Any]], labels: list[str], per_step: bool = False,
                 rules: list[D.Rule] | None = None, strict: bool = False):
        self.reports, self.labels, self.rules = reports, labels, rules  # the report dicts, one label each
        sources = [D.from_report(r, label) for r, label in zip(reports, labels)]
        self.pairs = [D.compare(sources[0], other, per_step=per_step) for other in sources[1:]]
        self.violations = None if rules is None else [D.check(p, rules, strict=strict) for p in self.pairs]

    @property
    def passed(self) -> bool:
        """No `fail_on` rule broke in any pair, and no run measured nothing (True when no rules were given)."""
        return not any(self.violations or [])

    @cached_property
    def figures(self):
        """One row per compared value (the diff command's rows, in its order): its unit and group, each run's
        value, and each later run's delta, ratio and status against the baseline."""
        names, unit, group = [], {}, {}
        for p in self.pairs:
            for r in p.rows:
                if r.name not in unit:
                    names.append(r.name)
                    unit[r.name], group[r.name] = r.unit, r.group
        rows = []
        base = self.labels[0]
        for name in names:
            row = {"name": name, "unit": unit[name], "group": group[name]}
            for p, label in zip(self.pairs, self.labels[1:]):
                r = p.row(name)
                if r is not None and row.get(base) is None:
                    row[base] = r.a
                row[label] = r.b if r else None
                row[f"delta {label}"] = r.delta if r else None
                row[f"ratio {label}"] = r.ratio if r else None
                row[f"status {label}"] = r.status if r else "n/a"
            rows.append(row)
        cols = ["name", "unit", "group", *self.labels]
        for label in self.labels[1:]:
            cols += [f"delta {label}", f"ratio {label}", f"status {label}"]
        return tables.pandas().DataFrame(rows, columns=cols).set_index("name")

    @cached_property
    def findings(self):
        """One row per finding (kind at a line) in any run: each run's count per step (its count when the report
        gives none; missing where the run does not have it) and the worst severity seen."""
        order = {"error": 0, "warning": 1, "info": 2}
        rows: dict[tuple, dict[str, Any]] = {}
        for report, label in zip(self.reports, self.labels):
            for f in report.get("findings") or []:
                loc = f.get("location") or {}
                key = (f.get("kind"), f"{loc['file']}:{loc.get('line')}" if loc.get("file") else None)
                row = rows.setdefault(key, {"kind": key[0], "where": key[1], "severity": f.get("severity")})
                if order.get(f.get("severity"), 3) < order.get(row["severity"], 3):
                    row["severity"] = f.get("severity")
                row[label] = f.get("per_step") if f.get("per_step") is not None else f.get("count")
        return tables.pandas().DataFrame(list(rows.values()), columns=["kind", "where", "severity", *self.labels])

    def text(self) -> str:
        """The diff command's table for each pair, as it prints it."""
        n = len(self.rules or [])
        return "\n".join(D.render_table(p, None if self.violations is None else self.violations[i], n)
                         for i, p in enumerate(self.pairs))

    def __repr__(self) -> str:
        return self.text()

    def _repr_html_(self) -> str | None:
        try:
            tables.pandas()
        except ImportError:  # the text table shows instead
            return None
        out = ["<div class=\"ptxla-perf-compare\">"]
        lines = [f"baseline: {escape(self.labels[0])}"]
        for p in self.pairs:
            lines += [escape(n) for n in p.notes]
            for op in p.new_fallback_ops:
                lines.append(f"<b>new in {escape(p.b.label)}: {escape(op)}</b>")
        if self.violations is not None:
            for p, broken in zip(self.pairs, self.violations):
                if not broken:
                    lines.append(f"{escape(p.b.label)}: all {len(self.rules or [])} rule(s) passed")
                lines += [f"<b style=\"color:#b00\">FAIL {escape(v.message)}</b>" for v in broken]
                lines += [f"NOISE {escape(v.message)}: not failing (strict=True fails it)" for v in p.within_noise]
        out.append("<br>".join(lines))
        head = "".join(f"<th>{escape(c)}</th>" for c in ["name", *self.labels,
                                                         *(f"{k} {l}" for l in self.labels[1:]
                                                           for k in ("delta", "status"))])
        body = []
        for name, row in self.figures.iterrows():
            unit = row["unit"] if isinstance(row["unit"], str) else None
            cells = [D.format_value(_num(row[label]), unit) for label in self.labels]
            for label in self.labels[1:]:
                cells += [D.format_value(_num(row[f"delta {label}"]), unit, signed=True), str(row[f"status {label}"])]
            body.append("<tr><td><code>" + escape(str(name)) + "</code></td>"
                        + "".join(f"<td style=\"text-align:right\">{escape(c)}</td>" for c in cells) + "</tr>")
        out.append(f"<table><tr>{head}</tr>{''.join(body)}</table>")
        if len(self.findings):
            out.append("<h4>Findings (per step, by run)</h4>" + self.findings.to_html(index=False, na_rep="-"))
        out.append("</div>")
        return "".join(out)


def _num(v: Any) -> float | None:
    try:
        return None if v is None or v != v else float(v)  # NaN (pandas' missing value) -> None
    except (TypeError, ValueError):
        return None
