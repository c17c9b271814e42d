"""The adapter contract: what a backend gives the session. Everything after the records is backend-neutral.

An adapter turns one runtime's counters and hooks into `StepRecord`s (one per step boundary), and supplies the
backend's own words: how it finds steps, and the advice that goes into findings (a JAX report never mentions
`xm.add_step_closure`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Protocol, Sequence, runtime_checkable

from ..model.records import StepRecord


@runtime_checkable
class Adapter(Protocol):
    name: str
    step_detection: str  # how step boundaries are found, in words (report: run.step_detection)
    cfg: dict[str, Any]  # the attribution settings in force (report: run.attribution)
    notes: list[str]  # things that went wrong in a diagnostic, never fatal (report: run.attribution.notes)
    advice: Mapping[str, str]  # finding kind -> what to do, in this backend's terms (findings.GENERIC_ADVICE keys)
    rules: Sequence[Any]  # the backend's own rules (findings.Rule), run beside findings.RULES

    def start(self, on_boundary: Callable[[StepRecord], None]) -> None:
        """Install the hooks. Touches no runtime: the first boundary is where the runtime is known to be up."""

    def stop(self) -> StepRecord | None:
        """Remove the hooks; return what happened after the last boundary (not a step), or None."""

    def host_to_device_bytes(self) -> int | None:
        """The run's host-to-device bytes, where reading it per step costs too much; None when unknown."""

    def environment(self) -> dict[str, Any]:
        """Versions, device kind, process count/index (report: environment)."""

    def start_server(self, port: int) -> Any:
        """Start the backend's profiler server; return the object that keeps it alive."""

    def runaway(self, rec: StepRecord, cfg: Mapping[str, Any]) -> str | None:
        """What makes this boundary runaway compilation (guard.py), in words; None when it is not."""

    def process_index(self) -> int | None:
        """The rank as the runtime says it, asked only once the runtime is up; None when it cannot say."""

    def follow_spawn(self, wrap: Callable[[Callable], Any]) -> Callable[[], None] | None:
        """Make processes spawned through this backend's launcher run `wrap(fn)` in place of `fn` (spawn.py);
        return the undo, or None when the backend has no launcher."""

    def graph_costs(self) -> dict[str, Any]:
        """The cost of each distinct step graph seen (report: roofline.graphs) and how it was obtained: `source`
        ("xla_cost_analysis" | "hlo_text" | "unavailable"), `method` (in words), `graphs`, `notes`. The per-step
        sums are on the records (`StepRecord.flops`, `bytes_accessed`, `transcendentals`)."""

    def hlo_modules(self) -> dict[str, str]:
        """Optimized HLO text by module name (`jit_train_step`), for joining a capture's op events with
        per-instruction costs (roofline.top_ops); empty where the executed module's HLO is not known."""


# --- optional members: an adapter has them or not; the session asks once, when it starts (Capabilities.of) ---
@runtime_checkable
class SamplesCode(Protocol):
    def sampler_codes(self) -> tuple[set, set]:
        """The code objects the stack sampler counts as the framework's own (sampler.py): (data, framework)."""


@runtime_checkable
class Settles(Protocol):
    def settle(self, final: bool = False) -> None:
        """Complete the measurements taken in batches (torch_xla's device times) before a report reads them."""


@runtime_checkable
class MeasuresDeviceMemory(Protocol):
    def device_memory(self) -> dict[str, Any] | None:
        """The runtime's memory figures for the device (memory.py), or None."""


@runtime_checkable
class MeasuresGraphMemory(Protocol):
    def graph_memory(self, final: bool = True) -> dict[str, Any]:
        """Per-graph memory figures (`graphs`, `notes`); `final`: the run has ended (HLO may be compiled now)."""


@runtime_checkable
class Runs(Protocol):
    def ran(self) -> bool:
        """Whether the program has run work of its own on this backend yet (JAX: a jitted call), boundary or not:
        `profile` keeps this backend then, when the program imports the other framework (session/on_import.py)."""


@dataclass(frozen=True)
class Capabilities:
    """The optional members an adapter has, bound, or None: checked once when the session starts."""

    sampler_codes: Callable[[], tuple[set, set]] | None = None
    settle: Callable[..., None] | None = None
    device_memory: Callable[[], dict[str, Any] | None] | None = None
    graph_memory: Callable[..., dict[str, Any]] | None = None
    ran: Callable[[], bool] | None = None

    @classmethod
    def of(cls, adapter: Any) -> "Capabilities":
        return cls(adapter.sampler_codes if isinstance(adapter, SamplesCode) else None,
                   adapter.settle if isinstance(adapter, Settles) else None,
                   adapter.device_memory if isinstance(adapter, MeasuresDeviceMemory) else None,
                   adapter.graph_memory if isinstance(adapter, MeasuresGraphMemory) else None,
                   adapter.ran if isinstance(adapter, Runs) else None)

    def memory(self, final: bool) -> tuple[dict[str, Any] | None, dict[str, Any]]:
        """(the device's runtime figures or None, the per-graph figures) for the memory section."""
        return (self.device_memory() if self.device_memory else None), self.graphs(final)

    def graphs(self, final: bool) -> dict[str, Any]:
        """The per-graph figures for the memory section (`graphs`, `notes`)."""
        return self.graph_memory(final) if self.graph_memory else \
            {"graphs": [], "notes": ["this backend gives no memory analysis"]}
