"""Which per-step records a long run's report keeps (docs/report.md#step-retention).

A report of a few thousand steps keeps every step, as it always did. Above `trim_above` iterations the report
keeps in full only the steps a person looks at - the first ones (warm-up, compiles), the steps around each anomaly
(a compile, a step-time outlier, a step a finding names) and the last ones - and sums up every step in fixed-width
`step_buckets` (count, step-time p50/p90/max, breakdown means, reads, compiles). The summary, the findings and the
TensorBoard scalars are computed from every step before the trim; only `steps[]` is shortened, and the report says
so in `run.step_retention`. Everything runs once, when a report is written: nothing here runs per step."""
from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass, fields, is_dataclass, replace
from typing import Any, Iterable, Mapping, Sequence

from ..analysis import iterations as I
from ..analysis.breakdown import COMPONENTS
from ..config import RetentionConfig

ENV = "PTXLA_PERF_STEP_RETENTION"  # e.g. "trim_above=300,first=20,last=20" (tests, a quick look at a knob)


@dataclass(frozen=True)
class Retention:
    """The step-retention thresholds in effect: config.RetentionConfig's fields (named and documented there,
    docs/config.md), over its defaults, with `PTXLA_PERF_STEP_RETENTION` over both."""

    trim_above: int = RetentionConfig.trim_above
    first: int = RetentionConfig.first
    last: int = RetentionConfig.last
    around: int = RetentionConfig.around
    max_anomalies: int = RetentionConfig.max_anomalies
    outlier_ratio: float = RetentionConfig.outlier_ratio
    named_share: float = RetentionConfig.named_share
    bucket_min: int = RetentionConfig.bucket_min
    max_buckets: int = RetentionConfig.max_buckets
    fold_after: int = RetentionConfig.fold_after
    fold_window: int = RetentionConfig.fold_window
    fold_records: int = RetentionConfig.fold_records

    @classmethod
    def of(cls, cfg: Any) -> "Retention":
        """A config (RetentionConfig, this type, or a dict of the fields) over the defaults; the environment's
        `PTXLA_PERF_STEP_RETENTION` ("trim_above=300,first=20") over both."""
        given = asdict(cfg) if is_dataclass(cfg) and not isinstance(cfg, type) else dict(cfg or {})
        base = cls(**{k: v for k, v in given.items() if k in _NAMES and v is not None})
        for pair in os.environ.get(ENV, "").split(","):
            key, _, text = pair.partition("=")
            key = key.strip()
            if key in _NAMES:
                try:  # a value that does not parse is left at the config's: never an error in the user's run
                    base = replace(base, **{key: type(getattr(base, key))(float(text))})
                except ValueError:
                    pass
        return base

    def bucket_width(self, n: int) -> int:
        per = max(1, math.ceil(n / max(1, self.max_buckets)))
        return max(self.bucket_min, self.bucket_min * math.ceil(per / self.bucket_min))


_NAMES = {f.name for f in fields(Retention)}


def anomalies(rows: Sequence[Any], named: Iterable[Sequence[int]], cfg: Retention, p50_s: float | None) -> list[int]:
    """Positions in `rows` (values.StepRow) of the iterations worth keeping for themselves: compiles, step-time
    outliers (steady steps above `outlier_ratio` x p50), and the steps the findings name (`named`: each finding's
    steps; one that names more than `named_share` of the run is a pattern, not an anomaly)."""
    total = I.count(rows)  # iterations (a long run's folded rows stand for several: fold.py)
    marked = {int(i) for steps in named if len(steps) <= cfg.named_share * total for i in steps}
    limit = cfg.outlier_ratio * p50_s if p50_s else None
    return [pos for pos, r in enumerate(rows)
            if r.compiles or (limit is not None and r.steady and r.step_time_s > limit) or r.index in marked]


def kept_positions(n: int, marks: Sequence[int], cfg: Retention) -> tuple[list[int], int]:
    """The positions kept in full (sorted) and how many anomalies were left out by `max_anomalies`."""
    keep = set(range(min(cfg.first, n))) | set(range(max(0, n - cfg.last), n))
    inner = [p for p in marks if cfg.first <= p < n - cfg.last]
    for p in inner[:cfg.max_anomalies]:
        keep.update(range(max(0, p - cfg.around), min(n, p + cfg.around + 1)))
    return sorted(keep), max(0, len(inner) - cfg.max_anomalies)


def _pct(sorted_vals: list[float], q: float) -> float | None:
    if not sorted_vals:
        return None
    return sorted_vals[min(len(sorted_vals) - 1, int(round(q * (len(sorted_vals) - 1))))]


