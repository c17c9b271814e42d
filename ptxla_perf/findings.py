"""Rules: per-step records in, findings out. Backend-neutral; each rule is one function over the records."""
from __future__ import annotations

import os
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable

from .records import Event, Location, StepRecord

@dataclass
class Finding:
    kind: str
    severity: str  # info | warning | error
    message: str
    count: int
    location: Location | None = None
    evidence: dict[str, Any] = field(default_factory=dict)
    per_step: float | None = None
    steps: list[int] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["steps"] = d["steps"][:20]
        return d


def warmup_steps(steps: list[StepRecord], max_warmup: int = 5) -> int:
    """Leading steps until the first step after the first compile that compiled nothing (at most `max_warmup`
    steps from that first compile): their compiles are expected. Idle leading steps (a loader's first sync)
    belong to the warm-up too."""
    first = next((i for i, s in enumerate(steps) if s.compiles), None)
    if first is None:
        return 0
    for i in range(first, min(len(steps), first + max_warmup)):
        if steps[i].compiles == 0:
            return i
    return min(len(steps), first + max_warmup)


def _site(s: StepRecord) -> tuple:
    return (s.site.file, s.site.line) if s.site else ("?", 0)


def _first_location(events: Iterable[Event]) -> Location | None:
    return next((e.location for e in events if e.location), None)


def _by_location(events: list[Event]) -> dict[tuple, list[Event]]:
    groups: dict[tuple, list[Event]] = defaultdict(list)
    for e in events:
        key = (e.location.file, e.location.line) if e.location else ("?", 0)
        groups[key].append(e)
    return groups


def short_path(path: str) -> str:
    """Relative to the working directory when under it: messages stay readable, JSON keeps absolute paths."""
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return path if rel.startswith("..") else rel


def _where(loc: Location | None) -> str:
    return f" at {short_path(loc.file)}:{loc.line} ({loc.function})" if loc else ""


CAUSES = {  # cause (set by the adapter that diffed the graphs) -> what it means and what to do
    "input_shapes": "input shapes changed (pad or bucket them to a fixed set of sizes)",
    "input_dtypes": "input dtypes changed (cast inputs to one dtype before the step)",
    "constant": "a value is baked into the graph as a constant (e.g. indexing a device tensor with a changing "
                "Python int; use a tensor index or torch.index_select)",
    "static_argument": "a static argument changed value (make it a traced argument, or keep it to a few values)",
    "argument_structure": "the structure of the arguments changed (a different pytree / number of inputs)",
    "new_function_object": "a new jitted function object is created every step (jit it once, outside the loop)",
    "eager_op": "an op outside any jitted function compiles on its own (move it into the step function)",
    "graph_structure": "the traced graph changed (Python control flow or a changing number of ops)",
    "attributes": "an op attribute changed between steps",
}


def classify_compiles(steps: list[StepRecord], warmup: int):
    """Compiling steps by site: (after warm-up at a site that had compiled before = recompiles, first compile at
    a site after warm-up, compiles during warm-up). The one rule the summary and the findings share."""
    compiled_sites: set[tuple] = set()
    again: dict[tuple, list[StepRecord]] = defaultdict(list)
    new_sites: dict[tuple, StepRecord] = {}
    warm: dict[tuple, list[StepRecord]] = defaultdict(list)
    for s in steps:
        if not s.compiles:
            continue
        key = _site(s)
        if s.index < warmup:
            warm[key].append(s)
        elif key in compiled_sites:
            again[key].append(s)
        else:
            new_sites[key] = s
        compiled_sites.add(key)
    return again, new_sites, warm


