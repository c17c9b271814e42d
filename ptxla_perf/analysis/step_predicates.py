"""Per-step predicates that a rule and an adapter's own decision must agree on: the adapter re-arms attribution for
the anomalies the rules will report, so both ask these, never a copy of them (rules/iteration.py, backends/*)."""
from __future__ import annotations

from ..model.records import StepRecord


def host_reads(s: StepRecord, fallback_copies: int) -> int:
    """Host reads of the user's code in a step: device-to-host transfers net of the CPU fallbacks' own copies
    (figures.FallbackCopies says how many those were)."""
    return s.device_to_host.count - fallback_copies


def early_not_read(s: StepRecord) -> int:
    """Graphs a step launched early that no host read explains (a read runs the pending graph early, and the host
    read's finding says so); 0 on a step with CPU fallback ops (their copies run it early: op_fallback says so).
    The graph_break rule's count (findings._early_executions)."""
    return 0 if s.fallback_ops else max(0, s.early_executions - s.device_to_host.count)


def runaway_compiles(s: StepRecord, compiles: int, transfers: int) -> bool:
    """Graph after graph at transfers to the host within one step (guard.py): every transfer counts here, a
    fallback's copy included, as each one cuts the pending graph and compiles what was traced so far."""
    return s.compiles >= compiles and s.device_to_host.count >= transfers
