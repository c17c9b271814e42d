"""Compile classification: every compile is judged against earlier compiles of the same graph identity.

Identity (the `key`): torch_xla - the step site (the user line whose sync launched the graph); JAX - the jitted
function, or `eager:<line>` for ops compiled outside any jitted function. The rules (docs/report.md, "Severity"):

- the first compile of a key is `new`: expected (first step, first evaluation, a new function);
- warm-up: compiles of a key in the iterations right after its first one, each iteration compiling again, that
  then stop (a compile-free iteration of that key's phase follows, or the run ends with each of those compiles'
  own evidence a warm-up cause, `SETTLING`): optimizer state appearing, a 0/1 scalar becoming a tensor. At most
  `max_warmup` iterations; a compile among them whose own evidence is a changed input shape, dtype or baked-in
  value (`VARYING`) is a recompile all the same;
- every other compile of a key is a `recompile`; its cause comes from that compile's own evidence only;
- eager (JAX) compiles are first uses of an op/shape.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field

from . import iterations as I
from ..config import MAX_WARMUP
from ..model.records import Boundary, Event, Location, StepRecord

NEW, WARMUP, RECOMPILE, EAGER = "new", "warmup", "recompile", "eager"
# causes that depend on the data or on a changing Python value: never warm-up, even in the first iterations
VARYING = frozenset({"input_shapes", "input_dtypes", "constant", "static_argument", "new_function_object",
                     "internal_shapes"})
# causes that are what a loop does once while it warms up: optimizer state appearing (more inputs), a 0/1 scalar
# baked in and then fed as a value
SETTLING = frozenset({"argument_structure", "special_scalar"})


@dataclass(frozen=True)
class GraphKey:
    """A compile's graph identity. kind "site": torch_xla, the user line whose sync launched the graph (and its
    slot, "#1", when one sync launches several graphs per iteration); "jit": JAX, a jitted function; "eager":
    JAX, ops compiled outside any jitted function, per user line. Adapters write it as "kind:name"."""

    kind: str
    name: str

    @classmethod
    def parse(cls, key: str) -> "GraphKey":
        kind, _, name = key.partition(":")
        return cls(kind, name)

    @property
    def eager(self) -> bool:
        return self.kind == "eager"

    def __str__(self) -> str:
        return f"{self.kind}:{self.name}"


@dataclass
class CompileUnit:
    """The compiles of one key in one iteration."""

    key: GraphKey
    iteration: int  # the iteration's index (a long run's folded records hold no compile: fold.py)
    position: int  # position among the iterations of the same phase
    phase: str
    count: int
    seconds: float
    location: Location | None
    evidence: list[Event] = field(default_factory=list)  # compile events seen for this key in this iteration
    klass: str = NEW
    site: Location | None = None  # torch_xla: the line whose sync cut (launched) the graph; JAX: None


def site_key(site: Location | None) -> str:
    return f"site:{site.file}:{site.line}" if site else "site:?"


def _slots(boundaries: list[Boundary]) -> list[tuple[Boundary, int]]:
    """Each launching boundary with its slot: the how-many-th launch at its site within the iteration. One site
    can run different graphs in one iteration (gradient accumulation: the micro-batch graph, then the update
    graph at the same sync); the slot keeps them apart so the second is not taken for a recompile of the first."""
    seen: Counter = Counter()
    out = []
    for b in boundaries:
        if not b.launched:
            continue
        site = (b.site.file, b.site.line) if b.site else None
        out.append((b, seen[site]))
        seen[site] += 1
    return out


def units(iterations: list[StepRecord]) -> list[CompileUnit]:
    """Compile units in iteration order. Adapters that know each compile's identity (JAX) emit `compile` events
    with detail unit=True; compiles not covered by such events are keyed by the boundary's site."""
    out: list[CompileUnit] = []
    positions: Counter = Counter()
    for it in iterations:
        pos = positions[it.phase]
        positions[it.phase] += I.weight(it)  # a folded record (fold.py) stands for `repeat` iterations
        compile_events = [e for e in it.events if e.kind == "compile"]
        covered = 0
        for e in compile_events:
            if e.detail.unit:
                n = int(e.detail.count)
                covered += n
                out.append(CompileUnit(GraphKey.parse(e.detail.key), it.index, pos, it.phase or "train", n,
                                       float(e.detail.seconds), e.location, [e]))
        rest = it.compiles - covered
        if rest <= 0:
            continue
        parts = [(b, slot) for b, slot in _slots(it.boundaries) if b.compiles]
        if not parts:  # one boundary: the iteration itself
            parts = [(Boundary(-1, it.wall_time_s, it.site, rest, it.compile_time_s, it.executions, 0, 0, 0, 0,
                               True), 0)]
        for b, slot in parts:
            key = site_key(b.site) + (f"#{slot}" if slot else "")
            ev = [e for e in compile_events if not e.detail.unit and (
                e.detail.boundary == b.index if e.detail.boundary is not None and b.index >= 0
                else (e.detail.key or key) == site_key(b.site))]
            loc = next((e.location for e in ev if e.location), None) or b.site
            out.append(CompileUnit(GraphKey.parse(key), it.index, pos, it.phase or "train", b.compiles, b.compile_time_s,
                                   loc, ev, site=b.site))
    return out


