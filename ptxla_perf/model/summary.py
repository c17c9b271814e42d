"""The typed values figures.py produces and every view reads: `Summary` (the report's `summary`) and `StepRow` (what
the report adds to each `steps[]` iteration). Each is written to JSON once (`to_json`) and read back once
(`from_json`), including reports written by 0.4.0 and earlier: a view never reads a summary key or recomputes a
step time by string, and "step time" is one figure everywhere - the iteration's wall time net of its compile time
(figures.step_time_s). Where a view shows wall time it reads `wall_time_s` and says wall time.

Light on purpose (no records, no frameworks): the offline tools (`view`, `diff`, `merge`, the sweep table) import
it to read reports."""
from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from functools import lru_cache
from typing import Any, Iterable, Mapping

from . import summary_keys as K

TRAIN = "train"


@dataclass(frozen=True)
class Stats:
    """p50/p90, mean, min, max and n of a figure over iterations (figures.stats)."""

    p50: float
    p90: float
    mean: float
    min: float
    max: float
    n: int = 0

    def to_json(self) -> dict[str, float]:
        return {"p50": self.p50, "p90": self.p90, "mean": self.mean, "min": self.min, "max": self.max, "n": self.n}

    @classmethod
    def from_json(cls, d: Mapping[str, Any] | None) -> "Stats | None":
        if not isinstance(d, Mapping) or d.get("p50") is None:
            return None
        p50 = float(d["p50"])
        return cls(p50, float(d.get("p90", p50)), float(d.get("mean", p50)), float(d.get("min", p50)),
                   float(d.get("max", p50)), int(d.get("n") or 0))


def _stats_json(s: Stats | None) -> dict[str, float] | None:
    return s.to_json() if s is not None else None


# --- one iteration -----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class StepRow:
    """One iteration as every view reads it. `step_time_s` is the iteration's step time as the summary defines it
    (wall time net of its compile time and, on a compile or attribution step, of ptxla_perf's own time);
    `wall_time_s` the raw wall time; `host_reads` the device-to-host reads of the user's code (net of CPU-fallback
    copies); `device_to_host_transfers` every device-to-host transfer (gross: fallback copies included)."""

    index: int
    phase: str | None
    steady: bool
    compiles: int
    attributed: bool
    wall_time_s: float
    compile_time_s: float
    step_time_s: float
    host_reads: int
    device_to_host_transfers: int
    host_time_s: float | None = None  # wall time minus the device-to-host wait (None: wait not measured)
    data_wait_s: float | None = None
    time_breakdown: Mapping[str, float] | None = None
    executions: int = 0
    host_to_device: int = 0  # host-to-device transfers
    live_arrays: int | None = None  # live device tensors/arrays where sampled (memory.py)
    live_bytes: int | None = None
    repeat: int = 1  # a long run's folded iterations (fold.py): the row stands for this many, its figures their mean

    @property
    def train(self) -> bool:
        return self.phase in (None, TRAIN)

    def to_json(self) -> dict[str, Any]:
        """The keys the report adds to its `steps[]` record (the rest is the adapter's record, StepRecord)."""
        return {K.STEP_STEADY: self.steady, K.STEP_TIME_S: self.step_time_s, K.STEP_HOST_READS: self.host_reads,
                K.STEP_BREAKDOWN: dict(self.time_breakdown) if self.time_breakdown is not None else None}

    @classmethod
    def from_json(cls, d: Mapping[str, Any], steady: bool | None = None) -> "StepRow":
        """A report's `steps[]` record; for reports written before a key, the same derivation from its parts
        (0.4.0: no `step_time_s`, the gross count under `device_to_host`; before 0.3: no `host_reads`)."""
        wall = float(d.get("wall_time_s") or 0.0)
        comp = float(d.get("compile_time_s") or 0.0)
        compiles, attributed = int(d.get("compiles") or 0), bool(d.get("attributed"))
        if d.get(K.STEP_TIME_S) is not None:
            step = float(d[K.STEP_TIME_S])
        else:  # figures.step_time_s on the record's own figures
            own = float(d.get("own_time_us") or 0.0) / 1e6 if (compiles or attributed) else 0.0
            step = max(wall - comp - own, 0.0)
        gross = int((d.get(K.STEP_D2H_TRANSFERS) or d.get(K.OLD_STEP_D2H) or {}).get("count") or 0)
        reads = int(d[K.STEP_HOST_READS]) if d.get(K.STEP_HOST_READS) is not None else gross
        wait = d.get("device_to_host_time_s")
        return cls(int(d.get("index") or 0), d.get("phase"), bool(d.get(K.STEP_STEADY, False) if steady is None
                                                                  else steady),
                   compiles, attributed, wall, comp, step, reads, gross,
                   max(wall - float(wait), 0.0) if wait is not None else None,
                   float(d["data_wait_s"]) if d.get("data_wait_s") is not None else None,
                   d.get(K.STEP_BREAKDOWN), int(d.get("executions") or 0),
                   int((d.get("host_to_device") or {}).get("count") or 0), d.get("live_arrays"), d.get("live_bytes"),
                   int(d.get("repeat") or 1))


def steady_of(rows: list, warmup: int) -> list:
    """The iterations that time the loop as it really runs: training ones after warm-up, no compile, no
    attribution; for runs too short to have such iterations, those without a compile, else every one after
    warm-up. Works on StepRecords and StepRows alike (both have `compiles` and `attributed`)."""
    after = rows[warmup:]
    clean = [s for s in after if not s.compiles and not s.attributed]
    return clean or [s for s in after if not s.compiles] or after


