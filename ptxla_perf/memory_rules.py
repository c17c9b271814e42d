"""Memory rules (iteration scope): `memory_growth` (live device values grow step over step) and `missing_donation`
(JAX: a step's outputs replace its inputs without donation, so both are held at once). `memory_headroom` is judged
when the run ends, with the report's `memory` section that knows the capacity (end_rules.py).

Run with findings.RULES by the analysis (`findings.ITERATION_RULES`); figures from memory.py, thresholds from
thresholds.py, advice in the backend's words from the adapter (`advice["memory_growth"]`, ...)."""
from __future__ import annotations

from typing import Any

from . import fmt
from . import memory as M
from .verdicts import Cost, Finding, Rule, where

# `Context` in the annotations is findings.py's (which runs these rules): not imported, findings imports us

GENERIC = {
    "memory_growth": "Keep Python numbers, not device values, across steps (read them every N steps), or "
                     "accumulate on the device into one value; drop references to old step outputs.",
    "missing_donation": "Donate the buffers the step replaces.",
}


def live(ctx: Context) -> dict[str, Any] | None:
    """The run's live-memory growth (memory.live_figures) from the context's iterations."""
    return M.live_figures(ctx.train, ctx.warmup, ctx.iterations)


class MemoryGrowth(Rule):
    kind = "memory_growth"

    def run(self, ctx: Context) -> list[Finding]:
        g = live(ctx)
        if not M.grows(g):
            return []
        holder = g.get("holder") or {}
        loc = M.location_of(holder)
        n_steps = g["last_step"] - g["first_step"]
        per = g["arrays_per_step"]
        b = g.get("bytes_per_step")
        what = f"{per:.2f} device arrays" + (f" ({fmt.nbytes(b)})" if b is not None else "")
        held = (f" A {holder.get('call', 'container')} `{holder['holder']}` holds {holder['items']} device values "
                f"({fmt.nbytes(holder['bytes'])}, shapes {', '.join(holder.get('shapes') or [])})."
                if holder.get("holder") else
                f" A {holder.get('call')} holds {holder['items']} device values ({fmt.nbytes(holder['bytes'])})."
                if holder.get("items") else "")
        advice = ctx.advice.get("memory_growth") or GENERIC["memory_growth"]
        # a warning only with the program's own evidence: a container in its frames that holds the values. Without
        # one the count may be the framework's own bookkeeping (torch_xla SPMD: one more tensor per mark_sharding
        # call, measured in a plain run too), so the finding says what is unknown and stays info.
        known = bool(holder.get("holder"))  # a named container in the user's frames (an anonymous dict is no evidence)
        tail = (f"Whatever a step keeps stays on the device until the run runs out of memory. {advice}" if known else
                "No list, dict or other container in the program's frames was found holding them: what keeps them "
                "is not known (it may be the framework's own bookkeeping); check the device's memory in use "
                "(memory_stats on TPU/GPU) over a longer run before acting.")
        return [Finding(
            "memory_growth", "warning" if known else "info",
            f"Live device {'memory grows' if known else 'tensors/arrays rise'} every step{where(loc if known else None)}: "
            f"+{what} per step over {n_steps} steps after warm-up, rising at {g['rising_share']:.0%} of the samples."
            f"{held} {tail}",
            max(1, round(per * n_steps)), loc if known else None,
            {"holder_found": known, "arrays_per_step": round(per, 3), "bytes_per_step": b, "samples": g["samples"],
             "live_arrays": g.get("live_arrays"), "live_bytes": g.get("live_bytes"),
             **{k: v for k, v in holder.items() if k not in ("location",)}},
            per, [s.index for s in ctx.train[ctx.warmup:] if s.live_arrays is not None][:20],
            cost=Cost(bytes_per_step=b))]


class MissingDonation(Rule):
    """The adapter saw a step function's outputs come back as its inputs with nothing donated (JAX:
    `missing_donation` events, once per function and compile)."""

    kind = "missing_donation"

    def run(self, ctx: Context) -> list[Finding]:
        seen: dict[str, tuple[int, Any]] = {}
        for s in ctx.iterations:
            for e in s.events:
                if e.kind == "missing_donation":
                    seen.setdefault(e.detail.call or "?", (s.index, e))
        out = []
        for call, (step, e) in seen.items():
            d = e.detail
            b = d.bytes or 0
            advice = ctx.advice.get("missing_donation") or GENERIC["missing_donation"]
            out.append(Finding(
                "missing_donation", "info",
                f"{call}{where(e.location)} returns {d.arrays if d.arrays is not None else '?'} arrays that replace its inputs of the "
                f"same shapes ({fmt.nbytes(b)}), and donates none: during each call the old and the new values are "
                f"both on the device, {fmt.nbytes(b)} held twice at the step's peak. {advice}",
                1, e.location, {"call": call, "bytes": b, "arrays": d.arrays,
                                "shapes": d.shapes or [], "argument": d.argument},
                None, [step]))
        return out


RULES = (MemoryGrowth(), MissingDonation())