def _chunks(rows: Sequence[Any], width: int) -> list[list[Any]]:
    """The rows by bucket of `width` iterations, from the first row's index; a folded row (`repeat` iterations,
    fold.py) goes whole to the bucket of its first iteration."""
    out: list[list[Any]] = []
    base = rows[0].index if rows else 0
    for r in rows:
        b = (r.index - base) // width
        if not out or b != out[-1][0]:
            out.append([b])
        out[-1].append(r)
    return [c[1:] for c in out]


def buckets(rows: Sequence[Any], width: int) -> list[dict[str, Any]]:
    """Fixed-width aggregates of every iteration (`step_buckets[]`), `width` iterations each, in order. Step-time
    percentiles are over the bucket's training iterations (nearest rank; a folded row at its mean)."""
    out = []
    for chunk in _chunks(rows, width):
        times = sorted(t for r in chunk if r.train for t in [r.step_time_s] * I.weight(r))
        parts = [(r.time_breakdown, I.weight(r)) for r in chunk if r.time_breakdown]
        n_parts = sum(k for _, k in parts)
        last = chunk[-1]
        out.append({
            "first": chunk[0].index, "last": last.index + I.weight(last) - 1, "count": I.count(chunk),
            "train": len(times), "steady": I.count(r for r in chunk if r.steady),
            "step_time_p50_s": _pct(times, 0.5), "step_time_p90_s": _pct(times, 0.9),
            "step_time_max_s": times[-1] if times else None,
            "wall_time_s": I.total(chunk, lambda r: r.wall_time_s),
            "compiles": sum(r.compiles for r in chunk), "host_reads": I.total(chunk, lambda r: r.host_reads),
            "executions": I.total(chunk, lambda r: r.executions),
            "time_breakdown_mean": ({c: sum(float(p.get(c) or 0.0) * k for p, k in parts) / n_parts
                                     for c in COMPONENTS} if parts else None),
        })
    return out


@dataclass
class Plan:
    """What a trimmed report keeps: positions of the iterations kept in full, the buckets of all of them, and the
    `run.step_retention` record."""

    keep: list[int]
    buckets: list[dict[str, Any]]
    info: dict[str, Any]

    def trim_findings(self, findings: list[dict[str, Any]], rows: Sequence[Any]) -> None:
        """A finding that names many steps (an every-step read) lists those kept in steps[]; `steps_total` says
        how many it named (its message still says all of them)."""
        kept = {rows[p].index for p in self.keep}
        for f in findings:
            named = f.get("steps") or []
            if len(named) > self.info["first"] + self.info["last"]:
                f["steps_total"], f["steps"] = len(named), [i for i in named if i in kept]


def plan(rows: Sequence[Any], named: Iterable[Sequence[int]], cfg: Retention, p50_s: float | None,
         steps_file: str | None = None) -> Plan | None:
    """The trim of a run of `rows` (values.StepRow, every iteration): None at or under `trim_above` (the report
    keeps every step, exactly as before)."""
    n = I.count(rows)  # iterations: a long run's folded rows stand for `repeat` each (fold.py)
    if n <= cfg.trim_above:
        return None
    marks = anomalies(rows, named, cfg, p50_s)
    keep, dropped = kept_positions(len(rows), marks, cfg)
    width = cfg.bucket_width(n)
    folded = I.folded_count(rows)
    info = {
        "trimmed": True, "total": n, "kept": len(keep), "folded": folded, "first": cfg.first, "last": cfg.last, "around": cfg.around,
        "anomalies": len(marks) - dropped, "anomalies_dropped": dropped, "bucket_width": width,
        "thresholds": asdict(cfg), "steps_file": steps_file,
        "note": (f"{n} steps: {len(keep)} kept in full (the first {cfg.first}, the last {cfg.last}, and {cfg.around} "
                 f"around each compile, outlier and finding's step); every step is counted in the summary, the "
                 f"findings and step_buckets ({width} steps each)"
                 + (f"; {folded} plain steps were folded in memory into records of many (steps[] records with "
                    "`repeat`: their means)" if folded else "")),
    }
    return Plan(keep, buckets(rows, width), info)


def untrimmed(n: int, steps_file: str | None) -> dict[str, Any] | None:
    """`run.step_retention` of a report that keeps every step: only where a steps file was written."""
    return {"trimmed": False, "total": n, "kept": n, "steps_file": steps_file} if steps_file else None


def retention_line(report: Mapping[str, Any]) -> str | None:
    """The console's one line about a trimmed report (None when every step is in it)."""
    r = (report.get("run") or {}).get("step_retention") or {}
    if not r.get("trimmed"):
        return None
    more = f"; every step in {r['steps_file']}" if r.get("steps_file") else ""
    return (f"ptxla_perf: {r['total']} steps: the report keeps {r['kept']} in full (first, last, around anomalies) "
            f"and {r['bucket_width']}-step buckets of all{more}")
