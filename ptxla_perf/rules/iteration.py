"""Rules of the iteration scope: iterations in, findings out - backend-neutral, one analysis pass.

`analyze(boundaries, advice=..., rules=...)` groups the adapter's boundary records into iterations
(iterations.py), classifies every compile against its own graph identity (compiles.py), derives the figures once
(figures.py) and runs every iteration-scope rule on the result; the report only assembles what it returns. A
live session and `report.build` both call it, so both run the same rules.

Each rule is a small object in the model of torch.profiler's pattern matcher (verdicts.Rule): one finding `kind`,
its `scope`, what data it `needs` (a rule whose needs are not met is listed in the report as not judged, never
silently absent), and `run(ctx) -> findings`. `ITERATION_RULES` is the backend-neutral list (these and
rules/memory.py's); an adapter's own come in through the context (`Adapter.rules` -> `Context.backend_rules`);
registry.py lists every scope. Thresholds are thresholds.py's. Severity policy (docs/report.md): `warning` =
costs time every step or keeps recurring, with its measured cost (`Finding.cost`); `info` explains (one-offs,
warm-up, amortised reads every N steps); `error` only for a run we stopped (rules/end.py). Backend-specific advice
comes from the adapter (`advice[kind]`).
"""
from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Callable, Iterable, Mapping, Sequence

from ..analysis import breakdown as B
from ..analysis import compiles as C
from . import control_flow
from ..config import MAX_WARMUP
from ..analysis import iterations as I
from ..analysis.figures import NET_OF_COMPILE, Figures, basis, series, steady_steps
from ..model import fmt
from ..model.fmt import ms as _ms
from . import memory as memory_rules
from ..model.faults import guarded
from .end import run_end  # noqa: F401 - the run-end scope's entry point (session_report calls it)
from ..analysis.pacing import spread
from ..model.records import Event, Location, StepRecord
from ..model.thresholds import value as threshold
from typing import TYPE_CHECKING
if TYPE_CHECKING:
    from ..analysis.fold import Folded
from . import transfer_origin
from .evidence import (ClosureReadEvidence, HostReadEvidence, RecompileEvidence, SeenCalls, UploadEvidence,
                       WarmupEvidence)
from ..model.finding import Cost, Finding, Rule, run as run_rules, short_path, where  # noqa: F401 - Finding, Rule,
#                                                                  short_path and where: the backends' rules import them here
from ..model.finding import Evidence

GENERIC_ADVICE = {
    "device_to_host_sync": "Keep values on the device and read them every N steps, or after the loop.",
    "graph_break": "Move the sync out of the step: one sync per iteration.",
    "early_execution": "Move the call out of the step, or after the step's own sync.",
    "host_to_device_transfer": "Put parameters and state on the device once and keep them there.",
    "special_scalars": "",
    "op_fallback": "Replace it with an op the device supports (e.g. masks instead of nonzero/boolean indexing) "
                   "or move it out of the step.",
    "closure_read": "",
    "input_pipeline": "",
    "no_steps": "",
    "input_bound": "Prefetch batches ahead of the step (loader workers, a device prefetcher) and move per-batch "
                   "host work (decoding, augmentation) out of the loop or cache it.",
    # a read whose value decides control flow (control_flow.py): deferring the read does not fit, the decision moves
    "control_flow_skip": "Keep the decision on the device: run the step every time and make its effect "
                         "conditional (a masked update: `where(ok, new, old)`, or a 0/1 device flag multiplying "
                         "the loss or the update), so no step waits for the value.",
    "control_flow_stop": "Keep the condition on the device (a flag tensor: `stop = stop | (loss > limit)`) and read "
                         "it every N steps, stopping at most N steps late.",
    "control_flow_branch": "Keep the decision on the device: compute both sides and select with `where`, or read "
                           "the value every N steps if the branch may lag.",
    "host_bound": "Move per-step Python work out of the step (precompute it, vectorise it, or do it every N steps) "
                  "so that the host keeps ahead of the device.",
    "launch_bound": "Do more work per launch: a larger batch, several steps per compiled call, fewer syncs per "
                    "step.",
}


@dataclass
class Context:
    """What every rule reads: the iterations, their compile classes and their figures (no findings yet)."""

    boundaries: list[StepRecord]  # as the adapter reported them
    iterations: list[StepRecord]
    with_tail: list[StepRecord]  # the iterations and the work after the last boundary (compiles only)
    train: list[StepRecord]
    warmup: int
    by_key: dict[C.GraphKey, list[C.CompileUnit]]
    figures: Figures
    advice: Mapping[str, str]
    expect_steps: bool
    attribution: bool  # line attribution ran (the adapter's mode is not "off")
    backend_rules: Sequence[Rule] = ()  # the adapter's own rules (Adapter.rules), run beside ITERATION_RULES
    # the device's memory as the memory section knows it (memory.capacity: {bytes, source, name, detail}), derived
    # once by the session; None where nobody derived it (an offline `report.build` without a memory section)
    capacity: dict[str, Any] | None = None


@dataclass
class Analysis:
    """Everything the report says about the steps, computed once."""

    iterations: list[StepRecord]
    train: list[StepRecord]  # training iterations (the report's step count)
    warmup: int  # leading training iterations that hold warm-up compiles
    steady: list[StepRecord]  # training iterations that time the loop as it runs
    units: list[C.CompileUnit]
    findings: list[Finding]
    figures: Figures
    judged: list[str] = field(default_factory=list)  # rule kinds run
    not_judged: list[dict[str, str]] = field(default_factory=list)  # {"kind", "reason"}

    @property
    def recompiles(self) -> int:
        return sum(u.count for u in self.units if u.klass == C.RECOMPILE)


def _loc_json(loc: Location | None) -> dict | None:
    return asdict(loc) if loc else None


CAUSES = {  # cause (from a compile's own evidence) -> what it means and what to do
    "input_shapes": "input shapes changed (pad or bucket them to a fixed set of sizes; a smaller last batch: drop "
                    "it or pad it)",
    "input_dtypes": "input dtypes changed (cast inputs to one dtype before the step)",
    "constant": "a Python value that changes between steps is baked into the graph as a constant (an int "
                "index t[i], an exponent, a size; pass it as a device tensor, or index with a tensor)",
    "special_scalar": "a Python scalar passed through 0 or 1, which is baked into the graph as a constant",
    "static_argument": "a static argument changed value (make it a traced argument, or keep it to a few values)",
    "argument_structure": "the argument structure changed (a different number of inputs / pytree)",
    "new_function_object": "a new jitted function object is created every step (jit it once, outside the loop)",
    "graph_structure": "the traced graph changed (Python control flow or a changing number of ops)",
    "attributes": "an op attribute changed between steps",
    "internal_shapes": "shapes inside the graph changed while its inputs kept theirs: a size computed in Python (a "
                       "resize's output size, a view or slice by a computed length) is part of the graph, so each "
                       "new size compiles a new graph (keep the sizes to a few fixed values; each compiles once)",
}


