"""The one registry of rules: every rule of every scope, each declaring what it reads (model/finding.py). Each scope
has one runner, which a live session and the offline tools (`report.build`, `merge`, `analyze`) both call:

- `iteration`: findings.analyze (findings.ITERATION_RULES, and the backend's own rules through the context);
- `trace`: trace/rules.judge (a capture's window);
- `ranks`: rank_rules.judge (the per-process reports of one run, from merge);
- `run_end`: end_rules.run_end (how the run ended, its memory headroom).

A backend's own rules are the adapter's (`Adapter.rules`); `backend_rules(name)` finds them by the report's
backend name without importing the framework (the rules modules are pure logic)."""
from __future__ import annotations

import importlib
from typing import Sequence

from . import end as end_rules, iteration as findings, ranks as rank_rules
from ..trace import rules as trace_rules
from ..model.finding import ITERATION, Rule

RULES: tuple[Rule, ...] = (*findings.ITERATION_RULES, *trace_rules.RULES, *rank_rules.RULES, *end_rules.RULES)


def scoped(scope: str) -> tuple[Rule, ...]:
    """The registry's rules of one scope, in the order they run."""
    return tuple(r for r in RULES if r.scope == scope)


def backend_rules(backend: str | None) -> Sequence[Rule]:
    """A backend's own iteration rules by its report name ("torch_xla", "jax"): the flat `<backend>_rules` module,
    or its package's `rules` module; () for an unknown backend. Neither imports the framework (the flat module is
    tried first: where the backend is still one module, importing `<backend>.rules` would load it, and the
    framework with it)."""
    if not backend or not backend.isidentifier():
        return ()
    for name in (f"ptxla_perf.backends.{backend}_rules", f"ptxla_perf.backends.{backend}.rules"):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        return tuple(r for r in getattr(module, "RULES", ()) if getattr(r, "scope", ITERATION) == ITERATION)
    return ()