def recompilation(steps: list[StepRecord], warmup: int) -> list[Finding]:
    out: list[Finding] = []
    by_site, new_sites, warm_compiles = classify_compiles(steps, warmup)
    site_events: dict[tuple, list[Event]] = defaultdict(list)
    for s in steps:  # an explanation seen on any step at the site (often a warm-up one) explains them all
        site_events[_site(s)].extend(e for e in s.events if e.kind == "compile")
    for key, hits in by_site.items():
        # the latest explanation is the steadiest one: the first graphs also differ by start-up work
        events = ([e for s in hits for e in s.events if e.kind == "compile"] or site_events[key])[::-1]
        special = [e for e in events if e.detail.get("special_scalars")]
        loc = _first_location(events) or hits[0].site
        n = sum(s.compiles for s in hits)
        seconds = sum(s.compile_time_s for s in hits)
        steady = max(1, len(steps) - warmup)
        evidence = {"site": _loc_json(hits[0].site), "compile_time_s": round(seconds, 4),
                    "graph_hashes": sorted({h for s in hits for h in s.graph_hashes})[:8]}
        explained = next((e for e in events if e.detail.get("differences")), None)
        if explained:
            evidence.update(cause=explained.detail.get("cause"), differences=explained.detail["differences"])
        if special and len(special) == len(events):
            out.append(Finding(
                "recompilation", "info",
                f"{n} extra compile(s) after warm-up{_where(loc)}: a Python scalar passed through 0 or 1, which "
                "torch_xla bakes into the graph as a constant. Harmless once; set XLA_NO_SPECIAL_SCALARS=1 to "
                "avoid it.", n, loc, evidence, n / steady, [s.index for s in hits]))
            continue
        cause = CAUSES.get(evidence.get("cause", ""), "the graph differs from the cached one")
        out.append(Finding(
            "recompilation", "warning",
            f"The step graph compiled {n} more time(s) after warm-up{_where(loc)} ({n / steady:.2f} per step, "
            f"{seconds:.2f} s compiling): {cause}.", n, loc, evidence, n / steady, [s.index for s in hits]))
    for key, s in new_sites.items():
        out.append(Finding(
            "new_graph", "info",
            f"A new graph was compiled after warm-up at step {s.index}{_where(s.site)} (first compile at that "
            f"site, {s.compile_time_s:.2f} s), e.g. the first evaluation step.", s.compiles, s.site,
            {"compile_time_s": round(s.compile_time_s, 4)}, None, [s.index]))
    for key, hits in warm_compiles.items():
        n = sum(s.compiles for s in hits)
        events = [e for s in hits for e in s.events if e.kind == "compile"]
        if n < 2 or not events:  # several graphs at one site is only worth a word when they really differ
            continue
        special = any(e.detail.get("special_scalars") for e in events)
        why = ("one because a value that was 0 or 1 (a warm-up learning rate, a fresh torch.zeros) is baked "
               "into the first graph as a constant and read from the device later (XLA_NO_SPECIAL_SCALARS=1 "
               "avoids it)") if special else (
            f"the graphs differ ({'; '.join(events[0].detail.get('differences', [])[:2]) or events[0].detail.get('cause')})")
        out.append(Finding(
            "warmup_compiles", "info",
            f"{n} graphs compiled during the {warmup} warm-up step(s){_where(hits[0].site)}: "
            f"{why}. Expected; they are excluded from step time.", n, _first_location(events) or hits[0].site,
            {"differences": [d for e in events for d in e.detail.get("differences", [])][:6],
             "special_scalars": special, "compile_time_s": round(sum(s.compile_time_s for s in hits), 4)},
            None, [s.index for s in hits]))
    return out


def _loc_json(loc: Location | None) -> dict | None:
    return asdict(loc) if loc else None


def _event_findings(steps: list[StepRecord], kind: str, counted: Counter, make_message) -> list[Finding]:
    """Group a kind's events by user line; if the count says it happened but no attribution step saw it,
    still report it, without a line."""
    events = [e for s in steps for e in s.events if e.kind == kind]
    n_steps = max(1, len(steps))
    out = []
    groups = _by_location(events)
    step_of = {id(e): s.index for s in steps for e in s.events}
    for key, evs in groups.items():
        loc = evs[0].location
        hit_steps = sorted({step_of[id(e)] for e in evs})
        detail = _merge_details(evs)
        out.append((loc, detail, hit_steps))
    total = sum(counted.values())
    findings = []
    if not out and total:
        hit_steps = sorted(counted)
        findings.append(make_message(None, {}, hit_steps, total, total / n_steps))
        return findings
    share = total / max(1, sum(len(d["_events"]) for _, d, _ in out))
    for loc, detail, hit_steps in out:
        n = max(len(detail["_events"]), round(len(detail["_events"]) * share))
        detail.pop("_events")
        findings.append(make_message(loc, detail, hit_steps, n, n / n_steps))
    return findings