# --- steps ----------------------------------------------------------------------------------------------------
def _warmup(train: list[StepRecord], units: list[C.CompileUnit], max_warmup: int) -> int:
    """Leading training iterations that each hold a first or warm-up compile of a training key."""
    start = {u.position for u in units if u.phase == I.TRAIN and u.klass in (C.NEW, C.WARMUP)}
    k = 0
    while k in start and k < min(max_warmup, len(train)):
        k += 1
    return k


# --- compiles -------------------------------------------------------------------------------------------------
def _compile_scope(ctx: Context) -> tuple[float, Counter]:
    """Compiles are judged over the iterations and the work after the last one: its wall time, iterations per
    phase."""
    return I.total(ctx.with_tail, "wall_time_s") or 1.0, phase_lengths(ctx.with_tail, raw=True)


def phase_lengths(its: list[StepRecord], raw: bool = False) -> Counter:
    """Iterations per phase (None counted as train unless `raw`), folded records by their weight."""
    out: Counter = Counter()
    for s in its:
        out[s.phase if raw else (s.phase or I.TRAIN)] += I.weight(s)
    return out


def _graph_keys(ctx: Context):
    """Graph identities of compiled step graphs / jitted functions (eager ops are a backend's own rule)."""
    return [(key, us) for key, us in ctx.by_key.items() if not key.eager]


class Recompilation(Rule):
    kind = "recompilation"

    def run(self, ctx: Context) -> list[Finding]:
        wall, phase_len = _compile_scope(ctx)
        out = []
        for _, us in _graph_keys(ctx):
            re_ = [u for u in us if u.klass == C.RECOMPILE]
            if re_:
                out.append(_recompilation(re_, wall, phase_len, ctx.advice))
        return out


class WarmupCompiles(Rule):
    kind = "warmup_compiles"

    def run(self, ctx: Context) -> list[Finding]:
        out = []
        for _, us in _graph_keys(ctx):
            warm = [u for u in us if u.klass == C.WARMUP]
            if warm:
                out.append(_warmup_finding(us[0], warm))
        return out


class NewGraph(Rule):
    """The first compile of a graph identity after the start (the first evaluation step, a final evaluation):
    expected once."""

    kind = "new_graph"

    def run(self, ctx: Context) -> list[Finding]:
        out = []
        for key, us in _graph_keys(ctx):
            first = us[0]
            if first.phase == I.TRAIN and first.position < max(1, ctx.warmup):
                continue
            what = {I.EVAL: "the first evaluation step", I.AFTER: "work after the last step, e.g. a final "
                    "evaluation"}.get(first.phase, "a graph not seen before")
            when = "after the last step" if first.phase == I.AFTER else f"at {first.phase} iteration {first.position}"
            out.append(Finding(
                "new_graph", "info",
                f"A new graph compiled {when}{where(first.location)} "
                f"({first.count} compile(s), {first.seconds:.2f} s): its first compile ({what}); expected once.",
                first.count, first.location, NewGraphEvidence(str(key), round(first.seconds, 4), first.phase), None,
                [first.iteration],
                cost=Cost(compile_s=round(first.seconds, 4))))
        return out


@dataclass
class NewGraphEvidence(Evidence):
    """new_graph's evidence: the graph's key, its first compile's seconds and the phase it compiled in."""

    key: str
    compile_time_s: float
    phase: str


def _recompilation(re_: list[C.CompileUnit], wall: float, phase_len: Counter, advice: Mapping[str, str]
                   ) -> Finding:
    n = sum(u.count for u in re_)
    seconds = sum(u.seconds for u in re_)
    hits = len({u.iteration for u in re_})
    seen, events = C.causes(re_)
    explained = len({id(u) for u in re_ if any(e.detail.cause not in (None, "identical") for e in u.evidence)})
    special = all(e.detail.special_scalars for e in events) and events and explained == len(re_)
    # the latest explained compile is the steadiest: its line (the first graphs also differ by start-up work)
    changed = next((e.location for e in events[::-1] if e.location), None)
    loc = changed or re_[0].location
    phase = re_[0].phase
    per = n / max(1, phase_len[phase])
    evidence = RecompileEvidence(str(re_[0].key), round(seconds, 4), round(seconds / wall, 4),
                                 [u.position for u in re_][:20], phase, explained, len(re_) - explained)
    if events:
        # the latest explanation is the steadiest one: the first graphs also differ by start-up work
        top = events[-1].detail.cause
        evidence.cause = "special_scalar" if special else top
        evidence.causes = dict(seen)
        evidence.differences = [d for e in events[::-1] for d in e.detail.differences][:8]
        hashes = sorted({h for e in events for h in e.detail.graph_hashes})
        if hashes:
            evidence.graph_hashes = hashes[:8]
    recurring = hits >= threshold("recurring_min_hits")
    severity = "warning" if recurring and not special else "info"
    cost = (f"{n} compile(s) in {hits} {phase} iteration(s), {seconds:.2f} s compiling = "
            f"{seconds / wall:.0%} of the run's wall time")
    if special:
        why = CAUSES["special_scalar"] + (f". {advice['special_scalars']}" if advice.get("special_scalars") else "")
    elif events:
        why = CAUSES.get(evidence.cause, evidence.cause)
        if evidence.differences:
            why += f"; {evidence.differences[0]}"
        if len(re_) > explained:
            why += f" (seen on {explained} of {len(re_)} recompiling iterations; the others were not captured)"
    else:
        partial = [d for u in re_ for e in u.evidence for d in e.detail.differences]
        why = ("cause unknown: no graph or signature was captured for these compiles (capture is armed after an "
               "unexplained recompile; rerun with attribution 'always' to see what differs)")
        if partial:
            why = f"{partial[-1]}; rerun with attribution 'always' to capture the graphs"
            evidence.differences = partial[::-1][:8]
    graph, which = _which_lines(re_[0], changed, evidence.cause, evidence)
    lead = (f"The graph{graph} recompiled after its first compile, again and again"
            if recurring else f"The graph{graph} recompiled once after its first compile (a one-off)")
    return Finding("recompilation", severity, f"{lead}: {cost}. Why: {why}.{which}", n, loc, evidence, per,
                   [u.iteration for u in re_], cost=Cost(compile_s=round(seconds, 4),
                                                          share_of_wall=round(seconds / wall, 4)))


_CHANGED_AT = {  # cause -> what the line of a compile's own evidence is
    "input_shapes": "the input whose shape changed came from",
    "input_dtypes": "the input whose dtype changed came from",
    "constant": "the changing value enters the graph at",
    "special_scalar": "the 0/1 value enters the graph at",
    "internal_shapes": "the size that changed is set at",
}


