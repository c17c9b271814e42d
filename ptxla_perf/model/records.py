"""Backend-neutral per-step records: the one shape every adapter produces and every analysis reads."""
from __future__ import annotations

import functools
import operator
from dataclasses import MISSING, asdict, dataclass, field, fields
from typing import Any

from .faults import guarded


class Shared(list):
    """A list that records share instead of each holding its own equal copy: an empty list field, the same shapes
    every step. Every object a record keeps is one more that Python's garbage collector tracks, and a long run's
    records make its full collections frequent (~15 objects per step kept: one full collection of a JAX process
    every ~2000 steps, ~0.2 s each). Equal to a plain list and written as one; changing it raises (a record that
    needs its own list makes one: `rec.hot_lines = [...]`, fold.py's copies)."""

    __slots__ = ()

    def _frozen(self, *args, **kwargs):
        raise TypeError("a list shared among records cannot be changed (records.Shared): make a new list")

    append = extend = insert = remove = pop = clear = sort = reverse = _frozen
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _frozen

    def __reduce_ex__(self, protocol):  # copy, deepcopy and pickle rebuild it from its items (no append)
        return Shared, (list(self),)


EMPTY = Shared()  # the empty list every record without hashes, boundaries or sampled lines shares


def shared(value: list, last: Shared | None) -> Shared:
    """`value` as a Shared list: `last` when equal (the previous step's: nothing new kept), else a new one."""
    return last if last is not None and last == value else Shared(value)


@dataclass
class Location:
    """A line of the user's code (never a frame inside torch, torch_xla, jax or ptxla_perf)."""

    file: str
    line: int
    function: str

    def short(self) -> str:
        return f"{self.file}:{self.line} ({self.function})"


@dataclass
class Transfers:
    """A step's transfers one way. Records may share one (the JAX adapter's, where equal): change a copy."""

    count: int = 0
    bytes: int | None = None  # None where the backend cannot tell


@dataclass
class CallEvidence:
    """What attribution saw at one user call: the call, the library frame it went through (`via`), the shapes and
    bytes it moved, how many transfers it made (repeats at one line in one step add up)."""

    call: str | None = None
    via: str | None = None
    shapes: list | None = None
    bytes: int | None = None
    transfers: int = 1
    compiles: int | None = None  # torch_xla: compiles and graph launches the call caused
    launches: int | None = None
    boundary: int | None = None  # the boundary of an iteration it came from (iterations.group)
    extra: dict[str, Any] = field(default_factory=dict)  # what an adapter adds beyond these fields


@dataclass
class ReadEvidence(CallEvidence):
    """A device-to-host read (`device_to_host_sync`), or a graph executed early without one (`graph_break`)."""

    closure: bool = False  # inside xm.add_step_closure (the recommended pattern)


@dataclass
class FallbackEvidence(CallEvidence):
    """A call whose ops fell back to the CPU (`op_fallback`): the ops, and the copies to the host they made."""

    transfers: int = 0
    ops: list[str] = field(default_factory=list)
    closure: bool = False


@dataclass
class TransferEvidence(CallEvidence):
    """Host data copied into a compiled call (`host_to_device_transfer`, JAX): what kind of host data, and
    whether the copy is avoidable (the same host buffer again, Python lists, arrays resharded every call)."""

    arrays: int | None = None
    source: list[str] | None = None
    repeated_buffers: int | None = None
    avoidable: bool = True
    origins: dict[str, int] | None = None  # bytes by origin: data | round_trip | host_random | host_made
    made_by: list[str] | None = None  # what made the non-data values (the source expression, the read line)
    eager: bool = False  # copied outside any jitted call (jnp.array / jnp.asarray of host data)
    seconds: float | None = None  # eager: the jnp.array/jnp.asarray call's own time (its dispatch and copy)


@dataclass
class CompileEvidence:
    """A compile of one graph identity (`key`, compiles.GraphKey) and what its own evidence says differed."""

    key: str | None = None
    unit: bool = False  # JAX: this event is a compile unit of its own (count, seconds)
    count: int = 1
    seconds: float = 0.0
    first: bool = False
    cause: str | None = None
    special_scalars: bool = False
    differences: list[str] = field(default_factory=list)
    graph_hashes: list[str] = field(default_factory=list)
    graph_size: list[int] | None = None
    ops: list[str] = field(default_factory=list)
    call: str | None = None
    evidence: str | None = None  # which cheap evidence explained it ("graph size")
    indexed_with: list | None = None  # a changing Python int index (torch_xla)
    boundary: int | None = None
    new_shapes: list | None = field(default=None, metadata={"private": True})  # resolved into a line, not shown
    copied: list | None = field(default=None, metadata={"private": True})  # [old, new] bytes copied in (torch_xla)
    shape_call: str | None = field(default=None, metadata={"private": True})  # torch function a size came from
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class DonationEvidence(CallEvidence):
    """A jitted call whose outputs replace its inputs with nothing donated (`missing_donation`, JAX): how many
    arrays, their bytes and shapes, and the arguments they came in as."""

    arrays: int | None = None
    argument: list[str] | None = None


