"""Memory rules (iteration scope): `memory_growth` (live device values grow step over step) and `missing_donation`
(JAX: a step's outputs replace its inputs without donation, so both are held at once). `memory_headroom` is judged
when the run ends, with the report's `memory` section that knows the capacity (rules/end.py).

Run with findings.RULES by the analysis (`findings.ITERATION_RULES`); figures from memory.py, thresholds from
thresholds.py, advice in the backend's words from the adapter (`advice["memory_growth"]`, ...)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..model import fmt
from ..analysis import memory as M
from ..model.thresholds import value as threshold
from ..model.finding import Cost, Evidence, Finding, Rule, where

# `Context` in the annotations is rules/iteration.py's (which runs these rules): not imported, findings imports us

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
        cap = ctx.capacity or {}
        projected, costly, against = projection(_rate(b, per, holder), cap.get("bytes"), _source(cap))
        if known and costly:
            tail = ((f"At this rate a {int(threshold('memory_growth_run_steps')):,}-step run keeps "
                     f"{fmt.nbytes(projected)} more, {against}. " if projected is not None else "")
                    + f"Whatever a step keeps stays on the device until the run runs out of memory. {advice}")
        elif known:
            tail = (f"At this rate a {int(threshold('memory_growth_run_steps')):,}-step run keeps "
                    f"{fmt.nbytes(projected)} more, {against}: small, but it is kept on the device all the same. "
                    f"{advice}")
        else:
            tail = ("No list, dict or other container in the program's frames was found holding them: what keeps "
                    "them is not known (it may be the framework's own bookkeeping); check the device's memory in use "
                    "(memory_stats on TPU/GPU) over a longer run before acting.")
        return [Finding(
            "memory_growth", "warning" if known and costly else "info",
            f"Live device {'memory grows' if known else 'tensors/arrays rise'} every step{where(loc if known else None)}: "
            f"+{what} per step over {n_steps} steps after warm-up, rising at {g['rising_share']:.0%} of the samples."
            f"{held} {tail}",
            max(1, round(per * n_steps)), loc if known else None,
            GrowthEvidence(known, round(per, 3), b, int(projected) if projected is not None else None,
                           int(threshold("memory_growth_run_steps")), g["samples"], g.get("live_arrays"),
                           g.get("live_bytes"), cap.get("bytes"), cap.get("source") or "unknown", holder),
            per, [s.index for s in ctx.train[ctx.warmup:] if s.live_arrays is not None][:20],
            cost=Cost(bytes_per_step=b))]


def _rate(measured: float | None, arrays_per_step: float, holder: dict[str, Any]) -> float | None:
    """Bytes a step keeps, for rating: the measured rise of all live bytes, or the held values' size times the
    arrays added a step where that is less. The measured rise includes whatever step output happened to be in
    flight at the last sample (one set of parameters over a dozen steps: hundreds of bytes a step on a loop that
    keeps two scalars), which only the holder's own items tell apart."""
    per_item = holder.get("bytes_per_item")
    held = arrays_per_step * per_item if per_item else None
    if measured is None or held is None:
        return measured if held is None else held
    return min(measured, held)


_SOURCES = {"user": "--device-memory-gb", "runtime": "the runtime's figure", "table": "the spec table"}


def _source(cap: dict[str, Any]) -> str | None:
    """Where a capacity came from, in words (memory.capacity's `source`, with the device's name where known)."""
    src = _SOURCES.get(cap.get("source") or "")
    if not src or not cap.get("bytes"):
        return None
    name = cap.get("name")
    if cap.get("kind") == "allocator_limit":  # not the device's memory: the allocator's share of it
        src = "the runtime's allocator limit"
    return f"{name}, {src}" if name and cap.get("source") != "user" else src


def projection(bytes_per_step: float | None, capacity_bytes: int | None = None, source: str | None = None
               ) -> tuple[float | None, bool, str]:
    """What a growth costs: (bytes kept over a run of `memory_growth_run_steps`, whether that is worth a warning,
    what it was compared with). Against a known capacity (the memory section's, `source` saying where from: the
    user's --device-memory-gb / roofline.device_memory_gb, the runtime's memory figure on TPU/GPU, the spec
    table): `memory_growth_capacity_share` of it; unknown (a CPU without an override): `memory_growth_min_bytes`.
    Bytes unknown: costly (a rise in device values with a named holder is the program's own, and nothing says it
    is small)."""
    if bytes_per_step is None:
        return None, True, "its size unknown"
    projected = max(bytes_per_step, 0.0) * threshold("memory_growth_run_steps")
    if capacity_bytes:
        limit = threshold("memory_growth_capacity_share") * capacity_bytes
        return projected, projected >= limit, (f"{projected / capacity_bytes:.2%} of the device's "
                                               f"{fmt.nbytes(capacity_bytes)}" + (f" ({source})" if source else ""))
    limit = threshold("memory_growth_min_bytes")
    return projected, projected >= limit, f"below the {fmt.nbytes(limit)} that would matter on any accelerator"


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
                1, e.location, DonationFindingEvidence(call, b, d.arrays, d.shapes or [], d.argument),
                None, [step]))
        return out


@dataclass
class GrowthEvidence(Evidence):
    """memory_growth's evidence: the growth per step, what a long run would keep, the capacity it was rated against
    (the memory section's, and where it came from) and what holds the arrays (live_holders.py's keys, in the JSON
    beside these)."""

    holder_found: bool
    arrays_per_step: float
    bytes_per_step: int | None
    projected_bytes: int | None
    projected_steps: int
    samples: int
    live_arrays: Any
    live_bytes: Any
    capacity_bytes: int | None
    capacity_source: str
    holder: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"holder_found": self.holder_found, "arrays_per_step": self.arrays_per_step,
                "bytes_per_step": self.bytes_per_step, "projected_bytes": self.projected_bytes,
                "projected_steps": self.projected_steps, "samples": self.samples, "live_arrays": self.live_arrays,
                "live_bytes": self.live_bytes, "capacity_bytes": self.capacity_bytes,
                "capacity_source": self.capacity_source,
                **{k: v for k, v in self.holder.items() if k not in ("location", "capacity_bytes")}}


@dataclass
class DonationFindingEvidence(Evidence):
    """missing_donation's evidence: the call, the bytes held twice, its arrays and their shapes, the argument."""

    call: str
    bytes: int
    arrays: int | None
    shapes: list
    argument: Any


RULES = (MemoryGrowth(), MissingDonation())