def _which_lines(unit: C.CompileUnit, changed: Location | None, cause: str | None,
                 evidence: RecompileEvidence | WarmupEvidence) -> tuple[str, str]:
    """Say which line is which: torch_xla's graph identity is the line whose sync cut the graph
    (`evidence.graph_cut_at`); the line the finding points at is where what changed came from
    (`evidence.changed_at`). Returns the text after "The graph" and a sentence naming the changed line."""
    cut = unit.site
    if unit.key.kind != "site" or cut is None:
        return where(changed or unit.location), ""
    evidence.graph_cut_at = _loc_json(cut)
    if changed is None or (changed.file, changed.line) == (cut.file, cut.line):
        return f" cut at {short_path(cut.file)}:{cut.line} ({cut.function})", ""
    evidence.changed_at = _loc_json(changed)
    role = _CHANGED_AT.get(cause or "", "the first op that differs is built at")
    return (f" cut at {short_path(cut.file)}:{cut.line} ({cut.function})",
            f" {role[0].upper()}{role[1:]} {short_path(changed.file)}:{changed.line} ({changed.function}): the "
            "line this finding points at.")


def _warmup_finding(first: C.CompileUnit, warm: list[C.CompileUnit]) -> Finding:
    n = first.count + sum(u.count for u in warm)
    seen, events = C.causes(warm)
    # each warm-up compile's own cause, in order: the same graphs give the same causes whichever other steps were
    # attributed (a special scalar is one compile's cause, not a verdict on all of them)
    own = [(u, [e for e in u.evidence if e.detail.cause not in (None, "identical")]) for u in warm]
    special = any(e.detail.special_scalars for e in events)
    if events and all(e.detail.special_scalars for e in events):
        why = ("one because a value that was 0 or 1 (a warm-up learning rate, a freshly zeroed tensor) is baked "
               "into the first graph as a constant")
    elif events:
        why = "the graphs differ: " + "; ".join(f"{u.phase} iteration {u.position}: {_warm_cause(ev[-1])}"
                                                for u, ev in own if ev)
        if len(events) < len(warm):
            why += f" ({len(warm) - len([1 for _, ev in own if ev])} not captured)"
    else:
        why = "what differed was not captured (e.g. optimizer state appearing after the first update)"
    # the line of the special scalar where there is one (the compile XLA_NO_SPECIAL_SCALARS saves), else the first
    changed = next((e.location for e in events if e.location and e.detail.special_scalars), None) if special else None
    changed = changed or next((e.location for e in events if e.location), None)
    loc = changed or first.location
    evidence = WarmupEvidence(str(first.key), seen.most_common(1)[0][0] if seen else None, special,
                              [ev[-1].detail.cause if ev else None for _, ev in own],
                              [d for e in events for d in e.detail.differences][:6],
                              round(first.seconds + sum(u.seconds for u in warm), 4))
    graph, which = _which_lines(first, changed, "special_scalar" if special else evidence.cause, evidence)
    at = f" for the graph{graph}" if graph.startswith(" cut at") else graph
    return Finding(
        "warmup_compiles", "info",
        f"{n} graphs compiled in the first {len(warm) + 1} {first.phase} iterations{at}, then no more: "
        f"{why}.{which} Expected warm-up; excluded from step time.", n, loc, evidence,
        None, [first.iteration] + [u.iteration for u in warm], cost=Cost(compile_s=evidence.compile_time_s))


def _warm_cause(e: Event) -> str:
    if e.detail.special_scalars:
        return "a value that was 0 or 1 was baked in as a constant (a special scalar; XLA_NO_SPECIAL_SCALARS=1 " \
               "avoids this compile)"
    return str(e.detail.cause).replace("_", " ") + (f" ({e.detail.differences[0]})" if e.detail.differences else "")


# --- events grouped by line -----------------------------------------------------------------------------------
def _by_location(events: Iterable[tuple[int, Event]]) -> dict[tuple, list[tuple[int, Event]]]:
    groups: dict[tuple, list[tuple[int, Event]]] = defaultdict(list)
    for j, e in events:
        key = (e.location.file, e.location.line) if e.location else ("?", 0)
        groups[key].append((j, e))
    return groups


class _Span:
    """Which folded record (fold.py) each event came from, by `id(event)`: such a record stands for `repeat`
    iterations, each with its events (a folded record holds events of its own: no other record holds them)."""

    def __init__(self, records):
        self._of = {id(e): s for s in records if I.weight(s) > 1 for e in s.events}

    def weight(self, e: Event) -> int:
        s = self._of.get(id(e))
        return 1 if s is None else I.weight(s)

    def indices(self, j: int, e: Event):
        s = self._of.get(id(e))
        return (j,) if s is None else I.indices([s])


def _weight(evs: list[tuple[int, Event]], span: _Span) -> int:
    """How many events these are: one from a folded record stands for `repeat` of them."""
    return sum(span.weight(e) for _, e in evs)


def _indices(evs: list[tuple[int, Event]], span: _Span) -> list[int]:
    """The iterations these events came from, a folded record's as every iteration it stands for."""
    return sorted({i for j, e in evs for i in span.indices(j, e)})


def _merge_details(events: list[Event], span: _Span | None = None) -> SeenCalls:
    """What these events saw: their calls (a folded record's counted `span` times) and the first of each detail."""
    calls: Counter = Counter()
    for e in events:
        if e.detail.call:
            calls[e.detail.call] += span.weight(e) if span else 1
    first = {key: next((v for e in events if (v := getattr(e.detail, key, e.detail.extra.get(key))) is not None),
                       None) for key in ("via", "shapes", "bytes", "ops", "dtype", "source")}
    return SeenCalls(dict(calls) if calls else None, **first)


def recurs(hits: int, phase_iterations: int) -> bool:
    """A finding that recurs is a warning: it hits enough iterations, and enough of its phase's."""
    return hits >= threshold("recurring_min_hits") and hits >= threshold("recurring_share") * max(1, phase_iterations)


