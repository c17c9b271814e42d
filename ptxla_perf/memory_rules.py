"""Memory rules: `memory_growth` (live device values grow step over step), `missing_donation` (JAX: a step's outputs
replace its inputs without donation, so both are held at once), and `memory_headroom` (the largest graph's peak
close to a known device capacity: built with the report's `memory` section, which knows the capacity).

Registered beside findings.RULES by the session (`session.analysis`); figures from memory.py, thresholds from
thresholds.py, advice in the backend's words from the adapter (`advice["memory_growth"]`, ...)."""
from __future__ import annotations

from typing import Any

from . import fmt
from . import memory as M
from .findings import Context, Finding, Rule, where
from .thresholds import value as threshold
from .frames import is_user_file
from .records import Location

GENERIC = {
    "memory_growth": "Keep Python numbers, not device values, across steps (read them every N steps), or "
                     "accumulate on the device into one value; drop references to old step outputs.",
    "missing_donation": "Donate the buffers the step replaces.",
    "memory_headroom": "Reduce the batch size or the activations (rematerialisation), or shard the state.",
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
            per, [s.index for s in ctx.train[ctx.warmup:] if s.live_arrays is not None][:20])]


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
                f"{call}{where(e.location)} returns {d.extra.get('arrays', '?')} arrays that replace its inputs of the "
                f"same shapes ({fmt.nbytes(b)}), and donates none: during each call the old and the new values are "
                f"both on the device, {fmt.nbytes(b)} held twice at the step's peak. {advice}",
                1, e.location, {"call": call, "bytes": b, "arrays": d.extra.get("arrays"),
                                "shapes": d.shapes or [], "argument": d.extra.get("argument")},
                None, [step]))
        return out


RULES = (MemoryGrowth(), MissingDonation())


def headroom(sec: dict[str, Any] | None, advice: dict[str, str]) -> list[Finding]:
    """`memory_headroom`: the largest graph's peak (or the runtime's own peak in use) leaves less than
    `memory_headroom_share` of a known capacity free."""
    if not sec or sec.get("headroom_share") is None:
        return []
    share = sec["headroom_share"]
    if share >= threshold("memory_headroom_share"):
        return []
    cap = sec["capacity"]
    need = cap["bytes"] - sec["headroom_bytes"]
    bufs = M.top_buffers(sec)
    over = share < 0
    msg = (f"The step graph {sec.get('largest_graph')} needs {M.fmt_gib(need)} GiB at its peak "
           f"({'more than' if over else 'within ' + fmt.pct(max(share, 0.0))  + ' of'} the {M.fmt_gib(cap['bytes'])} "
           f"GiB of {cap.get('name') or 'the device'}, {cap['source']}): arguments {fmt.nbytes(sec.get('argument_bytes'))}, "
           f"temporaries {fmt.nbytes(sec.get('temp_bytes'))}. "
           + (f"Its largest buffers: {M.buffers_text(bufs)}. " if bufs else "")
           + ("It does not fit. " if over else "A larger batch or a longer sequence will not fit. ")
           + (advice.get("memory_headroom") or GENERIC["memory_headroom"]))
    return [Finding("memory_headroom", "warning", msg, 1, _line_of(bufs),
                    {"peak_bytes": sec.get("peak_bytes"), "capacity_bytes": cap["bytes"],
                     "capacity_source": cap["source"], "headroom_bytes": sec["headroom_bytes"],
                     "headroom_share": round(share, 4), "graph": sec.get("largest_graph"), "largest_buffers": bufs})]


def _line_of(rows: list[dict[str, Any]]):
    """The user's line of the largest buffer that has one (a temporary an op of the step made), else None."""
    loc = next((r["location"] for r in rows if r.get("location") and r.get("kind") != "parameter"
                and is_user_file(r["location"]["file"])), None)
    return Location(loc["file"], int(loc["line"]), loc.get("function") or "?") if loc else None


def join_oom(f: Finding, sec: dict[str, Any]) -> None:
    """An `oom` finding (oom.py) joined with what the run measured before it died: the largest graph's peak and
    whether live device memory grew step over step (and what held it)."""
    live = sec.get("live") or {}
    bufs = M.top_buffers(sec)
    f.evidence["memory"] = {"largest_graph": sec.get("largest_graph"), "peak_bytes": sec.get("peak_bytes"),
                            "arrays_per_step": live.get("arrays_per_step"),
                            "bytes_per_step": live.get("bytes_per_step"), "largest_buffers": bufs}
    if bufs:
        f.message += (f" The largest step graph measured before it died ({sec.get('largest_graph')}, peak "
                      f"{fmt.nbytes(sec.get('peak_bytes'))}) holds at its peak: {M.buffers_text(bufs)}.")
    if live and M.grows(live):
        held = live.get("holder") or {}
        line = held.get("location") or {}
        f.message += (f" Before it died, live device memory grew every step (+{live['arrays_per_step']:.2f} arrays"
                      + (f", {fmt.nbytes(live['bytes_per_step'])}" if live.get("bytes_per_step") is not None else "")
                      + " per step" + (f", held by `{held['holder']}` at line {line.get('line')}" if held.get("holder")
                                      else "") + "): see memory_growth.")
