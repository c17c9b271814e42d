"""One comparison table across a Hydra multirun's reports: `python -m ptxla_perf.sweep MULTIRUN_DIR`.

Also a Hydra callback (`ptxla_perf.sweep.SweepTable`) that prints the table when a `-m` sweep ends:
    hydra:
      callbacks:
        sweep_table:
          _target_: ptxla_perf.sweep.SweepTable
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Callable

from .model import fmt
from .html import sweep_page
from .trace.section import TraceSection
from .model.summary import Summary
from .model.finding import short_path

from .html.sweep_figures import FIGURES, Figure  # the table's figures (one module, read by the sweep page too)
def _column(f: Figure) -> Callable[[dict, Path], str]:
    return lambda r, p: f.text(f.value(Summary.from_json(r["summary"])))


_TRACE_COLUMNS = {"all-reduce share": lambda r, p: fmt.pct(_extra(r, "all_reduce_share")),
                  "fusion share": lambda r, p: fmt.pct((_extra(r, "op_categories") or {}).get("fusion"))}
COLUMNS = [  # header, getter; "overrides" is each job's label (labels: what differs between the jobs)
    ("job", lambda r, p: p.parent.name),
    ("overrides", lambda r, p: _overrides(r.get("run", {}).get("overrides", []))),
    ("batch", lambda r, p: _extra(r, "batch_size") or "-"),
    *((f.column, _column(f)) for f in FIGURES[:-2] if f.column),
    *_TRACE_COLUMNS.items(),
    *((f.column, _column(f)) for f in FIGURES[-2:]),
]


def _extra(r: dict, key: str) -> Any:
    ex = r.get("extra") or {}
    if key in ex:
        return ex[key]
    tr = TraceSection.from_json(r.get("trace"))
    if key == "all_reduce_share":
        return tr.collective_share.mean if tr is not None else None
    return None


def _overrides(items: list[str], width: int = 40) -> str:
    """The overrides that fit in the column, whole (never cut mid-word), then how many more there are."""
    out: list[str] = []
    for i, item in enumerate(items):
        more = len(items) - i - 1
        text = " ".join(out + [item])
        if len(text) + (len(f" +{more}") if more else 0) > width and out:
            return " ".join(out) + f" +{len(items) - i}"
        out.append(item)
    return " ".join(out)


def find_reports(root: str | Path, name: str = "report.json") -> list[Path]:
    root = Path(root)
    return sorted(root.rglob(name), key=lambda p: (len(p.parts), str(p)))


def read(reports: list[Path]) -> list[tuple[Path, dict[str, Any]]]:
    """(path, report) of each report that can be read, in job order (Hydra's job number, else the path)."""
    runs = []
    for p in reports:
        try:
            runs.append((p, json.loads(p.read_text())))
        except (OSError, ValueError):
            continue
    name = lambda p: p.parent.name
    return sorted(runs, key=lambda pr: (0, int(name(pr[0])), "") if name(pr[0]).isdigit() else (1, 0, str(pr[0])))


def labels(runs: list[tuple[Path, dict[str, Any]]]) -> list[str]:
    """Each job by the overrides that differ between the jobs (the swept values, whole), else by its folder; a
    sweep of one job by its overrides."""
    ovs = [list((r.get("run") or {}).get("overrides") or []) for _, r in runs]
    if len(runs) == 1:
        return [_overrides(ovs[0]) or fmt.MISSING]
    common = set.intersection(*map(set, ovs)) if ovs else set()
    return [" ".join(o for o in ov if o not in common) or p.parent.name for (p, _), ov in zip(runs, ovs)]


def table_rows(runs: list[tuple[Path, dict[str, Any]]]) -> tuple[list[str], list[list[str]]]:
    """The table's header and rows: jobs labelled by what differs between them; a column no job has a value in
    is left out."""
    out = []
    for (p, r), label in zip(runs, labels(runs)):
        cells = []
        for h, get in COLUMNS:
            try:
                cells.append(label if h == "overrides" else str(get(r, p)))
            except Exception:  # noqa: BLE001 - a report missing a field shows "-"
                cells.append(fmt.MISSING)
        out.append(cells)
    keep = [i for i, (h, _) in enumerate(COLUMNS) if h in ("job", "overrides") or
            any(row[i] != fmt.MISSING for row in out)]
    return [COLUMNS[i][0] for i in keep], [[row[i] for i in keep] for row in out]


def table(reports: list[Path]) -> list[str]:
    head, rows = table_rows(read(reports))
    widths = [max(len(h), *(len(row[i]) for row in rows)) if rows else len(h) for i, h in enumerate(head)]
    line = lambda cells: "  ".join(c.rjust(w) if i > 1 else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths)))
    return [line(head), line(["-" * w for w in widths])] + [line(row) for row in rows]


def write_html(reports: list[Path], root: str | Path, out: str | Path | None = None) -> str | None:
    """The sweep's page (html/sweep_page.py): `<root>/sweep.html` unless `out`; None when no report could be read."""
    runs = read(reports)
    if not runs:
        return None
    return sweep_page.write(runs, root, out, table_rows(runs), labels(runs))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m ptxla_perf.sweep", description=__doc__.splitlines()[0])
    ap.add_argument("root", help="a multirun folder (or any folder holding report.json files)")
    ap.add_argument("--report-name", default="report.json")
    ap.add_argument("--html", default=None, metavar="OUT.html", help="also write the sweep's page (docs/html.md)")
    args = ap.parse_args(argv)
    reports = find_reports(args.root, args.report_name)
    if not reports:
        print(f"ptxla_perf: no {args.report_name} under {args.root}", file=sys.stderr)
        return 2
    print("\n".join(table(reports)))
    if args.html:
        try:
            path = write_html(reports, args.root, args.html)
        except OSError as exc:
            print(f"ptxla_perf: cannot write {args.html}: {exc.strerror or exc}", file=sys.stderr)
            return 2
        print(f"html: {short_path(path)}", file=sys.stderr)
    return 0


try:
    from hydra.experimental.callback import Callback as _Callback
except ImportError:  # hydra not installed: the CLI above still works
    _Callback = object


class SweepTable(_Callback):
    """Prints the comparison table at the end of a `-m` sweep."""

    def on_multirun_end(self, config, **kwargs) -> None:
        try:
            root = config.hydra.sweep.dir
            reports = find_reports(root, config.get("report", "report.json"))
            if reports:
                # stderr, as each job's summary above it: one stream for all ptxla_perf prints in a sweep
                print("\n".join(["", f"ptxla_perf sweep: {len(reports)} run(s) in {root}"] + table(reports)),
                      file=sys.stderr, flush=True)
        except Exception as exc:  # never fail a finished sweep over its summary
            print(f"ptxla_perf: sweep table failed: {exc}", file=sys.stderr)
            return
        try:
            if reports:
                # relative to the working directory, as a run prints its page
                print(f"html: {short_path(write_html(reports, root))}", file=sys.stderr, flush=True)
        except Exception as exc:  # noqa: BLE001 - the page is a view of the table above
            print(f"ptxla_perf: note: no sweep page: {exc}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