# --- host reads -----------------------------------------------------------------------------------------------
class DeviceToHostSync(Rule):
    """Host reads per phase. Each line seen reading gets a finding; reads counted but never seen get one without a
    line. Every step (or most) = warning with the time spent waiting; every N steps = info, amortised. A read that
    forced the pending graph to run early carries the extra executions (the step ran as several graphs)."""

    kind = "device_to_host_sync"

    def run(self, ctx: Context) -> list[Finding]:
        it, advice, figures = ctx.iterations, ctx.advice, ctx.figures
        out: list[Finding] = []
        reads = figures.reads  # host reads net of CPU-fallback copies: the one count (figures.py)
        for phase in sorted({s.phase for s in it}, key=str):
            steps = [s for s in it if s.phase == phase]
            hit = [s for s in steps if reads(s) > 0]
            if not hit:
                continue
            events = [(s.index, e) for s in steps for e in s.events
                      if e.kind == "device_to_host_sync" and not e.detail.closure]
            # a folded record stands for `repeat` iterations, each with its events (fold.py)
            span = _Span(steps)
            nh, ns = I.count(hit), I.count(steps)
            per_pass = _once_per_pass(it, phase, hit, reads)
            recurring = recurs(nh, ns) and not per_pass
            total = I.total(hit, reads)
            waited = _steady_wait(hit) * nh
            early = sum(s.early_executions for s in hit)
            groups = _by_location(events) or {("?", 0): []}
            seen_total = sum(_weight(v, span) for v in groups.values()) or 1
            for (_, _), evs in groups.items():
                loc = evs[0][1].location if evs else None
                # the steps the card's header and its text both name: where the reads were (one line), else
                # where this line's reads were caught
                at = _indices(evs, span) if len(groups) > 1 and evs else I.indices(hit)
                share = _weight(evs, span) / seen_total if evs else 1.0
                n = max(_weight(evs, span), round(total * share))
                detail = HostReadEvidence(_merge_details([e for _, e in evs], span), phase, nh, ns,
                                          round(1e3 * waited * share / ns, 3),
                                          I.total(hit, lambda s: s.device_to_host.bytes or 0))
                per = n / ns
                if early:
                    detail.extra_executions_per_step = round(early * share / ns, 3)
                calls = ", ".join(detail.seen.calls or {}) or "a host read"
                read_advice = advice.get('device_to_host_sync', GENERIC_ADVICE['device_to_host_sync'])
                decides = control_flow.read_use(loc.file, loc.line) if loc else None
                if decides:  # the value decides what the host does next: the decision has to move, not the read
                    detail.control_flow, detail.statement = decides.use, decides.statement
                    fits = advice.get(f"control_flow_{decides.use}", GENERIC_ADVICE[f"control_flow_{decides.use}"])
                    read_advice = (f"The value decides control flow on the host (`{decides.statement}`): "
                                   f"{fits[:1].lower()}{fits[1:]}")
                split = (f" Each read forces the pending graph to run early: the {phase} step runs as "
                         f"{1 + early * share / max(1, nh):.0f} graphs instead of 1." if early else "")
                spread = any(s.spread_out_s for s in hit)  # pacing.py: it waited for queued steps' device work
                cost = (f"{_ms(waited * share / ns)} per {phase} step waiting" if waited else
                        "no wait of its own" if spread else "cost not measured")
                if spread:
                    cost += " (it waited for the device to finish the steps queued before it: their device time)"
                if recurring:
                    # how often: per step that reads ("once per train step"), and in how many of the phase's steps
                    often = fmt.times(n / nh) + f" per {phase} step" + (
                        "" if nh == ns else f", in {nh} of {ns} {phase} steps")
                    msg = (f"Device-to-host sync{where(loc)}: {calls} copies a value to the host {often} "
                           f"({fmt.steps(at)}), stalling the host until the device finishes "
                           f"({cost}).{split} {read_advice}")
                elif per_pass:
                    detail.once_per_pass = True
                    msg = (f"Host read{where(loc)}: {calls} once per {phase} pass ({per_pass} passes), {cost}. Reading "
                           f"a pass's result once, after its loop, is the normal pattern: not a per-step cost.{split}")
                else:
                    often = fmt.period(I.indices(hit), ns)
                    msg = (f"Host read{where(loc)}: {calls} in {nh} of {ns} {phase} iterations "
                           f"({often}: {fmt.steps(at)}), amortised {cost}.{split} "
                           "Infrequent reads (logging every N steps) are fine.")
                if loc is None:
                    msg += " (the line was not caught by an attribution step; rerun with attribution 'always')"
                out.append(Finding("device_to_host_sync", "warning" if recurring else "info", msg, n, loc, detail,
                                   per, at,
                                   cost=Cost(ms_per_step=detail.wait_ms_per_step if waited else None,
                                             extra_graphs_per_step=detail.extra_executions_per_step)))
        out += _closure_reads(it, advice)
        return out


def _once_per_pass(it: list[StepRecord], phase: str | None, hit: list[StepRecord],
                   reads_of: Callable[[StepRecord], int]) -> int:
    """Reads of a non-training phase that come once per pass (the evaluation result read after its loop): at
    most one iteration with reads in each unbroken run of that phase's iterations, and, where one record holds a
    whole pass (JAX: the calls of other jitted functions between two steps), fewer reads at any one line than
    graphs launched in it (a read per launched batch is per step, whatever the grouping). The number of passes
    that read, else 0."""
    if phase == I.TRAIN:
        return 0
    hit_ids = {s.index for s in hit}
    runs = [run for run in I.phase_runs(it) if run[0].phase == phase]
    if any(not _after_the_loop(run, hit_ids) for run in runs):
        return 0
    for s in hit:
        if len(s.boundaries) > 1:  # grouped boundaries: its batches are iterations of their own already
            continue
        launches = s.executions - s.early_executions
        per_line = [e.detail.transfers for e in s.events if e.kind == "device_to_host_sync"]
        reads = max(per_line) if per_line else reads_of(s)
        if launches >= 2 and reads >= launches:
            return 0
    return sum(1 for run in runs if any(s.index in hit_ids for s in run))


def _after_the_loop(run: list[StepRecord], hit_ids: set[int]) -> bool:
    """A pass's reads are its result's, read once: one iteration of the pass with reads, or several that all come
    at or after its loop's last iteration (the iterations at the line most of the pass's iterations end at) - the
    code after the loop, e.g. `xm.mesh_reduce(..., correct.item() ...)`, which syncs and reads more than once."""
    hits = [i for i, s in enumerate(run) if s.index in hit_ids]
    if len(hits) <= 1:
        return True
    line = [(s.site.file, s.site.line) if s.site else None for s in run]
    loop, n = Counter(line).most_common(1)[0]
    if n < 2:  # no loop to tell apart from what follows it
        return False
    last = max(i for i, at in enumerate(line) if at == loop)
    return hits[0] >= last


def _steady_wait(hit: list[StepRecord]) -> float:
    """Mean time a read waited per iteration (net of what it waited for other steps' queued work), from iterations
    that compiled nothing (a compile step's read also
    waits for the compile and first run: that is compile time, reported apart) and ran without attribution."""
    steady = steady_steps(hit, 0)  # a read that waited for several steps' queued work: spread (pacing.py)
    return I.total(steady, lambda s: B.waits(s)[0]) / I.count(steady)


def _closure_reads(it: list[StepRecord], advice: Mapping[str, str]) -> list[Finding]:
    hit = [s for s in it if s.closure_reads]
    if not hit:
        return []
    events = [e for s in it for e in s.events if e.kind == "device_to_host_sync" and e.detail.closure]
    loc = events[0].location if events else None
    n = sum(s.closure_reads for s in hit)
    return [Finding(
        "device_to_host_sync", "info",
        f"Values read inside step closures{where(loc)} in {len(hit)} of {I.count(it)} iterations ({n} reads): the "
        f"recommended pattern, run after the step's graph was launched. {advice.get('closure_read', '')}".strip(),
        n, loc, ClosureReadEvidence(_merge_details(events)), n / max(1, I.count(it)), [s.index for s in hit])]


