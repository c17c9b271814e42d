"""Which of two findings of one kind to believe: a capture window's (origin `trace`) or the runtime's, measured on
every step. A window that says its traced steps ran much slower than the rest (trace/relate.py's `distorted_window`) is
not the run as it runs, so its finding must not outrank the runtime's: it becomes `info` and says that the
runtime's is the one to believe and why (a `WARN host_bound` at 86 % of a 3x-slowed window beside the runtime's
`info host_bound` at 45 % of every step read as two verdicts)."""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ..model.finding import TRACE, Evidence, Finding, severity_rank


@dataclass
class DeferredEvidence(Evidence):
    """A deferred window finding's evidence: the window's own, then `deferred_to: runtime` and the severity it
    had in the window."""

    window: Evidence
    severity_in_window: str

    def to_json(self) -> dict[str, Any]:
        return {**self.window.to_json(), "deferred_to": "runtime", "severity_in_window": self.severity_in_window}


def defer_distorted(findings: list[Finding], traced: list[Finding]) -> list[Finding]:
    """`traced` (a trace section's findings), each one from a distorted window that has a non-trace finding of
    its kind in `findings` copied as `info` with the reason; the others as they are."""
    others: dict[str, Finding] = {}
    for f in findings:
        if f.origin != TRACE:
            others.setdefault(f.kind, f)
    out = []
    for f in traced:
        ev = f.evidence_json()
        own = others.get(f.kind)
        if own is None or not ev.get("distorted_window"):
            out.append(f)
            continue
        outranks = severity_rank(f.severity) < severity_rank(own.severity)
        out.append(replace(f, severity="info" if outranks else f.severity,
                           evidence=DeferredEvidence(f.evidence, f.severity),
                           message=f.message + (
                               f" Believe the runtime's `{own.kind}` finding ({own.severity}) over this one: it "
                               f"is measured on every step, this window's steps ran {ev['distorted_window']:.1f}x "
                               "slower under tracing.")))
    return out
