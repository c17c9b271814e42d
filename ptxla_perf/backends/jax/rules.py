"""JAX's own rule: ops run outside any jitted function compile on first use, per user line (`eager:<line>`
graph identities, which only the JAX adapter makes). It lives with the adapter that owns the concept; the
analysis runs it beside the backend-neutral rules (`Adapter.rules`). Pure logic: no JAX import."""
from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass
from typing import Any, Mapping

from ...analysis import compiles as C
from ...analysis import iterations as I
from ...model.finding import Evidence
from ...rules.iteration import Context, Finding, Rule, phase_lengths
from ...rules.iteration import where as _at
from ...model.thresholds import value as threshold

ADVICE = "Move the ops into a jitted function if they run every step."


class EagerCompile(Rule):
    kind = "eager_compile"

    def run(self, ctx: Context) -> list[Finding]:
        wall = I.total(ctx.with_tail, "wall_time_s") or 1.0
        groups = [us for key, us in ctx.by_key.items() if key.eager]
        return _eager(groups, phase_lengths(ctx.with_tail, raw=True), wall, ctx.advice)


RULES = (EagerCompile(),)


@dataclass
class EagerLineEvidence(Evidence):
    """eager_compile (warning): a line whose eager ops compile in most training iterations: its graph key, the
    compile seconds, the ops compiled most."""

    key: str
    compile_time_s: float
    ops: dict[str, int]


@dataclass
class EagerFirstUseEvidence(Evidence):
    """eager_compile (info): first uses everywhere else, summed up: the compile seconds, the lines (most compiles
    first), the ops, the iterations they came in, the lines first run inside training iterations."""

    compile_time_s: float
    lines: list[dict[str, Any]]
    ops: dict[str, int]
    iterations: int
    in_training_loop: list[dict[str, Any]]


def _eager(groups: list[list[C.CompileUnit]], phase_len: Counter, wall: float, advice: Mapping[str, str]
           ) -> list[Finding]:
    """Eager (JAX) compiles, per user line: a line whose ops compile in most training iterations is a warning;
    first uses everywhere else are summed up in one info finding."""
    out: list[Finding] = []
    first_use: list[list[C.CompileUnit]] = []
    for us in groups:
        hits = sorted({u.position for u in us if u.phase == I.TRAIN})
        n, seconds = sum(u.count for u in us), sum(u.seconds for u in us)
        if not (len(hits) >= threshold("eager_recurring_min_hits")
                and len(hits) >= threshold("recurring_share") * max(1, phase_len[I.TRAIN])):
            first_use.append(us)
            continue
        loc = us[0].location
        out.append(Finding(
            "eager_compile", "warning",
            f"Ops outside any jitted function{_at(loc)} compile in {len(hits)} training iterations ({n} compiles, "
            f"{seconds:.2f} s = {seconds / wall:.0%} of the run's wall time): new shapes reach eager ops every step. "
            f"{advice.get('eager_compile', '')}".strip(), n, loc,
            EagerLineEvidence(str(us[0].key), round(seconds, 4), _ops(us)),
            n / max(1, phase_len[I.TRAIN]), [u.iteration for u in us]))
    if first_use:
        units = [u for us in first_use for u in us]
        n, seconds = sum(u.count for u in units), sum(u.seconds for u in units)
        first_use.sort(key=lambda us: -sum(u.count for u in us))
        loc = first_use[0][0].location
        lines = [{"line": us[0].location.line, "function": us[0].location.function, "compiles": sum(u.count for u in us)}
                 for us in first_use if us[0].location][:10]
        # lines first run during training iterations are inside the loop: their ops dispatch one by one each time
        # they run (how often is not measured: only the first use compiles)
        in_loop = [us[0].location for us in first_use if us[0].location and any(u.phase == I.TRAIN for u in us)]
        msg = (f"{n} op(s) outside any jitted function compiled on first use, on {len(first_use)} line(s) (most"
               f"{_at(loc)}), {seconds:.2f} s in all: each eager op compiles once per shape and is cached after "
               "that, so the compiles are expected.")
        if in_loop:
            where = ", ".join(f"{os.path.basename(x.file)}:{x.line}" for x in in_loop[:4])
            msg += (f" {len(in_loop)} of these line(s) first ran inside training iterations ({where}): their ops "
                    "run unfused, one dispatch each, every time the line runs (how often was not measured). "
                    f"{advice.get('eager_compile', ADVICE)}")
        out.append(Finding(
            "eager_compile", "info", msg, n, loc,
            EagerFirstUseEvidence(round(seconds, 4), lines, _ops(units), len({u.iteration for u in units}),
                                  [{"file": x.file, "line": x.line} for x in in_loop[:10]]),
            None, sorted({u.iteration for u in units})))
    return out


def _ops(units: list[C.CompileUnit]) -> dict[str, int]:
    return dict(Counter(op for u in units for e in u.evidence for op in e.detail.ops).most_common(8))