# --- graph breaks ---------------------------------------------------------------------------------------------
class GraphBreak(Rule):
    """A step that runs as several graphs, from one of three signs: a sync inside the step (`run`), sync sites
    taking turns with no optimizer to tell iterations apart (`_cycles`), graphs launched early by something other
    than a host read (`_early`)."""

    kind = "graph_break"

    def run(self, ctx: Context) -> list[Finding]:
        """A sync inside the step: an iteration whose boundaries launched graphs before its last one, where that
        boundary was neither a micro-batch (backward) nor an optimizer step - the step ran as several graphs. A
        single backward boundary followed by an update boundary with no backward of its own is not accumulation: its
        sync splits the step between backward and the optimizer step. A boundary whose only launches were forced by
        a host read is that read's (device_to_host_sync says it), not a sync's."""
        it, advice = ctx.iterations, ctx.advice
        by_site: dict[tuple, list[int]] = defaultdict(list)
        sites: dict[tuple, Location] = {}
        train = [s for s in it if s.phase == I.TRAIN]
        after_other = {run[0].index for run in I.phase_runs(it)[1:] if run[0].phase == I.TRAIN}
        for s in train:
            launching = I.launching_boundaries(s)
            if s.index in after_other and launching:
                # the first sync after an evaluation runs what the pass left pending (its accumulator, a metric):
                # that pass's work, not a sync inside this training step
                launching = launching[1:]
            backward = [b for b in launching if b.backward_calls]
            split_update = (len(backward) == 1 and launching and backward[0] is not launching[-1]
                            and launching[-1].optimizer_steps and not launching[-1].backward_calls)
            for b in launching[:-1]:
                if (b.backward_calls and not split_update) or b.optimizer_steps or not b.site:
                    continue
                if b.executions and b.executions <= b.early_executions:
                    continue
                key = (b.site.file, b.site.line)
                by_site[key].append(s.index)
                sites[key] = b.site
        out = []
        for key, hits in by_site.items():
            loc = sites[key]
            recurring = recurs(len(hits), I.count(train))
            out.append(Finding(
                "graph_break", "warning" if recurring else "info",
                f"A sync{where(loc)} runs inside the step in {len(hits)} of {I.count(train)} training iterations: each "
                "such iteration executes as several graphs instead of one (more launches, lost fusion). "
                f"{advice.get('graph_break', GENERIC_ADVICE['graph_break'])}", len(hits), loc,
                SyncSitesEvidence(1 + len(by_site)), len(hits) / max(1, I.count(train)), hits))
        out += self._cycles(it, advice) if not out and not any(s.optimizer_steps or s.backward_calls for s in it) else []
        out += self._early(it, advice)
        return out

    def _cycles(self, it: list[StepRecord], advice: Mapping[str, str]) -> list[Finding]:
        """No optimizer to tell iterations apart: several launching sync sites taking turns in a fixed cycle
        (A B A B ...) mean the loop syncs more than once per iteration."""
        seq = [(s.site.file, s.site.line) for s in it if s.site]
        counts = Counter(seq)
        if len(seq) < threshold("cycle_min_boundaries") or not 2 <= len(counts) <= threshold("cycle_max_sites"):
            return []
        period = len(counts)
        cycle = seq[:period]
        if len(set(cycle)) != period or any(seq[i] != cycle[i % period] for i in range(len(seq))):
            return []
        by_key = {(s.site.file, s.site.line): s.site for s in it if s.site}
        out = []
        for key in cycle[:-1]:
            loc = by_key[key]
            out.append(Finding(
                "graph_break", "warning",
                f"A sync{where(loc)} runs inside every iteration: each iteration executes as {period} graphs instead "
                f"of one. {advice.get('graph_break', GENERIC_ADVICE['graph_break'])}", len(seq) // period, loc,
                SyncSitesEvidence(period, [_loc_json(by_key[k]) for k in cycle]), 1.0,
                [s.index for s in it if s.site and (s.site.file, s.site.line) == key][:20]))
        return out

    def _early(self, it: list[StepRecord], advice: Mapping[str, str]) -> list[Finding]:
        """Graphs launched early by something other than a host read (those are told by device_to_host_sync)."""
        hit = [s for s in it if s.early_executions - s.device_to_host.count > 0 and not s.fallback_ops]
        events = [(s.index, e) for s in it for e in s.events if e.kind == "graph_break"]
        if not hit:
            return []
        out = []
        groups = _by_location(events) or {("?", 0): []}
        recurring = recurs(len(hit), I.count(it))
        for _, evs in groups.items():
            loc = evs[0][1].location if evs else None
            n = sum(s.early_executions - s.device_to_host.count for s in hit)
            out.append(Finding(
                "graph_break", "warning" if recurring else "info",
                f"The pending graph was executed early{where(loc)} in {len(hit)} of {I.count(it)} iterations: the step "
                f"runs as several smaller graphs. {advice.get('early_execution', GENERIC_ADVICE['early_execution'])}",
                n, loc, _merge_details([e for _, e in evs]), n / max(1, I.count(it)), [s.index for s in hit]))
        return out


@dataclass
class SyncSitesEvidence(Evidence):
    """graph_break's evidence where syncs inside the step split it: how many sync sites an iteration runs, and
    the order they take turns in (`cycle`, where no optimizer step tells the iterations apart)."""

    sites_per_iteration: int
    cycle: list[dict] | None = None

    def to_json(self) -> dict[str, Any]:
        return {"sites_per_iteration": self.sites_per_iteration, **({} if self.cycle is None else
                                                                     {"cycle": self.cycle})}


# --- other per-step problems ----------------------------------------------------------------------------------
class OpFallback(Rule):
    kind = "op_fallback"

    def run(self, ctx: Context) -> list[Finding]:
        it, advice = ctx.iterations, ctx.advice
        totals: Counter = Counter()
        for s in it:
            totals.update(s.fallback_ops)
        events = [e for s in it for e in s.events if e.kind == "op_fallback"]
        out, n_it = [], max(1, I.count(it))
        for op, n in totals.most_common():
            ev = [e for e in events if op in e.detail.ops]
            loc = next((e.location for e in ev if e.location), None)
            hit = [s.index for s in it if op in s.fallback_ops]
            recurring = recurs(len(hit), n_it)
            out.append(Finding(
                "op_fallback", "warning" if recurring else "info",
                f"{op} ran on the CPU (no device lowering){where(loc)}: {n / n_it:.2f} times per step in "
                f"{len(hit)} iterations, each one copying its inputs to the host and back. "
                f"{advice.get('op_fallback', GENERIC_ADVICE['op_fallback'])}", n, loc,
                FallbackOpEvidence(op, dict(Counter(e.detail.call for e in ev)) if ev else {}),
                n / n_it, hit))
        return out


