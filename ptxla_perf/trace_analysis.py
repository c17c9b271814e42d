"""Trace analysis entry points (the implementation lives in ptxla_perf/trace/)."""
from .trace import TraceError, analyze_trace, list_runs, locate_xplanes  # noqa: F401
from .trace.render import print_table, to_markdown  # noqa: F401
