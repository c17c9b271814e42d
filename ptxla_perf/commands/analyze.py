"""`analyze PATH`: step breakdown, executor idle gaps, top HLO ops, collective share and compiles from a profile
capture (.xplane.pb, a run folder, or a logdir: newest run or --run NAME); merged into a report with --report."""
from __future__ import annotations

import argparse
import json
import os
import sys

from ..cli import COMMANDS, UsageError, describe, number
from ..report import assemble as R
from ..trace import TraceError, TraceSection, analyze_trace
from ..trace.render import print_table, to_markdown
from ..html import html_path
from ..trace.ownership import mismatch


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("analyze", help=COMMANDS["analyze"],
                       description=describe(__doc__), epilog="See docs/analyze.md.")
    p.add_argument("path", metavar="PATH", help=".xplane.pb file, run folder, or logdir (plugins/profile/<run>/)")
    p.add_argument("--run", default=None, metavar="NAME", help="run folder name under LOGDIR/plugins/profile "
                                                                "(default: the newest)")
    p.add_argument("--report", default=None, metavar="OUT.json",
                   help="merge the trace section into this ptxla_perf report if it exists, else write a minimal "
                        "report there")
    p.add_argument("--force", action="store_true",
                   help="merge into --report even when the capture does not look like one of that report's run "
                        "(another host, or taken outside its start and end)")
    p.add_argument("--format", choices=["table", "json", "markdown"], default="table",
                   help="console output (default: %(default)s)")
    p.add_argument("--top", type=number(int, 1), default=15, metavar="N", help="top HLO ops to list (default: %(default)s)")
    p.add_argument("--gaps", type=number(int, 0), default=5, metavar="N", help="largest idle gaps to list (default: %(default)s)")
    p.add_argument("--min-gap-ms", type=number(float, 0), default=None, metavar="MS",
                   help="smallest idle gap counted (default: 5%% of the median step, at least 0.1 ms)")
    p.add_argument("--xprof", choices=["auto", "always", "never"], default="auto",
                   help="use xprof's device tables (hlo_stats, overview_page): auto = when the capture has a "
                        "device plane (default: %(default)s)")
    return p


def merge_into_report(trace: TraceSection, report_path: str | None, force: bool = True) -> dict:
    """Existing report: replace its `trace` and append the trace findings (origin "trace", earlier trace
    findings replaced), after checking the capture is of that report's run (unless `force`). Otherwise a
    minimal valid report (run.kind = "trace", no steps)."""

    if report_path and os.path.exists(report_path):
        try:
            rep = R.load(report_path)
        except (ValueError, json.JSONDecodeError) as exc:
            raise UsageError(f"--report {report_path}: {exc}") from None
        if not force:
            why = mismatch(rep, trace)
            if why:
                raise UsageError(f"--report {report_path}: not merged: {why} (--force merges it anyway)")
    else:
        backend = trace.source.backend or "torch_xla"
        run = {"kind": "trace", "status": "completed", "argv": sys.argv[1:], "config": None,
               "step_detection": trace.step_summary.detection}
        rep = R.build(backend=backend, run=run, env=R.environment({}), steps=[])
    return R.with_trace(rep, trace)



def run(args) -> int:

    use_xprof = {"auto": None, "always": True, "never": False}[args.xprof]
    try:
        trace = analyze_trace(args.path, args.run, top_n=args.top, gaps_n=args.gaps, min_gap_ms=args.min_gap_ms,
                              use_xprof=use_xprof)
    except TraceError as exc:
        raise UsageError(str(exc)) from None
    if args.report:

        rep = merge_into_report(trace, args.report, force=args.force)
        R.write(rep, args.report)
    if args.format == "json":
        json.dump(trace.to_json(), sys.stdout, indent=1)
        sys.stdout.write("\n")
    elif args.format == "markdown":
        print(to_markdown(trace))
    else:
        print_table(trace)
    if args.report:
        print(f"report: {os.path.abspath(args.report)}", file=sys.stderr)
        page = html_path(os.path.abspath(args.report))  # written beside it (docs/html.md)
        if os.path.exists(page):
            print(f"html: {page}", file=sys.stderr)
    return 0