@dataclass
class FallbackOpEvidence(Evidence):
    """op_fallback's evidence: the op that ran on the CPU and the user's calls that ran it (call -> times seen)."""

    op: str
    calls: dict[str, int]


class HostToDeviceTransfer(Rule):
    kind = "host_to_device_transfer"
    needs = ("attribution",)

    def run(self, ctx: Context) -> list[Finding]:
        """Implicit copies of host data into a compiled call. A warning only when the copy is avoidable and recurs:
        the same host buffer copied again and again (parameters left on the host), Python lists, arrays resharded on
        every call (adapter: detail.avoidable). A fresh batch per call is the input pipeline: info."""
        it, advice = ctx.iterations, ctx.advice
        events = [(s.index, e) for s in it for e in s.events if e.kind == "host_to_device_transfer"]
        # a folded record stands for `repeat` iterations, each with its events (fold.py)
        span = _Span(it)
        out, n_it = [], I.count(it)
        for _, evs in _by_location(events).items():
            loc = evs[0][1].location
            steps_hit = _indices(evs, span)
            avoidable = [(j, e) for j, e in evs if e.detail.avoidable]
            recurring = recurs(len(_indices(avoidable, span)), n_it)
            n = _weight(evs, span)  # calls that transferred; the arrays they moved are in the evidence
            detail = UploadEvidence(
                _merge_details([e for _, e in (avoidable or evs)], span),
                sum(int(e.detail.transfers) * span.weight(e) for _, e in evs), _weight(avoidable, span))
            told = transfer_origin.message([e for _, e in evs], where(loc), len(steps_hit), n_it,
                                           span.weight)
            if told:  # a round trip, values the loop makes on the host: said from the evidence, with the bytes
                msg, avoid = told
                detail.origins, detail.made_by, detail.bytes_per_iteration = (avoid.origins, avoid.made_by,
                                                                              avoid.bytes_per_iteration)
            elif recurring:
                msg = (f"Host data passed into a compiled call{where(loc)} is copied to the device implicitly in "
                       f"{len(steps_hit)} of {n_it} iterations, the same data again and again. "
                       f"{advice.get('host_to_device_transfer', GENERIC_ADVICE['host_to_device_transfer'])}")
            else:
                msg = (f"Host data passed into a compiled call{where(loc)} is copied to the device in {len(steps_hit)} "
                       f"of {n_it} iterations: {'a fresh input batch each time (the input pipeline), expected' if not avoidable else 'infrequent'}. "
                       f"{advice.get('input_pipeline', '')}").strip()
            timed = _eager_upload_time(evs, span, ctx)
            if timed is not None:  # eager uploads cost their dispatch: said in time, rated by time
                per, step, costly = timed
                msg += (f" These uploads take {fmt.duration(per)} per iteration ({fmt.pct(per / step) if step else '?'} "
                        f"of its {fmt.duration(step)}): an eager dispatch each, whatever their bytes"
                        + ("." if costly else f", below the {fmt.duration(threshold('eager_upload_min_s'))} and "
                           f"{fmt.pct(threshold('eager_upload_share'))} of a step that make them worth a warning."))
                detail.seconds_per_iteration = round(per, 6)
                detail.share_of_step = round(per / step, 4) if step else None
                recurring = recurring and costly
            out.append(Finding("host_to_device_transfer", "warning" if recurring else "info", msg, n, loc, detail,
                               n / max(1, n_it), steps_hit))
        return out


def _eager_upload_time(evs: list[tuple[int, Event]], span: _Span,
                       ctx: Context) -> tuple[float, float, bool] | None:
    """Eager uploads' own time (JAX: the jnp.array calls, `detail.seconds`) per iteration that made them, the mean
    wall time of those iterations, and whether that is worth a warning (`eager_upload_min_s` and
    `eager_upload_share` of the step). None when any of the events is not a timed eager upload. A folded record's
    event (its iterations' mean) and wall time count `repeat` times (`span`)."""
    if not evs or not all(getattr(e.detail, "eager", False) and getattr(e.detail, "seconds", None) is not None
                          for _, e in evs):
        return None
    hit = {j for j, _ in evs}
    per = sum(e.detail.seconds * span.weight(e) for _, e in evs) / len(_indices(evs, span))
    walls = [(s.wall_time_s, I.weight(s)) for s in ctx.iterations if s.index in hit and s.wall_time_s]
    step = sum(w * n for w, n in walls) / sum(n for _, n in walls) if walls else 0.0
    costly = per >= threshold("eager_upload_min_s") and (not step or per >= threshold("eager_upload_share") * step)
    return per, step, costly


class CompileTime(Rule):
    kind = "compile_time"

    def run(self, ctx: Context) -> list[Finding]:
        it, warmup, figures = ctx.iterations, ctx.warmup, ctx.figures
        total = I.total(it, "wall_time_s")
        comp = sum(s.compile_time_s for s in it)
        if not total or not comp:
            return []
        share = comp / total
        how = (f"step-time statistics exclude the {warmup} warm-up iteration(s) and every iteration that compiled"
               if basis(figures.steady) != NET_OF_COMPILE else
               f"every iteration after the {warmup} warm-up iteration(s) compiled, so step-time statistics take each "
               "one's wall time net of its own compile time")
        return [Finding(
            "compile_time", "info",
            f"Compiling took {comp:.2f} s of {total:.2f} s ({share:.0%}) across {sum(s.compiles for s in it)} "
            f"compile(s); {how}, so compile time is not mistaken for step time.", sum(s.compiles for s in it), None,
            CompileTimeEvidence(round(comp, 4), round(total, 4), round(share, 4)),
            cost=Cost(compile_s=round(comp, 4), share_of_wall=round(share, 4)))]


@dataclass
class CompileTimeEvidence(Evidence):
    """compile_time's evidence: the run's compile seconds, its wall seconds and their ratio."""

    compile_time_s: float
    wall_time_s: float
    share: float


