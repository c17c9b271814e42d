"""`diff A B`: compare two runs (torch_xla metrics-report text, XLA_METRICS_FILE files or ptxla_perf report JSON)
and optionally fail on rules. Exit 0: fine; 1: a --fail-on rule broke; 2: bad input."""
from __future__ import annotations

import argparse
import sys

from ..cli import COMMANDS, UsageError, describe, number
from .. import diff as d


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "diff", help=COMMANDS["diff"],
        description=describe(__doc__),
        epilog="rules: NAME OP THRESHOLD, comma-separated. OP: > >= < <= == !=. THRESHOLD: N (B's value), "
               "+N/-N (B minus A), N%/+N%/-N% (change from A to B); units allowed (20ms, 1MB). "
               "NAME: a row name (compiles, device_to_host_per_step, step_time_p50, UncachedCompile, "
               "ExecuteTime, ExecuteTime.p50, ...), a finding count of a report (warnings:device_to_host_sync) "
               "or a glob (aten::*). See docs/diff.md.")
    p.add_argument("a", metavar="A", help="baseline: metrics-report text file or ptxla_perf report JSON")
    p.add_argument("b", metavar="B", help="candidate: metrics-report text file or ptxla_perf report JSON")
    p.add_argument("--format", choices=["table", "json", "markdown"], default="table",
                   help="output format (default: %(default)s)")
    p.add_argument("--per-step", action="store_true",
                   help="divide totals by each side's step count (MarkStep counter / summary.steps)")
    p.add_argument("--step", type=number(int, 0), default=None, metavar="N",
                   help="in XLA_METRICS_FILE files, use the [MetricsData; step=N] block (default: the last)")
    p.add_argument("--fail-on", action="append", default=None, metavar="RULES",
                   help="comma-separated rules, e.g. 'compiles>+0,device_to_host_per_step>0,"
                        "step_time_p50>+5%%,aten::*>0'; exit 1 when any breaks (repeatable)")
    p.add_argument("--strict", action="store_true",
                   help="fail a step-time rule even when the change is within the noise band (the larger per-step "
                        "spread, p90 - p50, of A and B; docs/diff.md)")
    p.add_argument("--html", default=None, metavar="OUT.html",
                   help="also write before/after side by side as a self-contained HTML page (docs/html.md)")
    p.add_argument("--all", action="store_true", dest="show_all",
                   help="print every row, the unchanged ones too (default: findings that changed, then the rows "
                        "whose value changed)")
    p.add_argument("--color", choices=["auto", "always", "never"], default="auto",
                   help="rich colours for --format table (default: when stdout is a terminal)")
    return p


def run(args) -> int:

    try:
        rules = d.parse_rules(args.fail_on) if args.fail_on is not None else None
    except d.RuleError as exc:
        raise UsageError(f"--fail-on: {exc}") from None
    try:
        a = d.load(args.a, step=args.step)
        b = d.load(args.b, step=args.step)
    except d.DiffInputError as exc:
        raise UsageError(str(exc)) from None
    comparison = d.compare(a, b, per_step=args.per_step)
    violations = None
    if rules is not None:
        try:
            violations = d.check(comparison, rules, strict=args.strict)
        except d.RuleError as exc:
            raise UsageError(f"--fail-on: {exc}") from None
    n_rules = len(rules or [])
    if args.format == "json":
        out = d.render_json(comparison, violations, n_rules)
        for v in violations or []:
            print(f"FAIL {v.message}", file=sys.stderr)
    elif args.format == "markdown":
        out = d.render_markdown(comparison, violations, n_rules, show_all=args.show_all)
    else:
        rich = args.color == "always" or (args.color == "auto" and sys.stdout.isatty())
        out = d.render_table(comparison, violations, n_rules, rich=rich, show_all=args.show_all)
    try:
        sys.stdout.write(out)
        sys.stdout.flush()
    except BrokenPipeError:  # `... | head`
        pass
    if args.html:
        _write_html(args, comparison, violations, n_rules)
    return 1 if violations else 0


def _write_html(args, comparison, violations, n_rules) -> None:
    import json
    import os

    from ..html import diff_page  # the page's stack, only with --html: a plain diff stays light

    def report_of(path: str, side) -> dict | None:
        if side.kind != "report_json":
            return None
        with open(path, encoding="utf-8", errors="replace") as f:
            return json.load(f)  # already read and checked once by diff.load
    page = diff_page.render(comparison.to_dict(), n_rules=n_rules,
                            violations=None if violations is None else [v.to_dict() for v in violations],
                            reports=(report_of(args.a, comparison.a), report_of(args.b, comparison.b)))
    out = os.path.abspath(args.html)
    try:
        os.makedirs(os.path.dirname(out), exist_ok=True)
        with open(out, "w", encoding="utf-8") as f:
            f.write(page)
    except OSError as exc:
        raise UsageError(f"--html {args.html}: {exc.strerror or exc}") from None
    print(f"html: {out}", file=sys.stderr)
