"""`view REPORT.json`: (re)build the report's self-contained HTML page (docs/html.md) beside it or at --out,
and open it in a browser with --open."""
from __future__ import annotations

import argparse
import json
import sys

from ..cli import COMMANDS, UsageError, describe
from .. import html as H
from ..report import assemble as R
from ..report.excerpts import attach


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("view", help=COMMANDS["view"],
                       description=describe(__doc__), epilog="See docs/html.md.")
    p.add_argument("report", metavar="REPORT.json", help="a ptxla_perf report (schema ptxla_perf.report/1)")
    p.add_argument("--out", default=None, metavar="PATH",
                   help="where to write the page (default: beside the report, same name, .html)")
    p.add_argument("--open", action="store_true", help="open the page in the default web browser")
    return p


def run(args) -> int:

    try:
        rep = R.load(args.report)
    except FileNotFoundError:
        raise UsageError(f"no such report: {args.report}") from None
    except OSError as exc:
        raise UsageError(f"cannot read {args.report}: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise UsageError(f"{args.report} is not valid JSON (line {exc.lineno}): a broken or truncated report") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise UsageError(f"{exc}; found schema {_found_schema(args.report)!r}") from None
    if isinstance(rep.get("findings"), list):  # a report from before findings[].source: read the lines if here
        attach([f for f in rep["findings"] if isinstance(f, dict)])
    out = args.out or H.html_path(args.report)
    try:
        path = H.write(rep, out)
    except OSError as exc:
        raise UsageError(f"cannot write {out}: {exc.strerror}") from None
    except (KeyError, TypeError, AttributeError, ValueError) as exc:  # a report that claims v1 but is not
        raise UsageError(f"{args.report} does not follow schema v1 ({type(exc).__name__}: {exc})") from None
    print(f"html: {path}", file=sys.stderr)
    if args.open:
        import webbrowser
        from pathlib import Path
        if not webbrowser.open(Path(path).resolve().as_uri()):
            print("ptxla_perf: no web browser found; open the file above", file=sys.stderr)
    return 0


def _found_schema(path: str):
    try:
        with open(path) as f:
            data = json.load(f)
        return data.get("schema") if isinstance(data, dict) else type(data).__name__
    except Exception:  # noqa: BLE001 - only for the error message
        return None
