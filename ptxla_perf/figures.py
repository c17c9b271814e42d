"""Derived figures: every number the summary, the rules and the views share, defined and computed once.

The model is XProf's signal provider: a figure is named once, derived once from the iterations, and read by name
everywhere else. The summary (`Figures.summary()`), the rules (findings.py), `merge`, the HTML page, the
TensorBoard scalars, `diff` and the sweep table all read what is derived here; none of them recomputes a step
time, a read count or a steady set of its own. Summary key names and units are `summary_keys.py`'s.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable

from . import breakdown as B
from . import summary_keys as K
from .records import StepRecord

TRAIN, EVAL = "train", "eval"


# --- statistics: one definition ----------------------------------------------------------------------------
def percentile(sorted_values: list[float], p: float) -> float:
    """Linear interpolation between the closest ranks (numpy's default): the one percentile of every report."""
    v = sorted_values
    k = (len(v) - 1) * p
    lo, hi = int(k), min(int(k) + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (k - lo)


def median(values: Iterable[float]) -> float | None:
    v = sorted(values)
    return percentile(v, 0.5) if v else None


def stats(values: Iterable[float], ndigits: int | None = None) -> dict[str, float] | None:
    """p50/p90, mean, min, max, n: the one statistics shape every section of a report uses."""
    v = sorted(values)
    if not v:
        return None
    out = {"p50": percentile(v, 0.5), "p90": percentile(v, 0.9), "mean": sum(v) / len(v), "min": v[0],
           "max": v[-1]}
    if ndigits is not None:
        out = {k: round(float(x), ndigits) for k, x in out.items()}
    return {**out, "n": len(v)}


# --- which iterations time the loop --------------------------------------------------------------------------
def steady_steps(train: list[StepRecord], warmup: int) -> list[StepRecord]:
    """Training iterations that time the loop as it really runs: after warm-up, no compile, no attribution
    overhead. Falls back to every post-warm-up iteration for runs too short to have such iterations."""
    after = train[warmup:]
    clean = [s for s in after if not s.compiles and not s.attributed]
    return clean or [s for s in after if not s.compiles] or after


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


def step_time_s(s: StepRecord) -> float:
    """An iteration's step time: its wall time net of the compile time measured in it and, on an iteration that
    compiled or was attributed, of ptxla_perf's own time at its boundaries (the graph capture there can exceed the
    compile it sits beside). A steady iteration's own time (tens of µs of bookkeeping) stays in: its step time is
    its wall time, as every view plots it."""
    own = (s.own_time_us or 0.0) / 1e6 if (s.compiles or s.attributed) else 0.0
    return max(s.wall_time_s - s.compile_time_s - own, 0.0)


def host_time_s(s: StepRecord) -> float | None:
    """The part of an iteration the host kept itself busy: its wall time minus the time it waited in
    device-to-host reads (None where the wait was not measured)."""
    if s.device_to_host_time_s is None:
        return None
    return max(s.wall_time_s - s.device_to_host_time_s, 0.0)


def series(steady: list[StepRecord], what: str) -> list[float]:
    """A per-iteration figure over the steady iterations, in order: "step" (wall time), "host" (host_time_s),
    "data" (data wait). Empty when any iteration lacks it (a figure half measured compares nothing)."""
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

    @classmethod
    def derive(cls, iterations: list[StepRecord], train: list[StepRecord], warmup: int, recompiles: int,
               host_to_device_bytes: int | None = None) -> "Figures":
        return cls(iterations, train, warmup, steady_steps(train, warmup), recompiles, FallbackCopies(iterations),
                   host_to_device_bytes)

    # per iteration
    def breakdown(self, s: StepRecord) -> dict[str, float] | None:
        """Where the iteration's time went (breakdown.py): components summing to its wall time; None where the
        adapter did not measure them."""
        return B.rounded(B.components(s))

    def steady_breakdown(self) -> dict[str, Any] | None:
        """The mean breakdown of the steady iterations (summary.time_breakdown): what the console line, the
        roofline verdict and the rules read."""
        return B.steady(self.steady)

    def reads(self, s: StepRecord) -> int:
        """Host reads of the user's code in one iteration: device-to-host transfers net of fallback copies."""
        return s.device_to_host.count - self.copies(s)

    # over the run
    @property
    def steps(self) -> int:
        return len(self.train)

    @property
    def evals(self) -> list[StepRecord]:
        return [s for s in self.iterations if s.phase == EVAL]

    def per_step(self, total: float | None) -> float | None:
        return total / self.steps if self.steps and total is not None else None

    @property
    def host_reads(self) -> int:
        return sum(self.reads(s) for s in self.train)

    @property
    def fallback_copies(self) -> int:
        return sum(self.copies(s) for s in self.train)

    @property
    def fallback_ops(self) -> dict[str, int]:
        total: Counter = Counter()
        for s in self.iterations:
            total.update(s.fallback_ops)
        return dict(total)

    def throughput(self) -> dict[str, float]:
        steady = self.steady
        t = sum(s.wall_time_s for s in steady)
        out: dict[str, float] = {}
        if not t:
            return out
        moved = [s.host_to_device.bytes for s in steady if s.host_to_device.bytes is not None]
        if moved and len(moved) == len(steady) and sum(moved):
            out["mb_per_s"] = sum(moved) / t / 1e6  # host->device bytes per second of steady steps
        samples = [s.samples for s in steady if s.samples]
        if samples and len(samples) == len(steady):
            out["samples_per_s"] = sum(samples) / t
            out["us_per_sample"] = 1e6 * t / sum(samples)
        tokens = [s.tokens for s in steady if s.tokens]
        if tokens and len(tokens) == len(steady):
            out["tokens_per_s"] = sum(tokens) / t
        return out

    def summary(self) -> dict[str, Any]:
        """The report's `summary` block (findings_by_severity and the roofline's figures are the assembler's)."""
        train = self.train
        d2h_bytes = sum(s.device_to_host.bytes or 0 for s in train)
        h2d_bytes = self.host_to_device_bytes_total if self.steps else None
        out: dict[str, Any] = {
            K.STEPS: self.steps,
            K.WARMUP_STEPS: self.warmup,
            K.STEADY_STEPS: len(self.steady),
            K.EVAL_STEPS: len(self.evals),
            K.BOUNDARIES: sum(max(1, len(s.boundaries)) for s in self.iterations),
            K.WALL_TIME: sum(s.wall_time_s for s in self.iterations),
            K.STEP_TIME: stats(series(self.steady, "step")),
            K.STEP_TIME_BASIS: basis(self.steady),
            K.EVAL_STEP_TIME: stats([s.wall_time_s for s in self.evals if not s.compiles]),
            K.COMPILES: sum(s.compiles for s in self.iterations),
            K.COMPILE_TIME: sum(s.compile_time_s for s in self.iterations),
            K.CACHED_COMPILES: sum(s.cached_compiles for s in self.iterations),
            K.RECOMPILES: self.recompiles_after_warmup,
            K.DISTINCT_GRAPHS: len({h for s in self.iterations for h in s.graph_hashes}) or None,
            K.EXECUTIONS: sum(s.executions for s in train),
            K.D2H: self.host_reads,
            K.FALLBACK_COPIES: self.fallback_copies,
            K.H2D: sum(s.host_to_device.count for s in train),
            K.D2H_BYTES: d2h_bytes,
            K.H2D_BYTES: int(h2d_bytes) if h2d_bytes is not None else None,
            K.EXECUTIONS_PER_STEP: self.per_step(sum(s.executions for s in train)),
            K.D2H_PER_STEP: self.per_step(self.host_reads),
            K.FALLBACK_COPIES_PER_STEP: self.per_step(self.fallback_copies),
            K.H2D_PER_STEP: self.per_step(sum(s.host_to_device.count for s in train)),
            K.D2H_BYTES_PER_STEP: self.per_step(d2h_bytes),
            K.H2D_BYTES_PER_STEP: self.per_step(h2d_bytes),
            K.FALLBACK_OPS: self.fallback_ops,
            K.THROUGHPUT: self.throughput(),
            K.OVERHEAD: stats([s.own_time_us for s in self.steady if s.own_time_us is not None]),
            K.HOST_TIME: stats(series(self.steady, "host")),
            K.DATA_WAIT: stats(series(self.steady, "data")),
            K.TIME_BREAKDOWN: self.steady_breakdown(),
        }
        return out