@dataclass
class HolderEvidence(CallEvidence):
    """The container that holds the live device values of a growing run (`memory_growth`, live_holders.py): its
    type (`call`), its name where the user's frames have one, how many device values and their bytes."""

    holder: str | None = None
    items: int | None = None
    bytes_per_item: int | None = None


@dataclass
class SpmdEvidence:
    """One sharded step graph (`spmd`, torch_xla): the mesh, its sharded inputs, the collectives the SPMD
    partitioner put in and their share of the bytes one device's graph accesses."""

    graph: str | None = None
    devices: int | None = None
    meshes: list | None = None
    inputs: int | None = None
    sharded_inputs: int | None = None
    collectives: dict | None = None  # op -> {count, bytes}; None where the partitioned module is not known
    collective_bytes: int | None = None
    bytes_accessed: float | None = None
    collective_share_of_bytes: float | None = None
    collectives_error: str | None = None
    # the boundary of an iteration it came from (iterations.group stamps every evidence's); the graph's story, not
    # the boundary's: not shown
    boundary: int | None = field(default=None, metadata={"private": True})
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class GraphBreakEvidence(CallEvidence):
    """Where torch.compile (dynamo) broke the graph (`dynamo_graph_break`): dynamo's reason; `via` the library
    frame when the user's line is not known."""

    reason: str | None = None


EVIDENCE: dict[str, type] = {"device_to_host_sync": ReadEvidence, "graph_break": ReadEvidence,
                             "data_wait": CallEvidence, "eager_ops": CallEvidence,
                             "op_fallback": FallbackEvidence, "host_to_device_transfer": TransferEvidence,
                             "compile": CompileEvidence, "dynamo_compile": CompileEvidence,
                             "missing_donation": DonationEvidence, "memory_growth": HolderEvidence,
                             "spmd": SpmdEvidence, "dynamo_graph_break": GraphBreakEvidence}
Evidence = CallEvidence | CompileEvidence | SpmdEvidence


def evidence(kind: str, detail: "dict[str, Any] | Evidence | None" = None) -> Evidence:
    """The typed evidence of an event kind from an adapter's keywords (unknown keys kept in `extra`)."""
    cls = EVIDENCE.get(kind, ReadEvidence)
    if isinstance(detail, cls):
        return detail
    d = dict(detail or {}) if not isinstance(detail, (CallEvidence, CompileEvidence, SpmdEvidence)) else \
        evidence_json(detail)
    d = {k: v for k, v in d.items() if not k.startswith("_")}  # an adapter's private bookkeeping is no evidence
    known = _known(cls)
    ev = cls(**{k: v for k, v in d.items() if k in known})
    ev.extra.update({k: v for k, v in d.items() if k not in known})
    return ev


@functools.lru_cache(maxsize=None)
def _known(cls: type) -> frozenset:
    """An evidence class's field names (dataclasses.fields walks them anew: ~10 us, at every event)."""
    return frozenset(f.name for f in fields(cls)) - {"extra"}


def evidence_json(ev: Evidence) -> dict[str, Any]:
    """The evidence as the report shows it: the fields an adapter set (not the defaults), and its extras."""
    out = {f.name: getattr(ev, f.name) for f in fields(ev)
           if f.name != "extra" and not f.metadata.get("private") and getattr(ev, f.name) != _default(f)}
    out.update(ev.extra)
    return out


def _default(f) -> Any:
    return f.default_factory() if f.default_factory is not MISSING else f.default


@dataclass
class Event:
    """Something that happened inside a step at a user line: a host read, a fallback op, an early execution,
    an implicit transfer, a compile. Adapters emit these only on attribution steps (see docs/attribution.md).
    `detail` is the kind's typed evidence (EVIDENCE); an adapter may pass its keywords as a dict."""

    kind: str  # device_to_host_sync | op_fallback | graph_break | host_to_device_transfer | compile
    location: Location | None
    detail: Any = None

    def __post_init__(self) -> None:
        self.detail = evidence(self.kind, self.detail)

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "location": asdict(self.location) if self.location else None,
                "detail": evidence_json(self.detail)}


