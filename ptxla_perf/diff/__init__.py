"""Compare two runs, backend-neutrally, and gate CI on rules.

Inputs (see `load`): torch_xla metrics-report text (a plain report or an `XLA_METRICS_FILE` multi-step file) or a
ptxla_perf report JSON (schema `ptxla_perf.report/1`). Each input becomes a `Source`: a flat map of row name ->
value, with *canonical* rows shared by both kinds (compiles, executions, device_to_host, step_time_p50, ...) and,
for metrics text, *raw* rows named after torch_xla's own metrics and counters (`ExecuteTime`, `UncachedCompile`).

    from ptxla_perf.diff import load, compare, parse_rules, check
    cmp = compare(load("before.txt"), load("after.txt"), per_step=True)
    broken = check(cmp, parse_rules("device_to_host_per_step>0,step_time_p50>+5%"))

Mapping of canonical rows (docs/diff.md has the table):
    metrics text                                  report JSON
    compiles          UncachedCompile counter     summary.compiles
    cached_compiles   CachedCompile counter       summary.cached_compiles
    compile_time_s    CompileTime accumulator     summary.compile_time_s
    executions        ExecuteTime samples         summary.executions (training steps)
    execute_time_s    ExecuteTime accumulator     (not in the report)
    device_to_host    (not in metrics text: it cannot tell  summary.device_to_host (host reads, net of
                      reads from fallback copies)         CPU-fallback copies)
    device_to_host_transfers  TransferFromDeviceTime samples  summary.device_to_host_transfers (gross)
    device_to_host_transfer_bytes  InboundData accumulator  summary.device_to_host_transfer_bytes
    host_to_device    TransferToDeviceTime samples     summary.host_to_device
    host_to_device_bytes  OutboundData accumulator     summary.host_to_device_bytes
    steps             MarkStep counter            summary.steps
    step_time_p50 ... (not in metrics text)       summary.step_time_s.{p50,p90,mean,min,max}
    fallback_ops      sum of aten::* counters but aten::_local_scalar_dense (an .item()-style read, not an
                      un-lowered op)              sum of summary.fallback_ops (same exclusion)
    X_per_step        X / steps                   summary.X_per_step where the report has it, else X / steps
    mfu, achieved_tflops_per_s, flops_per_step   (not in metrics text)   summary.* (roofline, docs/roofline.md)
    peak_bytes, temp_bytes                      (not in metrics text)   summary.* (memory, docs/report.md#memory)
"""
from __future__ import annotations

from .compare import Comparison, Row, compare
from .render import format_value, render_json, render_markdown, render_table
from .rules import Rule, RuleError, Violation, check, parse_rules
from .sources import CANONICAL, NOT_A_FALLBACK, DiffInputError, Source, from_report, from_snapshot, from_text, load

__all__ = [
    "Source", "Row", "Comparison", "Rule", "Violation", "DiffInputError", "RuleError",
    "load", "from_text", "from_snapshot", "from_report", "compare", "parse_rules", "check",
    "render_table", "render_json", "render_markdown", "format_value", "CANONICAL", "NOT_A_FALLBACK",
]
