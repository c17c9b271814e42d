"""The page of a Hydra `-m` sweep (`<sweep dir>/sweep.html`): the sweep table, then one chart per metric with a
bar per job, each job linking to its own report.html. Self-contained like the run pages (docs/html.md)."""
from __future__ import annotations

import os
from html import escape
from pathlib import Path
from typing import Any, Callable

from .sweep_figures import FIGURES
from ..model.summary import Summary
from . import charts, html_path, page

# chart name -> (value of a report, formatting): the sweep table's own figures (sweep.FIGURES), read from the typed
# summary
METRICS: list[tuple[str, Callable[[dict], float | None], Callable[[float], str]]] = [
    (f.chart, lambda r, f=f: f.value(Summary.from_json(r["summary"])), f.chart_text) for f in FIGURES if f.chart]


def render(runs: list[tuple[Path, dict[str, Any]]], root: str | Path, page_dir: str | Path | None = None,
           table: tuple[list[str], list[list[str]]] | None = None, labels: list[str] | None = None) -> str:
    """`runs`: (report path, report) per job, in table order; each job links to its report.html, relative to the
    folder the page goes in (`page_dir`, default `root`), so the sweep folder can be moved as a whole. `table`:
    the console table's (header, rows) and `labels` its job labels (sweep.table_rows / sweep.labels, passed in by
    sweep.py: this page never imports it back)."""

    root = Path(root)
    page_dir = Path(page_dir or root)
    labels = labels if labels and len(runs) > 1 else [p.parent.name for p, _ in runs]
    names, table = table or ([], [[] for _ in runs])  # the console's table: jobs labelled by what differs
    head = "".join(f"<th>{escape(h)}</th>" for h in names)
    rows = []
    for (p, _), row in zip(runs, table):
        cells = []
        for i, v in enumerate(row):
            if i == 0:
                link = os.path.relpath(html_path(str(p)), page_dir)
                v = f"<a href=\"{escape(link)}\">{escape(v)}</a>"
            else:
                v = escape(v)
            cells.append(f"<td>{v}</td>")
        rows.append(f"<tr data-job=\"{escape(p.parent.name)}\">{''.join(cells)}</tr>")
    cards = []
    for name, get, show in METRICS:
        values = []
        for _, r in runs:
            try:
                values.append(get(r))
            except Exception:  # noqa: BLE001
                values.append(None)
        if not any(isinstance(v, (int, float)) for v in values):
            continue
        cards.append(f"<div class=\"kpi metric\" data-metric=\"{escape(name)}\"><div class=\"k\">{escape(name)}</div>"
                     f"{charts.hbars(labels, values, show)}</div>")
    style = "<style>.metrics{display:grid;grid-template-columns:repeat(auto-fill,minmax(540px,1fr));gap:12px}</style>"
    sections = [style, f"<header><h1>ptxla_perf sweep — {len(runs)} run(s)</h1>"
                       f"<div class=\"sub\">{escape(str(root))}</div></header>",
                f"<h2>Runs</h2><section class=\"box\"><table><tr>{head}</tr>{''.join(rows)}</table></section>",
                f"<h2>Per metric</h2><div class=\"metrics\">{''.join(cards)}</div>"]
    return page(f"ptxla_perf sweep: {root.name}", sections)


def write(runs: list[tuple[Path, dict[str, Any]]], root: str | Path, out: str | Path | None = None,
          table: tuple[list[str], list[list[str]]] | None = None, labels: list[str] | None = None) -> str:
    out = os.path.abspath(out or os.path.join(root, "sweep.html"))
    text = render(runs, root, os.path.dirname(out), table, labels)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w", encoding="utf-8") as f:
        f.write(text)
    return out