@dataclass
class Boundary:
    """The compact form an iteration keeps of each step boundary it grouped (index = the session's boundary
    count): what the compile classes (slots) and the graph-break rule read, and what `steps[].boundaries` shows."""

    index: int
    wall_time_s: float
    site: Location | None
    compiles: int
    compile_time_s: float
    executions: int
    early_executions: int
    device_to_host: int
    optimizer_steps: int
    backward_calls: int
    launched: bool

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(slots=True)
class StepRecord:
    """One step boundary as an adapter reports it, or (after `iterations.group`) one training/eval iteration
    made of several boundaries, listed in `boundaries`. Slotted: created at every boundary, and an instance dict of
    more than 30 keys is no longer key-shared (a larger allocation from the system allocator, which contends with
    the runtime's threads right after a graph launch: ~0.3 ms per boundary measured)."""

    index: int
    wall_time_s: float  # from the previous step boundary (or the session start) to this one
    site: Location | None = None  # where the step boundary was called (the user's sync / step call)
    compiles: int = 0  # uncached compiles
    compile_time_s: float = 0.0
    cached_compiles: int = 0
    executions: int = 0
    device_to_host: Transfers = field(default_factory=Transfers)
    host_to_device: Transfers = field(default_factory=Transfers)
    fallback_ops: dict[str, int] = field(default_factory=dict)
    graph_hashes: list[str] = field(default_factory=list)
    attributed: bool = False  # this step ran with line attribution on (slower; excluded from step-time stats)
    phase: str | None = None  # recipe-provided label, e.g. "train" / "eval"
    samples: int | None = None  # recipe-provided, for throughput
    tokens: int | None = None
    model_flops: float | None = None  # user- or recipe-given model FLOPs of the step (roofline's model_mfu)
    events: list[Event] = field(default_factory=list)
    own_time_us: float | None = None  # ptxla_perf's own host time at this boundary (the overhead we add)
    # --- what the iteration grouping and the rules read (docs/report.md: "steps are iterations") ---
    optimizer_steps: int = 0  # optimizer.step() calls since the previous boundary
    backward_calls: int = 0  # autograd backward calls since the previous boundary
    grad_enabled: bool | None = None  # torch.is_grad_enabled() at the boundary (eval loops run under no_grad)
    early_executions: int = 0  # graphs launched outside the step boundary itself (a host read forcing them)
    device_to_host_time_s: float | None = None  # time spent in device-to-host reads (incl. waiting for the device)
    closure_reads: int = 0  # reads inside xm.add_step_closure closures (the recommended pattern), not in device_to_host
    data_wait_s: float | None = None  # time the host waited for input data in this step (session.data_wait())
    boundaries: list[Boundary] = field(default_factory=list)  # iterations: the boundaries they grouped
    # --- cost of the graphs the step ran (roofline.py); None where no cost is known (docs/roofline.md) ---
    flops: float | None = None
    bytes_accessed: float | None = None
    transcendentals: float | None = None
    # --- torch_xla eager mode (backends/torch_xla/modes.py): absent from the JSON where not measured ---
    eager_launches: int = 0  # eager ops run outside the torch_xla.compile'd step since the previous boundary
    eager_time_s: float | None = None  # wall time from the end of the previous boundary (after ptxla_perf's own
    #                                    work there) to the compiled step's start
    # --- where the step's time went: what figures.breakdown derives the components from (docs/report.md) ---
    launch_time_s: float | None = None  # inside the step's sync / jitted calls, net of compile and device wait
    device_wait_s: float | None = None  # blocked on the device: torch_xla in the sync call or wait_device_ops,
    #                                    JAX in block_until_ready
    queue_wait_s: float | None = None  # JAX: inside jitted calls, waiting for the device (a full queue of in-flight
    #                                   executions, a synchronous copy): each call's wall time net of its CPU time
    #                                   and compile time
    # --- pacing.py: an explicit wait (a read, block_until_ready) that waited for several steps' queued work, spread
    # over those steps (the host ran ahead; the device paced them) ---
    spread_out_s: float | None = None  # this record's explicit waits moved into the spread
    spread_in_s: float | None = None  # this record's share of the spread wait
    device_time_s: float | None = None  # the device's busy time on the step's graphs: torch_xla ExecuteTime net
    #                                     of queue wait; JAX on sampled steps, from its outputs' readiness
    #                                     (backends/jax/ready.py)
    host_cpu_s: float | None = None  # the training thread's CPU time outside those calls and the loader's next()
    sampled_data_s: float | None = None  # the stack sampler's estimate of the time spent pulling the next batch
    hot_lines: list[dict] = field(default_factory=list)  # sampled lines: file, line, function, kind, seconds
    # live device memory at the boundary (memory.py): (live device tensors/arrays, their bytes or None where the
    # backend cannot tell cheaply); None where not sampled
    live: tuple | None = None
    # --- a long run's folded iterations (fold.py): this record stands for `repeat` consecutive iterations, its
    # counts each one's, its timed fields their mean; `parts` the exact mean of their time breakdowns; `sample`
    # per-iteration figures of up to fold.SAMPLE of them (what percentiles and per-step shares are taken from) ---
    repeat: int = 1
    parts: dict | None = None
    sample: Any = None
    step_range: tuple | None = None  # (fastest, slowest) step time of the folded iterations, exact
    variants: list | None = None  # folded records of the iterations inside this one's range that differ in their
    #                               reads, transfers or events (a logging read every N steps): fold.Folded.expanded
    index_list: list | None = None  # a variant's iterations (the first fold.INDICES of them), not a range

    def copy(self, **changes: Any) -> "StepRecord":
        """A shallow copy with `changes`. iterations.group copies every boundary of a long run's latest part at
        each fold (a per-step cost of long runs), so: every field read by one C call and passed positionally to
        the generated __init__, whose assignments are bytecode (dataclasses.replace walks the fields and passes
        keywords: ~5x slower; a getattr/setattr loop: ~2x)."""
        new = StepRecord(*_VALUES(self))
        for name, value in changes.items():
            setattr(new, name, value)
        return new

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "StepRecord":
        """A boundary's record as `to_json` wrote it (the steps file, steps_file.py): the analysis can be run
        again on it. The figures a report adds to steps[] (steady, step_time_s, ...) are not record fields."""
        known = {f.name for f in fields(cls)}
        kw = {k: v for k, v in d.items() if k in known}
        loc = lambda x: Location(**x) if x else None  # noqa: E731
        kw["site"] = loc(d.get("site"))
        for key in ("device_to_host", "host_to_device"):
            kw[key] = Transfers(**(d.get(key) or {}))
        kw["events"] = [Event(e["kind"], loc(e.get("location")), e.get("detail")) for e in d.get("events") or []]
        kw["boundaries"] = [Boundary(**dict(b, site=loc(b.get("site")))) for b in d.get("boundaries") or []]
        if d.get("live_arrays") is not None:
            kw["live"] = (d["live_arrays"], d.get("live_bytes"))
        return cls(**kw)

    @property
    def live_arrays(self) -> int | None:
        return self.live[0] if self.live is not None else None

    @property
    def live_bytes(self) -> int | None:
        return self.live[1] if self.live is not None else None

    def to_json(self) -> dict[str, Any]:
        # a folded record's figures and variants are the analysis's, never the JSON: not walked by asdict either
        d = asdict(self.copy(**dict.fromkeys(_FOLDED)) if self.repeat > 1 or self.index_list is not None else self)
        for key in _FOLDED:
            del d[key]
        if d["repeat"] == 1:
            del d["repeat"]
        live = d.pop("live")
        if live is not None:  # the report's steps[].live_arrays / live_bytes
            d["live_arrays"], d["live_bytes"] = live[0], live[1]
        # each event on its own (faults.py, point `evidence.KIND`): one that cannot be written is left out
        d["events"] = [j for j in (guarded(f"evidence.{e.kind}", e.to_json) for e in self.events) if j is not None]
        if not d["events"]:
            del d["events"]
        if not d["boundaries"]:
            del d["boundaries"]
        if d["eager_time_s"] is None:  # not eager mode with a compiled step: not measured
            del d["eager_launches"], d["eager_time_s"]
        if not d["hot_lines"]:
            del d["hot_lines"]
        if d["model_flops"] is None:  # given only where the user or a recipe knows them
            del d["model_flops"]
        for key in ("queue_wait_s", "spread_out_s", "spread_in_s"):  # measured by some backends, on some steps
            if d[key] is None:
                del d[key]
        return d


_SLOTS = tuple(f.name for f in fields(StepRecord))  # (the __init__'s parameters, in order: every field is one)
_VALUES = operator.attrgetter(*_SLOTS)
_FOLDED = ("parts", "sample", "step_range", "variants", "index_list")  # fold.py's, not the report's
