"""`python -m ptxla_perf COMMAND ...`: one entry point; each command lives in ptxla_perf/commands/<name>.py
and exposes `add_parser(subparsers)` and `run(args) -> int`."""
from __future__ import annotations

import argparse
import importlib
import math
import sys

from ._meta import __version__

# command -> its one-line help. Only the command that runs is imported (build_parser): its module imports what it
# needs at its top (the report stack, the session), and the top-level --help lists the others from here
COMMANDS = {"profile": "profile an unmodified training script",
            "capture": "capture a profile from a running job's profiler server",
            "analyze": "analyze a profile capture (.xplane.pb / run folder / logdir)",
            "diff": "compare two metrics reports / report JSONs; gate CI with --fail-on",
            "view": "build the HTML page of a report (report.html)",
            "merge": "merge the per-process reports of one run",
            "doctor": "versions, measured features and the profiler port of this install (for bug reports)"}


def describe(doc: str | None) -> str:
    """A command's description for --help: the first paragraph of its module docstring, whole (not its first line
    cut mid-sentence)."""
    para = (doc or "").strip().split("\n\n")[0]
    return " ".join(line.strip() for line in para.splitlines())


class UsageError(Exception):
    """Bad input from the user: printed as one line, exit code 2."""


def number(kind: type, low: float, high: float | None = None, *, above: bool = False):
    """An argparse `type` for a numeric flag: a finite `kind` (int or float) of at least `low` (more than `low`
    with `above`) and at most `high`; anything else is a one-line usage error (`argument --max-warmup: must be
    >= 0, not -3`), never a value taken silently."""
    lo = f"> {low:g}" if above else f">= {low:g}"
    want = lo if high is None else f"{lo} and <= {high:g}"

    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected {'an integer' if kind is int else 'a number'} {want}, not {text!r}") from None
        if not math.isfinite(value) or value < low or (above and value == low) or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"must be {want}, not {text}")
        return value
    parse.__name__ = kind.__name__  # argparse names the type in its own messages
    return parse


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, no usage dump
        raise UsageError(message)


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser of every command, or with `only` of that one command (the others listed by name and help: ""
    lists them all that way)."""
    parser = _Parser(prog="python -m ptxla_perf", description=describe(__doc__))
    parser.add_argument("--version", action="version", version=f"ptxla_perf {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in COMMANDS:
        if only is not None and name != only:
            sub.add_parser(name, help=COMMANDS[name])
            continue
        try:
            module = importlib.import_module(f"ptxla_perf.commands.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"ptxla_perf.commands.{name}":
                raise
            continue
        module.add_parser(sub).set_defaults(_run=module.run)
    return parser


def _command_in(argv: list[str]) -> str:
    """The command named on the command line ("" when none is: top-level --help, --version)."""
    first = next((a for a in argv if not a.startswith("-")), "")
    return first if first in COMMANDS else ""


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        args = build_parser(_command_in(argv)).parse_args(argv)
        if not getattr(args, "_run", None):
            build_parser("").print_help()
            return 2
        return int(args._run(args) or 0)
    except UsageError as exc:
        print(f"ptxla_perf: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # before a session owns the signal (e.g. during `import torch_xla`): one line
        import signal
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the interpreter's shutdown is not interrupted again
        print("ptxla_perf: interrupted before the run started (nothing measured, no report)", file=sys.stderr)
        return 130