# --- the registry ---------------------------------------------------------------------------------------------
class InputBound(Rule):
    """The loop waits for its next batch: a large share of each steady step is the host waiting in the loader's
    next() (measured by the adapter on every step, or by `session.data_wait()`), no capture needed."""

    kind = "input_bound"

    def run(self, ctx: Context) -> list[Finding]:
        steady, its = ctx.figures.steady, ctx.figures.steady_its
        split = its.column("data")  # the breakdown's data part where measured (what every view shows)
        waits, times = split or [B.data_s(s) for s in steady], series(steady, "step")
        if not waits or None in waits or not sum(times):
            return []
        n = its.count
        wait, step = its.wmean(waits), ctx.figures.step_time.mean
        share = wait / step
        bound = threshold("input_bound_share")
        key = "data" if split else "data_s"
        n_hit, hits = its.hits(lambda d: d[key] / d["step"] if d["step"] and d[key] is not None else None,
                               bound, ("step", key))
        if share < bound or wait < threshold("input_bound_min_s") or not recurs(n_hit, n):
            return []
        site = next((e for s in ctx.iterations for e in s.events if e.kind == "data_wait"), None)
        lines = B.top_lines(steady, ("data",))  # sampled: where inside the loading the time goes
        pulls = B.top_lines(steady, (B.DATA_SITE,), 1)  # sampled: the loop's line that pulls the batch
        loc = site.location if site else (_line_loc(pulls[0]) if pulls else (_line_loc(lines[0]) if lines else None))
        call = site.detail.call if site else ("generator" if pulls else None)
        inside = next((r for r in lines if loc is None or (r["file"], r["line"]) != (loc.file, loc.line)), None)
        spent = (f"; most of it{where(_line_loc(inside))} ({inside['ms_per_step']:.1f} ms/step sampled)"
                 if inside else "")
        return [Finding(
            "input_bound", "warning",
            f"The loop waits for its input{where(loc)}: {_ms(wait)} of each {_ms(step)} step ({share:.0%}) goes "
            f"to the next batch{f' ({call})' if call else ''}, in {n_hit} of {n} steady steps, while "
            f"the device has nothing to run{spent}. "
            f"{ctx.advice.get('input_bound', GENERIC_ADVICE['input_bound'])}",
            n_hit, loc, InputBoundEvidence(
                round(wait * 1e3, 3), round(step * 1e3, 3), round(share, 4), call,
                measured="timed" if all(s.data_wait_s is not None for s in steady) else "sampled", lines=lines),
            n_hit / n, hits, cost=Cost(ms_per_step=round(wait * 1e3, 3), share_of_wall=round(share, 4)))]


@dataclass
class InputBoundEvidence(Evidence):
    """input_bound's evidence. `wait_ms_per_step`, `share` and `source` are `cost` and `origin` since 0.5.0, kept one
    version for readers of older reports."""

    wait_ms_per_step: float
    step_ms: float
    share: float  # of the steady step (cost.share_of_wall)
    call: str | None  # the loader's call that waits (`next`, "generator")
    source: str = "runtime"
    measured: str = "timed"  # timed (every step) | sampled (the stack sampler's estimate)
    lines: list[dict] = field(default_factory=list)  # sampled lines inside the loading


def _of(part: float, wall: float, share: float) -> str:
    """A part's share of the step, and of its measured time where `other` (waiting for a CPU) took some."""
    whole = part / wall if wall else 0.0
    return f"{whole:.0%}" if abs(share - whole) < 0.05 else f"{whole:.0%}; {share:.0%} of its measured time"


def _line_loc(row: dict | None) -> Location | None:
    return Location(row["file"], int(row["line"]), row.get("function") or "?") if row else None


def _lines_text(rows: list[dict]) -> str:
    return ", ".join(f"{short_path(r['file'])}:{r['line']} ({r['function']}, {r['ms_per_step']:.1f} ms/step)"
                     for r in rows)


@dataclass
class BoundEvidence(Evidence):
    """host_bound's evidence (launch_bound's below). `ms_per_step`, `share`, `share_of_wall` and `source` are `cost`
    and `origin` since 0.5.0 (`share` is cost.share_of_measured), kept one version for readers of older reports."""

    ms_per_step: float
    step_ms: float
    share: float  # of the step's measured time
    share_of_wall: float
    user_share_sampled: float | None = None  # the user's own lines' share of the main thread's samples
    lines: list[dict] = field(default_factory=list)  # the top sampled lines
    source: str = "runtime"


@dataclass
class LaunchEvidence(Evidence):
    """launch_bound's evidence; the cost keys as in BoundEvidence."""

    ms_per_step: float
    step_ms: float
    share: float
    share_of_wall: float
    graphs_per_step: float = 0.0
    device_ms_per_step: float | None = None  # the device's own time on the graphs, where measured
    source: str = "runtime"


def _part_share(d: dict, component: str) -> float | None:
    """A part's share of an iteration's measured time (wall less `other` and ptxla_perf's own)."""
    busy = max(d["wall"] - (d["other"] or 0.0) - (d["profiler"] or 0.0), 0.0)
    return d[component] / busy if busy and d[component] is not None else None


class _Dominant(Rule):
    """A breakdown component (breakdown.py) that dominates the steady step: on average at least `share` of its
    measured time (the wall time less `other` - on a loaded host the main thread waiting for a CPU is nobody's part -
    and less ptxla_perf's own `profiler` time) and `min_s` per step, and in recurring_share of the steady steps: a warning with its measured ms per step."""

    component = ""

    def measure(self, ctx: Context) -> tuple[float, float, list[int], list, float] | None:
        steady, its = ctx.figures.steady, ctx.figures.steady_its
        values, others = its.column(self.component), its.column("other")
        ours = its.column("profiler")
        walls = [B.paced_wall(s) for s in steady]  # the time the parts sum to (pacing.py)
        if not values or not sum(walls):
            return None
        busy = [max(w - o - p, 0.0) for w, o, p in zip(walls, others, ours)]
        n = its.count
        mean, wall = its.wmean(values), its.wmean(walls)
        mean_busy = its.wmean(busy)
        share = mean / mean_busy if mean_busy else 0.0
        bound = threshold(f"{self.kind}_share")
        comp = self.component
        n_hit, hits = its.hits(lambda d: _part_share(d, comp), bound, ("wall", "other", "profiler", comp))
        if share < bound or mean < threshold(f"{self.kind}_min_s") or not recurs(n_hit, n):
            return None
        return mean, wall, (n_hit, hits), steady, share


class HostBound(_Dominant):
    """The main thread's own Python and graph tracing take most of the steady step: the device waits for it. The
    stack sampler's user lines say where (sampler.py)."""

    kind, component = "host_bound", "host"

    def run(self, ctx: Context) -> list[Finding]:
        m = self.measure(ctx)
        if m is None:
            return []
        host, wall, (n_hit, hits), steady, share = m
        lines = B.top_lines(steady, ("user",))
        sampled = {k: sum(h["s"] for s in steady for h in s.hot_lines if h["kind"] == k) for k in ("user", "framework")}
        total = sum(sampled.values())
        own = sampled["user"] / total if total else None
        # the user's own Python is something to fix (a warning); the framework tracing a small model every step is
        # what a lazy-tensor step costs (info, with the advice)
        severity = "warning" if own is not None and own >= threshold("host_bound_user_share") else "info"
        if severity == "info":
            lines = B.top_lines(steady, ("user", "framework"))
        loc = _line_loc(lines[0]) if lines else None
        top = f" The top lines (sampled): {_lines_text(lines)}." if lines else ""
        what = ("the user's own Python" if severity == "warning" else
                "mostly tracing and dispatch inside the framework" if own is not None else
                "the main thread's Python and graph tracing")
        return [Finding(
            "host_bound", severity,
            f"The host keeps the step busy{where(loc)}: {_ms(host)} of each {_ms(wall)} step "
            f"({_of(host, wall, share)}) is the training thread's own work ({what}), in {n_hit} of {I.count(steady)} "
            f"steady steps, while the device waits for its next graph.{top} "
            f"{ctx.advice.get('host_bound', GENERIC_ADVICE['host_bound'])}",
            n_hit, loc, BoundEvidence(round(host * 1e3, 3), round(wall * 1e3, 3), round(share, 4),
                                          round(host / wall, 4), user_share_sampled=round(own, 3)
                                          if own is not None else None, lines=lines),
            n_hit / I.count(steady), hits, cost=Cost(ms_per_step=round(host * 1e3, 3),
                                                     share_of_wall=round(host / wall, 4),
                                                     share_of_measured=round(share, 4)))]