def rows_from_json(steps: Iterable[Mapping[str, Any]], warmup: int = 0) -> list[StepRow]:
    """A report's `steps[]` as rows; reports written before `steps[].steady` get it by the same rule as the
    process's own (steady_of over the training iterations)."""
    steps = list(steps)
    if all(K.STEP_STEADY in s for s in steps):
        return [StepRow.from_json(s) for s in steps]
    rows = [StepRow.from_json(s, steady=False) for s in steps]
    chosen = {r.index for r in steady_of([r for r in rows if r.train], warmup)}
    return [replace(r, steady=r.index in chosen) for r in rows]


def row_series(steady: list[StepRow], what: str) -> list[float]:
    """A per-iteration figure over steady rows, in order: "step" (step time), "host" (host_time_s), "data" (data
    wait). Empty when any row lacks it (a figure half measured compares nothing)."""
    get = {"step": lambda r: r.step_time_s, "host": lambda r: r.host_time_s, "data": lambda r: r.data_wait_s}[what]
    values = [get(r) for r in steady]
    return [] if any(v is None for v in values) else [float(v) for v in values]


# --- the summary -------------------------------------------------------------------------------------------------
@lru_cache(maxsize=None)
def _field_names(cls: type) -> frozenset[str]:
    return frozenset(f.name for f in fields(cls))


_STATS = {K.STEP_TIME, K.EVAL_STEP_TIME, K.OVERHEAD, K.HOST_TIME, K.DATA_WAIT}
_COUNTS = {K.EXECUTIONS, K.D2H, K.D2H_TRANSFERS, K.FALLBACK_COPIES, K.H2D, K.STEP_TIME_BASIS}
# 0.4.0 key -> the key that replaced it (the same figure, renamed: docs/report.md changelog 0.5.0)
RENAMED = {K.OLD_D2H_BYTES: K.D2H_TRANSFER_BYTES, K.OLD_D2H_BYTES_PER_STEP: K.D2H_TRANSFER_BYTES_PER_STEP}


@dataclass(frozen=True)
class Summary:
    """The report's `summary`: the figures of the run (figures.Figures.summary) and the few the assembler adds
    from the other sections (`findings_by_severity`; the roofline's and the memory section's summary_fields).
    Field names are the JSON keys (summary_keys.py names them and gives their units)."""

    steps: int = 0
    warmup_steps: int = 0
    steady_steps: int = 0
    eval_steps: int = 0
    boundaries: int = 0
    wall_time_s: float = 0.0
    step_time_s: Stats | None = None
    step_time_basis: str | None = None
    eval_step_time_s: Stats | None = None
    compiles: int = 0
    compile_time_s: float = 0.0
    cached_compiles: int = 0
    recompiles_after_warmup: int = 0
    distinct_graphs: int | None = None
    executions: int | None = None
    device_to_host: int | None = None  # host reads, net of CPU-fallback copies
    device_to_host_transfers: int | None = None  # every device-to-host transfer (gross)
    fallback_copies: int | None = None
    host_to_device: int | None = None
    device_to_host_transfer_bytes: int | None = None
    host_to_device_bytes: int | None = None
    executions_per_step: float | None = None
    device_to_host_per_step: float | None = None
    device_to_host_transfers_per_step: float | None = None
    fallback_copies_per_step: float | None = None
    host_to_device_per_step: float | None = None
    device_to_host_transfer_bytes_per_step: float | None = None
    host_to_device_bytes_per_step: float | None = None
    fallback_ops: Mapping[str, int] = field(default_factory=dict)
    throughput: Mapping[str, float] = field(default_factory=dict)
    overhead_us_per_step: Stats | None = None
    host_time_s: Stats | None = None
    data_wait_s: Stats | None = None
    time_breakdown: Mapping[str, Any] | None = None
    # added by the assembler (report.assemble) from the findings and the other sections
    findings_by_severity: Mapping[str, int] | None = None
    mfu: float | None = None
    hfu: float | None = None
    model_mfu: float | None = None
    achieved_tflops_per_s: float | None = None
    flops_per_step: float | None = None
    roofline_verdict: str | None = None
    peak_bytes: int | None = None
    temp_bytes: int | None = None
    argument_bytes: int | None = None
    device_memory_bytes: int | None = None
    memory_headroom_bytes: int | None = None
    live_bytes_per_step: float | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in fields(self):
            v = getattr(self, f.name)
            if v is None and f.name in _COUNTS:  # a count an older report (merged, re-assembled) did not have
                continue
            out[f.name] = _stats_json(v) if f.name in _STATS else (dict(v) if isinstance(v, Mapping) else v)
        return out

    @classmethod
    def from_json(cls, d: Mapping[str, Any] | None) -> "Summary":
        """A report's `summary`, of any version: renamed keys read under their old names; keys a version did not
        write keep their defaults (counts before `executions` was written come from the per-step figures)."""
        d = dict(d or {})
        for old, new in RENAMED.items():
            if new not in d and old in d:
                d[new] = d[old]
        known = _field_names(cls)
        kw = {k: (Stats.from_json(v) if k in _STATS else v) for k, v in d.items() if k in known}
        steps = int(kw.get(K.STEPS) or 0)
        for total in (K.EXECUTIONS, K.D2H, K.H2D):  # reports before the totals: per-step x steps
            per = d.get(f"{total}_per_step")
            if kw.get(total) is None and per is not None and steps:
                kw[total] = int(round(per * steps))
        for key in (K.FALLBACK_OPS, K.THROUGHPUT):
            if kw.get(key) is None:
                kw[key] = {}
        return cls(**kw)

    def with_fields(self, values: Mapping[str, Any]) -> "Summary":
        """This summary with the assembler's fields (findings_by_severity, a section's summary_fields)."""
        return replace(self, **values)