def _merge_details(events: list[Event]) -> dict[str, Any]:
    detail: dict[str, Any] = {"_events": events}
    calls = Counter(e.detail.get("call") for e in events if e.detail.get("call"))
    if calls:
        detail["calls"] = dict(calls)
    for key in ("via", "shapes", "bytes", "ops", "dtype"):
        vals = [e.detail[key] for e in events if key in e.detail]
        if vals:
            detail[key] = vals[0]
    return detail


def device_to_host_sync(steps: list[StepRecord]) -> list[Finding]:
    counted = Counter({s.index: s.device_to_host.count for s in steps if s.device_to_host.count})
    fallback_steps = {s.index for s in steps if s.fallback_ops}
    counted = Counter({k: v for k, v in counted.items() if k not in fallback_steps or v > 1})
    repeated = len(counted) >= 2

    def make(loc, detail, hit_steps, n, per_step):
        calls = ", ".join(detail.get("calls", {})) or "a host read"
        sev = "warning" if repeated else "info"
        advice = detail.pop("advice", None) or ("Keep values on the device and read them every N steps (torch_xla: "
                                                "xm.add_step_closure; JAX: after the loop or every N steps).")
        msg = (f"Device-to-host sync{_where(loc)}: {calls} copies a tensor to the host {per_step:.2f} times per "
               f"step, stalling the host until the device finishes. {advice}")
        if loc is None:
            msg += " (the line was not caught by an attribution step; rerun with attribution.mode=always)"
        bytes_ = sum(s.device_to_host.bytes or 0 for s in steps)
        detail.update(bytes_total=bytes_, steps_with_sync=len(counted))
        return Finding("device_to_host_sync", sev, msg, n, loc, detail, per_step, hit_steps)
    return _event_findings(steps, "device_to_host_sync", counted, make)


def op_fallback(steps: list[StepRecord]) -> list[Finding]:
    totals: Counter = Counter()
    for s in steps:
        totals.update(s.fallback_ops)
    if not totals:
        return []
    n_steps = max(1, len(steps))
    events = [e for s in steps for e in s.events if e.kind == "op_fallback"]
    out = []
    for op, n in totals.most_common():
        ev = [e for e in events if op in e.detail.get("ops", [])]
        loc = _first_location(ev)
        steps_hit = [s.index for s in steps if op in s.fallback_ops]
        out.append(Finding(
            "op_fallback", "warning",
            f"{op} ran on the CPU (no XLA lowering){_where(loc)}: {n / n_steps:.2f} times per step, each one "
            "copying its inputs to the host and back. Replace it with a lowered op (e.g. masks instead of "
            "nonzero/boolean indexing) or move it out of the step.", n, loc,
            {"op": op, "calls": dict(Counter(e.detail.get("call") for e in ev)) if ev else {}}, n / n_steps,
            steps_hit))
    return out