class LaunchBound(_Dominant):
    """Tiny steps: launching the graphs (the sync call's own CPU time, net of compile and device wait; JAX:
    dispatch) takes most of the steady step."""

    kind, component = "launch_bound", "launch"

    def run(self, ctx: Context) -> list[Finding]:
        m = self.measure(ctx)
        if m is None:
            return []
        launch, wall, (n_hit, hits), steady, share = m
        graphs = I.total(steady, "executions") / I.count(steady)
        sites = Counter((s.site.file, s.site.line) for s in steady if s.site)
        loc = next((s.site for s in steady if s.site and (s.site.file, s.site.line) == sites.most_common(1)[0][0]),
                   None) if sites else None
        device = [s for s in steady if s.device_time_s is not None]  # JAX: the sampled steps
        busy = I.total(device, "device_time_s") / I.count(device) if device else None
        own = (f", more than the device's own {_ms(busy)} on them" if busy is not None and busy < launch else "")
        per = f" ({_ms(launch / graphs)} per graph)" if graphs else ""
        # a warning where the device's own time on the graphs was measured and is below their launch cost; where
        # it is not known (no sampled JAX step), the device may still be the bound: info
        severity = "warning" if busy is not None and busy < launch else "info"
        return [Finding(
            "launch_bound", severity,
            f"Launching graphs dominates the step{where(loc)}: {_ms(launch)} of each {_ms(wall)} step "
            f"({_of(launch, wall, share)}) goes to launching its {graphs:.3g} graph(s){per}{own}, in {n_hit} of "
            f"{I.count(steady)} steady steps: the steps are too small for the per-launch cost. "
            f"{ctx.advice.get('launch_bound', GENERIC_ADVICE['launch_bound'])}",
            n_hit, loc, LaunchEvidence(round(launch * 1e3, 3), round(wall * 1e3, 3), round(share, 4),
                                           round(launch / wall, 4), graphs_per_step=round(graphs, 3),
                                           device_ms_per_step=round(busy * 1e3, 3) if busy is not None else None),
            n_hit / I.count(steady), hits, cost=Cost(ms_per_step=round(launch * 1e3, 3),
                                                     share_of_wall=round(launch / wall, 4),
                                                     share_of_measured=round(share, 4)))]


class NoSteps(Rule):
    kind = "no_steps"

    def run(self, ctx: Context) -> list[Finding]:
        if ctx.boundaries or not ctx.expect_steps:
            return []
        return [Finding("no_steps", "warning",
                        "No step boundary was seen in this process, so there is nothing per step to report. "
                        + ctx.advice.get("no_steps", ""), 0)]


RULES: tuple[Rule, ...] = (Recompilation(), WarmupCompiles(), NewGraph(), DeviceToHostSync(), OpFallback(),
                           GraphBreak(), HostToDeviceTransfer(), InputBound(), CompileTime(), NoSteps(), HostBound(),
                           LaunchBound())
# the iteration scope of the registry (registry.py lists every scope): the backend-neutral rules and the memory
# rules; an adapter's own rules come in through the context (`Context.backend_rules`)
ITERATION_RULES: tuple[Rule, ...] = (*RULES, *memory_rules.RULES)


def _compile_classes(with_tail: list[StepRecord], max_warmup: int) -> tuple[list[C.CompileUnit], dict]:
    """Every compile unit and its class (compiles.py); on a failure of ours (faults.py) none: the compile rules
    find nothing, the steps and the other rules are kept."""
    units = C.units(with_tail)
    return units, C.classify(units, dict(phase_lengths(with_tail)), max_warmup)


def analyze(boundaries: list[StepRecord], *, advice: Mapping[str, str] | None = None, max_warmup: int = MAX_WARMUP,
            expect_steps: bool = True, tail: StepRecord | None = None, rules: Sequence[Rule] = (),
            host_to_device_bytes: int | None = None, attribution: bool = True,
            capacity: dict[str, Any] | None = None, folded: "Folded | None" = None) -> Analysis:
    """The one analysis pass, for a live session and for `report.build` alike: iterations, compile classes,
    warm-up, figures, then every iteration-scope rule (`ITERATION_RULES` and the adapter's own `rules`, through the
    context), findings worst first. `tail`: work after the last step boundary (a final evaluation). It is no step;
    its compiles are only explained (first uses, a function's first compile), never counted as per-step costs.
    `host_to_device_bytes`: the adapter's whole-run total, where it has one. `attribution`: whether line
    attribution ran at all (rules that need it are reported as not judged). `capacity`: the device's memory as
    the memory section derives it (memory.capacity), which `memory_growth` is rated against. `folded`: a long
    run's older iterations (fold.py), before `boundaries`; a folded record stands for `repeat` iterations."""
    advice = {**GENERIC_ADVICE, **(advice or {})}
    spread(boundaries, tail)  # a wait for several steps' queued work, back over those steps (pacing.py)
    if folded is not None and folded.records:
        it = folded.expanded() + I.group(boundaries, folded.flags, folded.iterations)
    else:
        it = I.group(boundaries)
    train = [s for s in it if s.phase != I.EVAL]
    with_tail = it + ([replace(tail, index=I.count(it), phase=I.AFTER, boundaries=[])] if tail else [])
    all_units, by_key = guarded("analysis.compiles", _compile_classes, with_tail, max_warmup, default=([], {}))
    warmup = _warmup(train, all_units, max_warmup)
    recompiles = sum(u.count for u in all_units if u.klass == C.RECOMPILE)
    figures = Figures.derive(it, train, warmup, recompiles, host_to_device_bytes)
    own = tuple(r for r in rules if r not in ITERATION_RULES)  # a caller that still passes the memory rules
    ctx = Context(boundaries, it, with_tail, train, warmup, by_key, figures, advice, expect_steps, attribution, own,
                  capacity)
    v = run_rules((*ITERATION_RULES, *ctx.backend_rules), ctx)
    return Analysis(it, train, warmup, figures.steady, all_units, v.findings, figures, v.judged, v.not_judged)
