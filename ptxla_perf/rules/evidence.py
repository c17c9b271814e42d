"""The evidence of the iteration scope's per-line findings (rules/iteration.py): host reads, host->device copies,
early graphs, recompiles and warm-up compiles. Each writes the keys those findings have always written, in the same
order, only the ones seen (docs/report.md: `findings[].evidence`); a key that is None is one not seen unless the
class says it writes it anyway."""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from ..model.finding import Evidence


def _seen(ev: Evidence, skip: tuple[str, ...] = (), always: tuple[str, ...] = ()) -> dict[str, Any]:
    """The fields of `ev` in order, those set (not None) and those in `always`, less `skip`."""
    return {f.name: v for f in fields(ev)  # type: ignore[arg-type]
            if f.name not in skip and ((v := getattr(ev, f.name)) is not None or f.name in always)}


@dataclass
class SeenCalls(Evidence):
    """What attribution saw at a finding's line (its events): the user's calls (call -> times seen) and the first
    library frame, shapes, bytes, ops, dtype and source the events carry. graph_break's evidence for graphs
    launched early; the other findings here start with it."""

    calls: dict[str, int] | None = None
    via: str | None = None
    shapes: list | None = None
    bytes: int | None = None
    ops: list[str] | None = None
    dtype: Any = None
    source: Any = None

    def to_json(self) -> dict[str, Any]:
        return _seen(self)


@dataclass
class ClosureReadEvidence(Evidence):
    """device_to_host_sync (info) for values read inside step closures: `closure: true` and what was seen."""

    seen: SeenCalls

    def to_json(self) -> dict[str, Any]:
        return {"closure": True, **self.seen.to_json()}


@dataclass
class HostReadEvidence(Evidence):
    """device_to_host_sync: what was seen at the line, the phase's iterations with reads, the wait per step, the
    bytes read; the graphs launched early per step, how the value decides control flow (`control_flow`,
    `statement`) and `once_per_pass` where they apply."""

    seen: SeenCalls
    phase: str | None
    iterations_with_reads: int
    phase_iterations: int
    wait_ms_per_step: float
    bytes_total: int
    extra_executions_per_step: float | None = None
    control_flow: str | None = None
    statement: str | None = None  # written with control_flow
    once_per_pass: bool | None = None

    def to_json(self) -> dict[str, Any]:
        always = ("phase", "statement") if self.control_flow is not None else ("phase",)
        return {**self.seen.to_json(), **_seen(self, ("seen",), always)}


@dataclass
class UploadEvidence(Evidence):
    """host_to_device_transfer: what was seen at the line, the arrays copied and the calls whose copy is avoidable;
    bytes by origin where the copy is not input data (transfer_origin.py); eager uploads' own time."""

    seen: SeenCalls
    arrays: int
    avoidable_calls: int
    origins: dict[str, int] | None = None  # with made_by and bytes_per_iteration (transfer_origin.Avoidable)
    made_by: list[str] | None = None
    bytes_per_iteration: int | None = None
    seconds_per_iteration: float | None = None
    share_of_step: float | None = None  # written with seconds_per_iteration (None where the step is not known)

    def to_json(self) -> dict[str, Any]:
        always = ("share_of_step",) if self.seconds_per_iteration is not None else ()
        return {**self.seen.to_json(), **_seen(self, ("seen",), always)}


@dataclass
class RecompileEvidence(Evidence):
    """recompilation: the graph's key, its compile seconds and their share of the run's wall time, the iterations
    and how many of them its own evidence explains; the cause (with every cause seen), what differed and the graph
    hashes where a compile's own evidence says; the line that cut the graph and the one where what changed came
    from (rules/iteration.py's `_which_lines`)."""

    key: str
    compile_time_s: float
    share_of_wall_time: float
    iterations: list[int]
    phase: str | None
    explained: int
    unexplained: int
    cause: str | None = None  # written with causes
    causes: dict[str, int] | None = None
    differences: list[str] | None = None
    graph_hashes: list[str] | None = None
    graph_cut_at: dict | None = None
    changed_at: dict | None = None

    def to_json(self) -> dict[str, Any]:
        return _seen(self, always=("phase", "cause") if self.causes is not None else ("phase",))


@dataclass
class WarmupEvidence(Evidence):
    """warmup_compiles: the graph's key, the most common cause, whether a special scalar was among them, each
    warm-up compile's own cause, what differed, the compile seconds; the lines as in RecompileEvidence."""

    key: str
    cause: str | None
    special_scalars: bool
    compile_causes: list[str | None]
    differences: list[str]
    compile_time_s: float
    graph_cut_at: dict | None = None
    changed_at: dict | None = None

    def to_json(self) -> dict[str, Any]:
        return _seen(self, always=("cause",))