def classify(all_units: list[CompileUnit], phase_lengths: dict[str, int], max_warmup: int = MAX_WARMUP
             ) -> dict[GraphKey, list[CompileUnit]]:
    """Set each unit's class; return the units by key, in order. `phase_lengths`: iterations per phase."""
    by_key: dict[GraphKey, list[CompileUnit]] = defaultdict(list)
    for u in all_units:
        by_key[u.key].append(u)
    for key, us in by_key.items():
        if key.eager:
            for u in us:
                u.klass = EAGER
            continue
        us[0].klass = NEW
        run = 1
        while run < len(us) and run < max_warmup and us[run].position == us[run - 1].position + 1 \
                and us[run].phase == us[0].phase:
            run += 1
        # warm-up only if the key then went quiet: an iteration of its phase that did not compile it follows
        # (a run that ends while still compiling every step has no warm-up beyond its first compile)
        last = us[run - 1].position
        next_pos = us[run].position if run < len(us) else None
        quiet = last + 1 < phase_lengths.get(us[0].phase, 0) and (next_pos is None or next_pos > last + 1)
        # the run ended while the key still compiled: its compiles are warm-up all the same when each one's own
        # evidence says so (state appearing, a 0/1 scalar), so that a shorter run does not change the verdict
        settling = next_pos is None and all(_settling(u) for u in us[1:run])
        start = run if run > 1 and (quiet or settling) else 1
        varying = False
        for u in us[1:start]:
            # warm-up is what a loop does once (state appearing); a compile whose own evidence is a changed input
            # shape or baked-in value is the kind that comes back with the next new value, early or not - and so
            # is one right after it whose evidence says the ops did not change (same graph size)
            varying = any(e.detail.cause in VARYING for e in u.evidence) or (varying and _same_ops(u))
            u.klass = RECOMPILE if varying else WARMUP
        for u in us[start:]:
            u.klass = RECOMPILE
    return by_key


def _settling(u: CompileUnit) -> bool:
    """The unit's own evidence explains it, and only by causes a loop shows once while it warms up."""
    found = [e.detail.cause for e in u.evidence if e.detail.cause not in (None, "identical")]
    return bool(found) and all(c in SETTLING for c in found)


def _same_ops(u: CompileUnit) -> bool:
    """The unit's only evidence is the cheap one, and it says the graph kept its size: inputs or constants
    changed, not the ops."""
    sizes = [e.detail.graph_size for e in u.evidence]
    return bool(sizes) and all(s and len(s) == 2 and s[0] == s[1] and not e.detail.cause
                               for s, e in zip(sizes, u.evidence))


def causes(us: list[CompileUnit]) -> tuple[Counter, list[Event]]:
    """Causes seen in these units' own evidence, and the events that carry them."""
    seen: Counter = Counter()
    events: list[Event] = []
    for u in us:
        for e in u.evidence:
            c = e.detail.cause
            if c and c != "identical":
                seen[c] += 1
                events.append(e)
    return seen, events