def split_iterations(steps: list[StepRecord]) -> list[Finding]:
    """Several sync sites taking turns in a fixed cycle (A B A B ...): the loop syncs more than once per
    iteration, so each iteration runs as several graphs. The last site of the cycle is the iteration's own."""
    seq = [_site(s) for s in steps if s.site]
    if len(seq) < 6 or len({s.phase for s in steps}) > 1:
        return []
    counts = Counter(seq)
    if len(counts) < 2 or len(counts) > 4:
        return []
    period = len(counts)
    cycle = seq[:period]
    if len(set(cycle)) != period or any(seq[i] != cycle[i % period] for i in range(len(seq))):
        return []
    iterations = len(seq) // period
    out = []
    by_key = {_site(s): s.site for s in steps if s.site}
    for key in cycle[:-1]:
        loc = by_key[key]
        out.append(Finding(
            "graph_break", "warning",
            f"A sync{_where(loc)} runs inside every iteration, before the iteration's own sync at "
            f"{short_path(by_key[cycle[-1]].file)}:{by_key[cycle[-1]].line}: each iteration executes as {period} graphs "
            "instead of one (more launches, lost fusion). Remove it, or sync once per iteration.",
            iterations, loc, {"sites_per_iteration": period, "cycle": [_loc_json(by_key[k]) for k in cycle]},
            1.0, [s.index for s in steps if _site(s) == key][:20]))
    return out


def graph_break(steps: list[StepRecord]) -> list[Finding]:
    counted = Counter()
    for s in steps:
        extra = s.executions - max(1, s.mark_steps) - s.device_to_host.count
        if extra > 0 and not s.fallback_ops:
            counted[s.index] = extra
    if len(counted) < 2 and not any(e.kind == "graph_break" for s in steps for e in s.events):
        return []

    def make(loc, detail, hit_steps, n, per_step):
        return Finding(
            "graph_break", "warning",
            f"The pending graph was executed early{_where(loc)} ({per_step:.2f} extra executions per step): the "
            "step runs as several smaller graphs, each a launch and a lost fusion. Move the call out of the "
            "step or after torch_xla.sync().", n, loc, detail, per_step, hit_steps)
    return _event_findings(steps, "graph_break", counted, make)


def host_to_device_transfer(steps: list[StepRecord]) -> list[Finding]:
    counted = Counter({s.index: 1 for s in steps if any(e.kind == "host_to_device_transfer" for e in s.events)})

    def make(loc, detail, hit_steps, n, per_step):
        return Finding(
            "host_to_device_transfer", "warning",
            f"Host data passed into a compiled call{_where(loc)} is copied to the device implicitly "
            f"({per_step:.2f} times per step). Put parameters and state on the device once (jax.device_put) "
            "and keep them there.", n, loc, detail, per_step, hit_steps)
    return _event_findings(steps, "host_to_device_transfer", counted, make)


def compile_time(steps: list[StepRecord], warmup: int) -> list[Finding]:
    total = sum(s.wall_time_s for s in steps)
    comp = sum(s.compile_time_s for s in steps)
    if not total or not comp:
        return []
    share = comp / total
    return [Finding(
        "compile_time", "info",
        f"Compiling took {comp:.2f} s of {total:.2f} s ({share:.0%}) across {sum(s.compiles for s in steps)} "
        f"compile(s); step-time statistics exclude the {warmup} warm-up step(s) so compile time is not "
        "mistaken for step time.", sum(s.compiles for s in steps), None,
        {"compile_time_s": round(comp, 4), "wall_time_s": round(total, 4), "share": round(share, 4)})]


def no_steps(steps: list[StepRecord]) -> list[Finding]:
    if steps:
        return []
    return [Finding(
        "no_steps", "warning",
        "No step boundary was seen in this process, so there is nothing per step to report. torch_xla: the "
        "loop never called torch_xla.sync() / xm.mark_step() here (work launched in xmp.spawn children or "
        "through torch.compile is not seen: use the Session API inside the spawned function); JAX: no "
        "StepTraceAnnotation and no jitted function called twice from the same line.", 0)]


def analyze(steps: list[StepRecord], max_warmup: int = 5, expect_steps: bool = True
            ) -> tuple[int, list[Finding]]:
    warmup = warmup_steps(steps, max_warmup)
    findings = (recompilation(steps, warmup) + device_to_host_sync(steps) + op_fallback(steps)
                + graph_break(steps) + split_iterations(steps) + host_to_device_transfer(steps)
                + compile_time(steps, warmup) + (no_steps(steps) if expect_steps else []))
    order = {"error": 0, "warning": 1, "info": 2}
    findings.sort(key=lambda f: (order[f.severity], -f.count))
    return warmup, findings
