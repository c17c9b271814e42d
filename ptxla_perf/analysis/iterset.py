"""The analysis's iterations as one value: each one's figures computed once, read weighed.

A long run's older iterations are folded (fold.py): one record can stand for many identical iterations, with a
sample of their per-iteration figures. `Iterations` hides that: its `count`, `total`, `mean`, `stats` and `hits`
are over the iterations the records stand for, and an iteration's step time and breakdown parts
(breakdown.components) are derived once per record and shared by every subset (`of`) of one analysis. Consumers
(figures.py, the rules) read these instead of weighing records themselves."""
from __future__ import annotations

from typing import Any, Callable, Iterable, Iterator

from . import breakdown as B
from . import fold
from . import iterations as I
from .stats import wstats
from ..model.records import StepRecord


class Iterations:
    """Iteration records (in full, or folded) and their figures; `of(records)` is a subset sharing the figures.
    `reads`: how many host reads of the user's an iteration made (figures.Figures: net of CPU-fallback copies)."""

    def __init__(self, records: Iterable[StepRecord], reads: Callable[[StepRecord], int] | None = None,
                 _cache: dict[int, tuple] | None = None):
        self.records = list(records)
        self._reads = reads or (lambda s: s.device_to_host.count)
        self._cache: dict[int, tuple] = {} if _cache is None else _cache

    def of(self, records: Iterable[StepRecord]) -> "Iterations":
        """Some of these records (the steady ones, a phase's) as a value of their own, figures shared."""
        return Iterations(records, self._reads, self._cache)

    def __iter__(self) -> Iterator[StepRecord]:
        return iter(self.records)

    def __bool__(self) -> bool:
        return bool(self.records)

    # --- one record's figures, derived once ------------------------------------------------------------------
    def _get(self, s: StepRecord, name: str, derive: Callable[[StepRecord], Any]) -> Any:
        """One figure of one record, derived on first read (each on its own: one that fails fails alone)."""
        got = self._cache.get(id(s))
        if got is None or got[0] is not s:
            got = self._cache[id(s)] = (s, {})
        figures = got[1]
        if name not in figures:
            figures[name] = derive(s)
        return figures[name]

    def parts(self, s: StepRecord) -> dict[str, float] | None:
        """The record's breakdown (breakdown.components; a folded record's: its iterations' mean). Not to be
        changed: every reader shares it."""
        return self._get(s, "parts", _parts)

    def step(self, s: StepRecord) -> float:
        """The record's step time (breakdown.step_time_s; a folded record's: its iterations' mean)."""
        return self._get(s, "step", B.step_time_s)

    def reads(self, s: StepRecord) -> int:
        """The record's host reads (one iteration's, a folded record's each)."""
        return self._get(s, "reads", self._reads)

    def figures_of(self, s: StepRecord) -> dict[str, float | None]:
        """One record's figures by name (fold.FIELDS, the breakdown's parts, its wall time and data_s)."""
        parts = self.parts(s) or {}
        return {"step": self.step(s), "host_time": B.host_time_s(s), "data_wait": s.data_wait_s,
                "own": s.own_time_us, "wall": B.paced_wall(s), "data_s": B.data_s(s),
                **{c: parts.get(c) for c in B.COMPONENTS}}

    # --- weighed over the iterations the records stand for ---------------------------------------------------
    @property
    def count(self) -> int:
        """How many iterations these records stand for."""
        return I.count(self.records)

    def total(self, get: Callable[[StepRecord], float] | str) -> float:
        """A per-record figure (a callable, or a record field: None counts 0) over every iteration."""
        return I.total(self.records, get)

    def mean(self, get: Callable[[StepRecord], float] | str) -> float:
        return self.total(get) / self.count

    def wmean(self, values: list[float]) -> float:
        """The mean of one value per record (in order) over the iterations they stand for; 0 where none."""
        n = self.count
        return sum(v * I.weight(s) for s, v in zip(self.records, values)) / n if n else 0.0

    def column(self, component: str) -> list[float]:
        """One breakdown component per record, in order: empty when any record lacks the breakdown (a folded
        record's is its mean: weigh with `wmean`)."""
        values = [self.parts(s) for s in self.records]
        return [] if any(v is None for v in values) else [v[component] for v in values]

    def breakdown(self) -> dict[str, Any] | None:
        """The mean breakdown over the records that have one: seconds per component, share of the mean wall time,
        the largest component (summary.time_breakdown). None when none was measured."""
        rows = [(s, c) for s in self.records if (c := self.parts(s)) is not None]
        if not rows:
            return None
        n = I.count(s for s, _ in rows)
        wall = sum(B.paced_wall(s) * I.weight(s) for s, _ in rows) / n
        mean = {k: sum(c[k] * I.weight(s) for s, c in rows) / n for k in B.COMPONENTS}
        largest = max(B.COMPONENTS, key=lambda k: mean[k])
        return {"steps": n, "wall_s": round(wall, 7), "components_s": {k: round(v, 7) for k, v in mean.items()},
                "share": {k: round(v / wall, 4) if wall else 0.0 for k, v in mean.items()}, "largest": largest}

    def per_iteration(self, names: tuple[str, ...]
                      ) -> Iterable[tuple[StepRecord, float, dict[str, float | None]]]:
        """(record, weight, figures by name) for each iteration the records stand for, the figures `names` only
        (`figures_of`'s names): a record in full is one of weight 1; a folded record gives each sampled
        iteration, weighing repeat / sampled (exact while it holds at most fold.SAMPLE iterations)."""
        for s in self.records:
            if s.sample is None:
                d = self.figures_of(s)
                yield s, 1.0, {n: d[n] for n in names}
                continue
            cols = _columns(s, names)
            n = fold.sampled(s)
            w = I.weight(s) / n
            for i in range(n):
                yield s, w, {name: col[i] for name, col in cols.items()}

    def weighed(self, what: str, partial: bool = False) -> list[tuple[float, float]]:
        """(value, weight) of one figure over the iterations (`per_iteration`). Empty when any iteration lacks it
        (a figure half measured compares nothing), unless `partial`: then those are left out."""
        out = []
        for _, w, d in self.per_iteration((what,)):
            v = d[what]
            if v is None:
                if partial:
                    continue
                return []
            out.append((float(v), w))
        return out

    def stats(self, what: str, partial: bool = False) -> dict[str, float] | None:
        """`stats` of one figure over the iterations (percentiles from the folded records' samples); the mean,
        and the step time's fastest and slowest, exact from what folded records keep. `partial`: over the
        iterations that have it, percentiles and mean from the samples."""
        d = wstats(self.weighed(what, partial))
        return d if partial else self._exact(d, what)

    def hits(self, share: Callable[[dict], float | None], bound: float, names: tuple[str, ...]
             ) -> tuple[int, list[int]]:
        """The iterations whose `share` (of their figures `names`) reaches `bound`: how many (weighed) and their
        indices (a folded record's whole range where any of its sampled iterations does)."""
        n, marked = 0.0, {}
        for s, w, d in self.per_iteration(names):
            v = share(d)
            if v is not None and v >= bound:
                n += w
                marked[id(s)] = s
        return round(n), I.indices(marked.values())

    def indices(self) -> list[int]:
        return I.indices(self.records)

    def _exact(self, d: dict[str, float] | None, what: str) -> dict[str, float] | None:
        """Statistics over folded records with the figures they keep exactly: the mean (from each record's
        means) and, of the step time, the fastest and slowest step. Unchanged where nothing is folded."""
        records = self.records
        if d is None or all(s.sample is None for s in records):
            return d
        d = dict(d, mean=sum(self.figures_of(s)[what] * I.weight(s) for s in records) / self.count)
        if what == "step":
            ranges = [s.step_range or (self.step(s), self.step(s)) for s in records]
            d.update(min=min(lo for lo, _ in ranges), max=max(hi for _, hi in ranges))
        return d


def _parts(s: StepRecord) -> dict[str, float] | None:
    """An iteration's breakdown; a folded record's is the exact mean of its iterations' (fold.py keeps it)."""
    return dict(s.parts) if s.parts is not None else B.components(s)


def _columns(s: StepRecord, names: tuple[str, ...]) -> dict[str, list]:
    """A folded record's sampled figures by name (fold.column), with `wall` (its step time: folded iterations
    compile nothing) and `data_s` (the data wait, else the sampled estimate)."""
    cols = {n: fold.column(s, n) for n in names if n in fold.FIELDS}
    if "wall" in names:
        cols["wall"] = fold.column(s, "step")
    if "data_s" in names:
        cols["data_s"] = [v if v is not None else s.sampled_data_s for v in fold.column(s, "data_wait")]
    return cols

