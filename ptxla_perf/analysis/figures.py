"""Derived figures: every number the summary, the rules and the views share, defined and computed once.

The model is XProf's signal provider: a figure is named once, derived once from the iterations, and read by name
everywhere else. Figures produces typed values (model/summary.py): the `Summary` and a `StepRow` per iteration, which the
rules (rules/iteration.py), `merge`, the HTML page, the TensorBoard scalars, `diff`, the roofline and the sweep table read;
none of them recomputes a step time, a read count or a steady set of its own. Each iteration's own figures (step
time, breakdown parts, reads) are derived once in the iterations value (iterset.py), which also weighs a long run's
folded records. Summary key names and units are `summary_keys.py`'s.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Callable

from . import breakdown as B
from . import iterations as I
from .breakdown import host_time_s, step_time_s  # per-record times (breakdown.py); other modules read them here
from .iterset import Iterations
from .stats import median, percentile, stats  # noqa: F401 - the views read the one definition from here
from ..model import summary_keys as K
from ..model.faults import guarded
from ..model.records import StepRecord
from ..model.summary import StepRow, Stats, Summary, steady_of

TRAIN, EVAL = "train", "eval"


# --- which iterations time the loop --------------------------------------------------------------------------
def steady_steps(train: list[StepRecord], warmup: int) -> list[StepRecord]:
    """Training iterations that time the loop as it really runs: after warm-up, no compile, no attribution
    overhead. Falls back to every post-warm-up iteration for runs too short to have such iterations."""
    return steady_of(train, warmup)


STEADY, ATTRIBUTED_INCLUDED, NET_OF_COMPILE = "steady", "attributed_included", "net_of_compile"


def basis(steady: list[StepRecord]) -> str:
    """Which iterations the step-time statistics cover (summary.step_time_basis): the steady ones; where the run
    had none, those without a compile (attribution steps included); where every one compiled, each iteration's
    wall time net of its own measured compile time - compile time is never counted as step time."""
    if any(s.compiles for s in steady):
        return NET_OF_COMPILE
    return ATTRIBUTED_INCLUDED if any(s.attributed for s in steady) else STEADY


def basis_text(which: str | None, n: int) -> str:
    """Which steps the statistics cover, in words: the console and the page say the same."""
    return {NET_OF_COMPILE: f"over {n} steps, each net of its compile time (and ptxla_perf's own): every step after "
                            "warm-up compiled",
            ATTRIBUTED_INCLUDED: f"over {n} steps, attribution steps included: the run had no other"
            }.get(which or STEADY, f"over {n} steady steps")


def series(steady: list[StepRecord], what: str) -> list[float]:
    """A per-iteration figure over the steady iterations, in order: "step" (step time), "host" (host_time_s),
    "data" (data wait). Empty when any iteration lacks it (a figure half measured compares nothing). A folded
    record (fold.py) gives its mean: one value per record (iterset.Iterations.weighed gives one per iteration,
    with weights)."""
    if what == "step":
        return [step_time_s(s) for s in steady]
    get = host_time_s if what == "host" else (lambda s: s.data_wait_s)
    values = [get(s) for s in steady]
    return [] if any(v is None for v in values) else [float(v) for v in values]


# --- host reads net of CPU-fallback copies -------------------------------------------------------------------
class FallbackCopies:
    """A CPU fallback copies its inputs to the host: those copies are the fallback's, not reads of the user's.
    How many copies a fallback makes is measured where attribution saw it (the call that fell back and the
    transfers it made, `op_fallback` events): an iteration with the same fallback ops made as many; otherwise
    the measured copies per fallback op call scale; with nothing measured, a single copy beside a fallback."""

    def __init__(self, iterations: list[StepRecord]):
        self.by_ops: dict[frozenset, int] = {}
        copies = calls = 0
        for s in iterations:
            seen = [e.detail.transfers for e in s.events if e.kind == "op_fallback"]
            if not seen or not s.fallback_ops:
                continue
            self.by_ops[frozenset(s.fallback_ops.items())] = sum(seen)
            copies += sum(seen)
            calls += sum(s.fallback_ops.values())
        self.per_call = copies / calls if calls else None

    def __call__(self, s: StepRecord) -> int:
        n = s.device_to_host.count
        if not s.fallback_ops:
            return 0
        known = self.by_ops.get(frozenset(s.fallback_ops.items()))
        if known is None and self.per_call is not None:
            known = round(self.per_call * sum(s.fallback_ops.values()))
        if known is None:
            known = 1 if n <= 1 else 0
        return min(n, known)


# --- the figures of one analysis -----------------------------------------------------------------------------
@dataclass
class Figures:
    """The run's figures over its iterations (steps = training iterations; evaluation counted apart)."""

    iterations: list[StepRecord]
    train: list[StepRecord]
    warmup: int
    steady: list[StepRecord]
    recompiles_after_warmup: int
    copies: FallbackCopies = field(repr=False)
    host_to_device_bytes_total: int | None = None  # whole-run figure from the adapter (JAX), when it has one
    its: Iterations = field(default=None, repr=False)  # the iterations as one value (iterset.py): figures once

    def __post_init__(self) -> None:
        if self.its is None:
            self.its = Iterations(self.iterations, lambda s: s.device_to_host.count - self.copies(s))

    @classmethod
    def derive(cls, iterations: list[StepRecord], train: list[StepRecord], warmup: int, recompiles: int,
               host_to_device_bytes: int | None = None) -> "Figures":
        return cls(iterations, train, warmup, steady_steps(train, warmup), recompiles, FallbackCopies(iterations),
                   host_to_device_bytes)

    @cached_property
    def train_its(self) -> Iterations:
        return self.its.of(self.train)

    @cached_property
    def steady_its(self) -> Iterations:
        """The steady iterations as one value: what the step-time statistics and the timing rules read."""
        return self.its.of(self.steady)

    # per iteration
    def breakdown(self, s: StepRecord) -> dict[str, float] | None:
        """Where the iteration's time went (breakdown.py): components summing to its wall time; None where the
        adapter did not measure them."""
        return guarded("figure.time_breakdown", lambda: B.rounded(self.its.parts(s)))

    def steady_breakdown(self) -> dict[str, Any] | None:
        """The mean breakdown of the steady iterations (summary.time_breakdown): what the console line, the
        roofline verdict and the rules read."""
        return self.steady_its.breakdown()

    def reads(self, s: StepRecord) -> int:
        """Host reads of the user's code in one iteration: device-to-host transfers net of fallback copies (derived
        once, `its`)."""
        return self.its.reads(s)

    # over the run
    @property
    def steps(self) -> int:
        return self.train_its.count

    @property
    def evals(self) -> list[StepRecord]:
        return [s for s in self.iterations if s.phase == EVAL]

    def per_step(self, total: float | None) -> float | None:
        return total / self.steps if self.steps and total is not None else None

    @property
    def host_reads(self) -> int:
        return self.train_its.total(self.reads)

    @property
    def fallback_copies(self) -> int:
        return self.train_its.total(self.copies)

    @property
    def fallback_ops(self) -> dict[str, int]:
        total: Counter = Counter()
        for s in self.iterations:
            total.update(s.fallback_ops)
        return dict(total)

    def throughput(self) -> dict[str, float]:
        """Rates over the steady iterations' step time (net of compile, as the summary's step time)."""
        steady, its = self.steady, self.steady_its
        t = its.total(its.step)
        out: dict[str, float] = {}
        if not t:
            return out
        moved = [s.host_to_device.bytes for s in steady if s.host_to_device.bytes is not None]
        if moved and len(moved) == len(steady) and sum(moved):
            # host->device bytes per second of steady steps
            out["mb_per_s"] = its.total(lambda s: s.host_to_device.bytes) / t / 1e6
        samples = [s.samples for s in steady if s.samples]
        if samples and len(samples) == len(steady):
            n = its.total("samples")
            out["samples_per_s"] = n / t
            out["us_per_sample"] = 1e6 * t / n
        tokens = [s.tokens for s in steady if s.tokens]
        if tokens and len(tokens) == len(steady):
            out["tokens_per_s"] = its.total("tokens") / t
        return out

    def row(self, s: StepRecord, steady: set[int] | None = None) -> StepRow:
        """The iteration as every view reads it (values.StepRow)."""
        steady = {r.index for r in self.steady} if steady is None else steady
        return StepRow(s.index, s.phase, s.index in steady, s.compiles, s.attributed, s.wall_time_s,
                       s.compile_time_s, self.its.step(s), self.reads(s), s.device_to_host.count, host_time_s(s),
                       s.data_wait_s, self.breakdown(s), s.executions, s.host_to_device.count, s.live_arrays,
                       s.live_bytes, I.weight(s))

    def rows(self) -> list[StepRow]:
        steady = {r.index for r in self.steady}
        return [self.row(s, steady) for s in self.iterations]

    def step_json(self, s: StepRecord, row: StepRow) -> dict[str, Any]:
        """The iteration's `steps[]` record: the adapter's record (the gross device-to-host count under its own
        name, `device_to_host_transfers`) and the row's figures."""
        d = s.to_json()
        d[K.STEP_D2H_TRANSFERS] = d.pop(K.OLD_STEP_D2H)
        d.update(row.to_json())
        return d

    @cached_property  # read by the summary and several rules; over a long run's samples it is not free
    def step_time(self) -> Stats | None:
        """The run's step time: statistics over the steady iterations, each net of its compile time."""
        return Stats.from_json(self.steady_its.stats("step"))

    def summary(self) -> Summary:
        """The report's `summary` (findings_by_severity and the sections' figures are the assembler's)."""
        train, its = self.train_its, self.its
        d2h_bytes = train.total(lambda s: s.device_to_host.bytes or 0)
        h2d_bytes = self.host_to_device_bytes_total if self.steps else None
        transfers = train.total(lambda s: s.device_to_host.count)
        executions = train.total("executions")
        h2d = train.total(lambda s: s.host_to_device.count)
        return Summary(
            steps=self.steps, warmup_steps=self.warmup, steady_steps=self.steady_its.count,
            eval_steps=len(self.evals),
            boundaries=its.total(lambda s: max(1, len(s.boundaries))),
            wall_time_s=its.total("wall_time_s"),
            step_time_s=_figure("step_time_s", lambda: self.step_time), step_time_basis=basis(self.steady),
            eval_step_time_s=_figure("eval_step_time_s", lambda: Stats.from_json(
                stats([s.wall_time_s for s in self.evals if not s.compiles]))),
            compiles=sum(s.compiles for s in self.iterations),
            compile_time_s=sum(s.compile_time_s for s in self.iterations),
            cached_compiles=its.total("cached_compiles"),
            recompiles_after_warmup=self.recompiles_after_warmup,
            distinct_graphs=len({h for s in self.iterations for h in s.graph_hashes}) or None,
            executions=executions, device_to_host=self.host_reads, device_to_host_transfers=transfers,
            fallback_copies=self.fallback_copies, host_to_device=h2d, device_to_host_transfer_bytes=d2h_bytes,
            host_to_device_bytes=int(h2d_bytes) if h2d_bytes is not None else None,
            executions_per_step=self.per_step(executions), device_to_host_per_step=self.per_step(self.host_reads),
            device_to_host_transfers_per_step=self.per_step(transfers),
            fallback_copies_per_step=self.per_step(self.fallback_copies), host_to_device_per_step=self.per_step(h2d),
            device_to_host_transfer_bytes_per_step=self.per_step(d2h_bytes),
            host_to_device_bytes_per_step=self.per_step(h2d_bytes),
            fallback_ops=self.fallback_ops, throughput=_figure("throughput", self.throughput, {}),
            overhead_us_per_step=_figure("overhead_us_per_step", lambda: Stats.from_json(
                self.steady_its.stats("own", partial=True))),
            host_time_s=_figure("host_time_s", lambda: self._stats("host_time")),
            data_wait_s=_figure("data_wait_s", lambda: self._stats("data_wait")),
            time_breakdown=_figure("time_breakdown", self.steady_breakdown))

    def _stats(self, what: str) -> Stats | None:
        return Stats.from_json(self.steady_its.stats(what))


def _figure(name: str, derive: Callable[[], Any], default: Any = None) -> Any:
    """One derived figure of the summary, on its own (faults.py, point `figure.NAME`): one that fails is left
    out (null) and listed under profiler_errors; the steps, the counts and the other figures are kept."""
    return guarded(f"figure.{name}", derive, default=default)

