"""Derived figures: every number the summary, the rules and the views share, defined and computed once.

The model is XProf's signal provider: a figure is named once, derived once from the iterations, and read by name
everywhere else. Figures produces typed values (model/summary.py): the `Summary` and a `StepRow` per iteration, which the
rules (rules/iteration.py), `merge`, the HTML page, the TensorBoard scalars, `diff`, the roofline and the sweep table read;
none of them recomputes a step time, a read count or a steady set of its own. Summary key names and units are
`summary_keys.py`'s.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Callable, Iterable

from . import breakdown as B
from . import fold
from . import iterations as I
from ..model import summary_keys as K
from ..model.faults import guarded
from ..model.records import StepRecord
from ..model.summary import StepRow, Stats, Summary, steady_of

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


def step_time_s(s: StepRecord) -> float:
    """An iteration's step time: its wall time net of the compile time measured in it and, on an iteration that
    compiled or was attributed, of ptxla_perf's own time at its boundaries (the graph capture there can exceed the
    compile it sits beside). A steady iteration's own time (tens of µs of bookkeeping) stays in: its step time is
    its wall time, as every view plots it."""
    own = (s.own_time_us or 0.0) / 1e6 if (s.compiles or s.attributed) else 0.0
    return max(B.paced_wall(s) - s.compile_time_s - own, 0.0)


def host_time_s(s: StepRecord) -> float | None:
    """The part of an iteration the host kept itself busy: its wall time minus the time it waited in
    device-to-host reads (None where the wait was not measured)."""
    if s.device_to_host_time_s is None:
        return None
    return max(s.wall_time_s - s.device_to_host_time_s, 0.0)  # the host's own: a spread wait is none of it


# --- a long run's folded records (fold.py): figures per iteration, weighed --------------------------------------
def figures_of(s: StepRecord) -> dict[str, float | None]:
    """One iteration's figures by name (fold.FIELDS, the breakdown's parts, its wall time and data_s)."""
    parts = B.components(s) or {}
    return {"step": step_time_s(s), "host_time": host_time_s(s), "data_wait": s.data_wait_s, "own": s.own_time_us,
            "wall": B.paced_wall(s), "data_s": B.data_s(s), **{c: parts.get(c) for c in B.COMPONENTS}}


def _columns(s: StepRecord, names: tuple[str, ...]) -> dict[str, list]:
    """A folded record's sampled figures by name (fold.column), with `wall` (its step time: folded iterations
    compile nothing) and `data_s` (the data wait, else the sampled estimate)."""
    cols = {n: fold.column(s, n) for n in names if n in fold.FIELDS}
    if "wall" in names:
        cols["wall"] = fold.column(s, "step")
    if "data_s" in names:
        cols["data_s"] = [v if v is not None else s.sampled_data_s for v in fold.column(s, "data_wait")]
    return cols


def per_iteration(records: list[StepRecord], names: tuple[str, ...]
                  ) -> Iterable[tuple[StepRecord, float, dict[str, float | None]]]:
    """(record, weight, figures by name) for each iteration the records stand for, the figures `names` only
    (`figures_of`'s names): a record in full is one of weight 1; a folded record gives each sampled iteration,
    weighing repeat / sampled (exact while it holds at most fold.SAMPLE iterations)."""
    for s in records:
        if s.sample is None:
            d = figures_of(s)
            yield s, 1.0, {n: d[n] for n in names}
            continue
        cols = _columns(s, names)
        n = fold.sampled(s)
        w = s.repeat / n
        for i in range(n):
            yield s, w, {name: col[i] for name, col in cols.items()}


def weighed(records: list[StepRecord], what: str, partial: bool = False) -> list[tuple[float, float]]:
    """(value, weight) of one figure over the iterations the records stand for (`per_iteration`). Empty when any
    iteration lacks it (a figure half measured compares nothing), unless `partial`: then those are left out."""
    out = []
    for s in records:
        if s.sample is None:
            v, w = figures_of(s)[what], 1.0
            values = [v]
        else:
            values, w = _columns(s, (what,))[what], s.repeat / fold.sampled(s)
        for v in values:
            if v is None:
                if partial:
                    continue
                return []
            out.append((float(v), w))
    return out


def hits(records: list[StepRecord], share: Callable[[dict], float | None], bound: float,
         names: tuple[str, ...]) -> tuple[int, list[int]]:
    """The iterations whose `share` (of their figures `names`) reaches `bound`: how many (folded records weighed)
    and their indices (a folded record's whole range where any of its sampled iterations does)."""
    n, marked = 0.0, {}
    for s, w, d in per_iteration(records, names):
        v = share(d)
        if v is not None and v >= bound:
            n += w
            marked[id(s)] = s
    return round(n), I.indices(marked.values())


def wstats(pairs: list[tuple[float, float]]) -> dict[str, float] | None:
    """`stats` of weighed values (`weighed`): the same figures as over the values repeated by their weights."""
    if not pairs:
        return None
    if all(w == 1.0 for _, w in pairs):
        return stats([v for v, _ in pairs])
    pairs = sorted(pairs)
    total = sum(w for _, w in pairs)
    cum, acc = [], 0.0
    for _, w in pairs:
        acc += w
        cum.append(acc)

    def at(rank: float) -> float:
        lo, hi = 0, len(cum) - 1
        while lo < hi:  # the first value whose cumulative weight passes the rank
            mid = (lo + hi) // 2
            if cum[mid] > rank:
                hi = mid
            else:
                lo = mid + 1
        return pairs[lo][0]

    def pct(p: float) -> float:
        k = (total - 1) * p
        lo = int(k)
        a, b = at(lo), at(min(lo + 1, total - 1))
        return a + (b - a) * (k - lo)

    return {"p50": pct(0.5), "p90": pct(0.9), "mean": sum(v * w for v, w in pairs) / total, "min": pairs[0][0],
            "max": pairs[-1][0], "n": round(total)}


def series(steady: list[StepRecord], what: str) -> list[float]:
    """A per-iteration figure over the steady iterations, in order: "step" (step time), "host" (host_time_s),
    "data" (data wait). Empty when any iteration lacks it (a figure half measured compares nothing). A folded
    record (fold.py) gives its mean: one value per record (`weighed` gives one per iteration, with weights)."""
    if what == "step":
        return [step_time_s(s) for s in steady]
    get = host_time_s if what == "host" else (lambda s: s.data_wait_s)
    values = [get(s) for s in steady]
    return [] if any(v is None for v in values) else [float(v) for v in values]


def _exact(d: dict[str, float] | None, records: list[StepRecord], what: str) -> dict[str, float] | None:
    """Statistics over folded records (fold.py) with the figures they keep exactly: the mean (from each record's
    means) and, of the step time, the fastest and slowest step. Unchanged where nothing is folded."""
    if d is None or all(s.sample is None for s in records):
        return d
    d = dict(d, mean=sum(figures_of(s)[what] * s.repeat for s in records) / I.count(records))
    if what == "step":
        ranges = [s.step_range or (step_time_s(s), step_time_s(s)) for s in records]
        d.update(min=min(lo for lo, _ in ranges), max=max(hi for _, hi in ranges))
    return d


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
        return guarded("figure.time_breakdown", lambda: B.rounded(B.components(s)))

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
        return I.count(self.train)

    @property
    def evals(self) -> list[StepRecord]:
        return [s for s in self.iterations if s.phase == EVAL]

    def per_step(self, total: float | None) -> float | None:
        return total / self.steps if self.steps and total is not None else None

    @property
    def host_reads(self) -> int:
        return sum(self.reads(s) * s.repeat for s in self.train)

    @property
    def fallback_copies(self) -> int:
        return sum(self.copies(s) * s.repeat for s in self.train)

    @property
    def fallback_ops(self) -> dict[str, int]:
        total: Counter = Counter()
        for s in self.iterations:
            total.update(s.fallback_ops)
        return dict(total)

    def throughput(self) -> dict[str, float]:
        """Rates over the steady iterations' step time (net of compile, as the summary's step time)."""
        steady = self.steady
        t = sum(step_time_s(s) * s.repeat for s in steady)
        out: dict[str, float] = {}
        if not t:
            return out
        moved = [s.host_to_device.bytes for s in steady if s.host_to_device.bytes is not None]
        if moved and len(moved) == len(steady) and sum(moved):
            # host->device bytes per second of steady steps
            out["mb_per_s"] = sum(s.host_to_device.bytes * s.repeat for s in steady) / t / 1e6
        samples = [s.samples for s in steady if s.samples]
        if samples and len(samples) == len(steady):
            n = I.total(steady, "samples")
            out["samples_per_s"] = n / t
            out["us_per_sample"] = 1e6 * t / n
        tokens = [s.tokens for s in steady if s.tokens]
        if tokens and len(tokens) == len(steady):
            out["tokens_per_s"] = I.total(steady, "tokens") / t
        return out

    def row(self, s: StepRecord, steady: set[int] | None = None) -> StepRow:
        """The iteration as every view reads it (values.StepRow)."""
        steady = {r.index for r in self.steady} if steady is None else steady
        return StepRow(s.index, s.phase, s.index in steady, s.compiles, s.attributed, s.wall_time_s,
                       s.compile_time_s, step_time_s(s), self.reads(s), s.device_to_host.count, host_time_s(s),
                       s.data_wait_s, self.breakdown(s), s.executions, s.host_to_device.count, s.live_arrays,
                       s.live_bytes, s.repeat)

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
        return Stats.from_json(_exact(wstats(weighed(self.steady, "step")), self.steady, "step"))

    def summary(self) -> Summary:
        """The report's `summary` (findings_by_severity and the sections' figures are the assembler's)."""
        train, its = self.train, self.iterations
        d2h_bytes = sum((s.device_to_host.bytes or 0) * s.repeat for s in train)
        h2d_bytes = self.host_to_device_bytes_total if self.steps else None
        transfers = sum(s.device_to_host.count * s.repeat for s in train)
        executions = I.total(train, "executions")
        h2d = sum(s.host_to_device.count * s.repeat for s in train)
        return Summary(
            steps=self.steps, warmup_steps=self.warmup, steady_steps=I.count(self.steady),
            eval_steps=len(self.evals),
            boundaries=sum(max(1, len(s.boundaries)) * s.repeat for s in its),
            wall_time_s=I.total(its, "wall_time_s"),
            step_time_s=_figure("step_time_s", lambda: self.step_time), step_time_basis=basis(self.steady),
            eval_step_time_s=_figure("eval_step_time_s", lambda: Stats.from_json(
                stats([s.wall_time_s for s in self.evals if not s.compiles]))),
            compiles=sum(s.compiles for s in self.iterations),
            compile_time_s=sum(s.compile_time_s for s in self.iterations),
            cached_compiles=I.total(self.iterations, "cached_compiles"),
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
                wstats(weighed(self.steady, "own", partial=True)))),
            host_time_s=_figure("host_time_s", lambda: self._stats("host_time")),
            data_wait_s=_figure("data_wait_s", lambda: self._stats("data_wait")),
            time_breakdown=_figure("time_breakdown", self.steady_breakdown))

    def _stats(self, what: str) -> Stats | None:
        return Stats.from_json(_exact(wstats(weighed(self.steady, what)), self.steady, what))


def _figure(name: str, derive: Callable[[], Any], default: Any = None) -> Any:
    """One derived figure of the summary, on its own (faults.py, point `figure.NAME`): one that fails is left
    out (null) and listed under profiler_errors; the steps, the counts and the other figures are kept."""
    return guarded(f"figure.{name}", derive, default=default)

