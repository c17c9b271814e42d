"""Roofline: the cost of each compiled program, once per jitted function and signature, and the optimized HLO of the
programs costed (for joining a capture's ops with per-instruction costs)."""
from __future__ import annotations

import os
from typing import Any, Callable

import jax

from ...xla import hlo_cost, hlo_flops
from . import _private as P
from .compiles import Compiles, signature
from .jitted import JitInfo
from .ledger import Scope

_MAX_COMPILED = 8  # Compiled objects kept for their HLO text (read on demand)


class Costs:
    """Owns the costs per function and the Compiled objects; `remember_memory` receives each Compiled's memory
    analysis (memory.py) from the same cache hit."""

    def __init__(self, scope: Scope, compiles: Compiles, caps: P.Capabilities,
                 remember_memory: Callable[[JitInfo, Any], None]):
        self._scope = scope
        self._compiles = compiles
        self._caps = caps
        self._remember_memory = remember_memory
        self.note: str | None = None  # why costs are off for the rest of the run
        self._costed_fns: dict[str, dict] = {}  # function name -> its signatures' costs (report: roofline.graphs)
        self._compiled: dict[int, Any] = {}

    def cost_compiled(self, fn: JitInfo, args: tuple, kwargs: dict) -> None:
        """Once per function and signature, right after the call that compiled it: `lower(...).compile()` is then
        a cache hit of the executable just built (no trace, no compile), and its `cost_analysis()` is XLA's
        HloCostAnalysis of the optimized (fused, partitioned: per device) program."""
        sig = fn.sig
        if sig is None or sig in fn.costs or not hasattr(fn.jit, "lower"):
            return
        cost = hlo_cost.unavailable(self.note) if self.note else self._cost_of(fn, args, kwargs)
        if self.note:
            cost = hlo_cost.unavailable(self.note)
        fn.costs[sig] = cost
        fn.cost = cost if len(fn.costs) == 1 else None
        entry = self._costed_fns.setdefault(fn.name, {"id": fn.name, "signatures": 0, **cost.to_json()})
        entry["signatures"] += 1

    def _cost_of(self, fn: JitInfo, args: tuple, kwargs: dict) -> hlo_cost.GraphCost:
        scope = self._scope
        before = self._compiles.own_compiles
        scope.costing = True
        scope.depth += 1
        try:
            lowered = fn.jit.lower(*args, **kwargs)
            compiled = None
            try:
                if os.environ.get(hlo_cost.DISABLE_ENV):
                    raise ImportError(f"{hlo_cost.DISABLE_ENV} is set")
                if not self._caps.cost_analysis:
                    raise ImportError("jax.stages.Compiled.cost_analysis is missing")
                compiled = lowered.compile()
                self._remember_memory(fn, compiled)
                # held against the program's own dots and loops: a GPU's compiled count misses cuBLAS calls
                # (-1 each), every backend's counts a loop body once (hlo_flops.py)
                cost = hlo_flops.checked(hlo_cost.from_properties(compiled.cost_analysis()),
                                         lambda: lowered.as_text(dialect="hlo"), _partitions(compiled))
                if len(self._compiled) < _MAX_COMPILED:
                    self._compiled[id(compiled)] = compiled
            except Exception as exc:  # private or changed API: the HLO text instead
                cost = _cost_from_text(lowered, exc, _partitions(compiled) if compiled is not None else 1)
        except Exception as exc:  # never break the user's call for a diagnostic
            cost = hlo_cost.unavailable(f"lowering for cost analysis failed: {str(exc).splitlines()[0][:120]}")
        finally:
            scope.depth -= 1
            scope.costing = False
        if self._compiles.own_compiles != before:  # a cache miss: costing would double the compile time
            self.note = "jax compiled again for cost analysis: cost analysis turned off for this run"
        return cost

    def call_cost(self, fn: JitInfo, args: tuple, kwargs: dict) -> hlo_cost.GraphCost | None:
        """The cost of the program this call ran (which signature, only for functions with several)."""
        if len(fn.costs) < 2:
            return fn.cost
        try:
            return fn.costs.get(signature(fn, args, kwargs))
        except Exception:
            return None

    def hlo_modules(self) -> dict[str, str]:
        """The optimized HLO of the programs costed so far, by module name (read now, not at compile time)."""
        out: dict[str, str] = {}
        for compiled in self._compiled.values():
            try:
                text = compiled.as_text()
            except Exception:
                continue
            name = text[:200].split(",", 1)[0].removeprefix("HloModule").strip()
            if name and len(text) < 50_000_000:
                out.setdefault(name, text)
        return out

    def graph_costs(self) -> dict[str, Any]:
        graphs = list(self._costed_fns.values())
        sources = {g["source"] for g in graphs}
        source = next((s for s in (hlo_cost.XLA, hlo_cost.TEXT) if s in sources), hlo_cost.UNAVAILABLE)
        notes = sorted({g["note"] for g in graphs if g.get("note")})[:3]
        if not graphs:
            notes.append("no jitted function compiled during the session")
        return {"source": source, "scope": "per device (the compiled, partitioned program each device runs)",
                "method": "compiled.cost_analysis() (XLA HloCostAnalysis of the optimized program), once per jitted "
                          "function and signature, right after the call that compiled it (a cache hit), held "
                          "against the lowered HLO's dots and loops (a GPU's custom calls, a loop body counted "
                          "once: then counted from that HLO; flops_source); summed over the top-level jitted calls "
                          "of each step",
                "graphs": graphs[:20], "notes": notes}


def _partitions(compiled) -> int:
    """The devices a partitioned program is split across (its HLO before optimization is the global program): the
    devices of its inputs' and outputs' shardings where any is split, else 1 (every device runs the whole)."""
    try:
        found = [s for s in jax.tree_util.tree_leaves((compiled.input_shardings, compiled.output_shardings))
                 if hasattr(s, "device_set")]
        return max((len(s.device_set) for s in found if not s.is_fully_replicated), default=1)
    except Exception:
        return 1


def _cost_from_text(lowered, exc: Exception, partitions: int = 1) -> hlo_cost.GraphCost:
    why = f"XLA cost analysis unavailable ({type(exc).__name__}: {str(exc).splitlines()[0][:120] if str(exc) else ''})"
    try:
        text = lowered.as_text(dialect="hlo")
        cost = hlo_flops.text_cost(text, partitions)
        cost.note = f"{why}; {cost.note}"
        return cost
    except Exception:
        return hlo_cost.unavailable(why)
