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

from .breakdown import COMPONENTS
from .config import RetentionConfig

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

    @classmethod
    def of(cls, cfg: Any) -> "Retention":
        """A config (RetentionConfig, this type, or a dict of the fields) over the defaults; the environment's
        `PTXLA_PERF_STEP_RETENTION` ("trim_above=300,first=20") over both."""
        given = asdict(cfg) if is_dataclass(cfg) and not isinstance(cfg, type) else dict(cfg or {})
        base = cls(**{k: v for k, v in given.items() if k in _NAMES and v is not None})
        env = os.environ.get(ENV, "").strip()
        if env:
            pairs = dict(p.split("=", 1) for p in env.split(",") if "=" in p)
            base = replace(base, **{k.strip(): type(getattr(base, k.strip()))(v) for k, v in pairs.items()
                                    if k.strip() in _NAMES})
        return base

    def bucket_width(self, n: int) -> int:
        per = max(1, math.ceil(n / max(1, self.max_buckets)))
        return max(self.bucket_min, self.bucket_min * math.ceil(per / self.bucket_min))


_NAMES = {f.name for f in fields(Retention)}


def anomalies(steps: Sequence[Mapping[str, Any]], findings: Iterable[Mapping[str, Any]], cfg: Retention,
              p50_s: float | None) -> list[int]:
    """Positions in `steps` of the iterations worth keeping for themselves: compiles, step-time outliers
    (steady steps above `outlier_ratio` x p50), and the steps the findings name."""
    named = {int(i) for f in findings if len(f.get("steps") or []) <= cfg.named_share * len(steps)
             for i in f.get("steps") or [] if isinstance(i, int)}  # an every-step pattern marks no step
    limit = cfg.outlier_ratio * p50_s if p50_s else None
    out = []
    for pos, s in enumerate(steps):
        slow = limit is not None and s.get("steady") and (s.get("step_time_s") or 0.0) > limit
        if s.get("compiles") or slow or s.get("index") in named:
            out.append(pos)
    return out


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


def buckets(steps: Sequence[Mapping[str, Any]], width: int) -> list[dict[str, Any]]:
    """Fixed-width aggregates of every iteration (`step_buckets[]`): by position, `width` iterations each."""
    out = []
    for lo in range(0, len(steps), width):
        chunk = steps[lo:lo + width]
        times = sorted(float(s.get("step_time_s") or 0.0) for s in chunk if s.get("phase") in (None, "train"))
        parts = [s.get("time_breakdown") for s in chunk if s.get("time_breakdown")]
        out.append({
            "first": int(chunk[0].get("index", lo)), "last": int(chunk[-1].get("index", lo + len(chunk) - 1)),
            "count": len(chunk), "train": len(times), "steady": sum(1 for s in chunk if s.get("steady")),
            "step_time_p50_s": _pct(times, 0.5), "step_time_p90_s": _pct(times, 0.9),
            "step_time_max_s": times[-1] if times else None,
            "wall_time_s": sum(float(s.get("wall_time_s") or 0.0) for s in chunk),
            "compiles": sum(int(s.get("compiles") or 0) for s in chunk),
            "host_reads": sum(int(s.get("host_reads") or 0) for s in chunk),
            "executions": sum(int(s.get("executions") or 0) for s in chunk),
            "time_breakdown_mean": ({c: sum(float(p.get(c) or 0.0) for p in parts) / len(parts) for c in COMPONENTS}
                                    if parts else None),
        })
    return out


def trim(report: dict[str, Any], cfg: Retention, steps_file: str | None = None) -> dict[str, Any]:
    """`report` with its `steps[]` trimmed (in place, and returned) when it has more than `trim_above` of them;
    `run.step_retention` says what was kept, `step_buckets` holds every step's aggregates. A report at or under
    the bound is left exactly as it was (only `steps_file`, when one is written, is named)."""
    steps = report.get("steps") or []
    run = report.setdefault("run", {})
    n = len(steps)
    if n <= cfg.trim_above:
        if steps_file:
            run["step_retention"] = {"trimmed": False, "total": n, "kept": n, "steps_file": steps_file}
        return report
    p50 = ((report.get("summary") or {}).get("step_time_s") or {}).get("p50")
    marks = anomalies(steps, report.get("findings") or [], cfg, p50)
    keep, dropped = kept_positions(n, marks, cfg)
    width = cfg.bucket_width(n)
    report["step_buckets"] = buckets(steps, width)
    report["steps"] = [steps[p] for p in keep]
    kept_index = {s.get("index") for s in report["steps"]}
    for f in report.get("findings") or []:  # an every-step finding's steps: those kept (how many: steps_total)
        named = f.get("steps") or []
        if len(named) > cfg.first + cfg.last:
            f["steps_total"], f["steps"] = len(named), [i for i in named if i in kept_index]
    run["step_retention"] = {
        "trimmed": True, "total": n, "kept": len(keep), "first": cfg.first, "last": cfg.last, "around": cfg.around,
        "anomalies": len(marks) - dropped, "anomalies_dropped": dropped, "bucket_width": width,
        "thresholds": asdict(cfg), "steps_file": steps_file,
        "note": (f"{n} steps: {len(keep)} kept in full (the first {cfg.first}, the last {cfg.last}, and {cfg.around} "
                 f"around each compile, outlier and finding's step); every step is counted in the summary, the "
                 f"findings and step_buckets ({width} steps each)"),
    }
    return report


def retention_line(report: Mapping[str, Any]) -> str | None:
    """The console's one line about a trimmed report (None when every step is in it)."""
    r = (report.get("run") or {}).get("step_retention") or {}
    if not r.get("trimmed"):
        return None
    more = f"; every step in {r['steps_file']}" if r.get("steps_file") else ""
    return (f"ptxla_perf: {r['total']} steps: the report keeps {r['kept']} in full (first, last, around anomalies) "
            f"and {r['bucket_width']}-step buckets of all{more}")
