"""Two sources -> a `Comparison`: one row per value, with delta, ratio and status."""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

from . import findings as F
from .sources import CANONICAL, NOT_A_FALLBACK, Source, load


@dataclass
class Row:
    name: str
    a: float | None
    b: float | None
    delta: float | None
    ratio: float | None
    status: str  # new | vanished | changed | noise (changed within the step-time noise band) | same | n/a
    unit: str | None = None
    group: str = "headline"  # headline | fallback | metric | counter

    def to_dict(self) -> dict:
        return {k: (_json_num(v) if isinstance(v, float) else v) for k, v in asdict(self).items()}


@dataclass
class Comparison:
    a: Source
    b: Source
    rows: list[Row]
    per_step: bool = False  # additive rows were divided by each side's step count
    notes: list[str] = field(default_factory=list)
    new_fallback_ops: list[str] = field(default_factory=list)
    vanished_fallback_ops: list[str] = field(default_factory=list)
    new_counters: list[str] = field(default_factory=list)
    vanished_counters: list[str] = field(default_factory=list)
    noise_band_s: float | None = None  # step-time rows: a change this small is noise (noise_band)
    within_noise: list = field(default_factory=list)  # rules that broke within the noise band (check, not strict)
    finding_changes: list = field(default_factory=list)  # FindingChange: appeared, disappeared, changed severity
    step_time_noise: bool = False  # p50 and p90 both moved no more than the band: every step-time row is noise

    def row(self, name: str) -> Row | None:
        for r in self.rows:
            if r.name == name:
                return r
        return None

    def to_dict(self) -> dict:
        side = lambda s: {"label": s.label, "kind": s.kind, "steps": s.steps, "snapshot_step": s.snapshot_step}
        return {"a": side(self.a), "b": side(self.b), "per_step": self.per_step, "notes": self.notes,
                "new_fallback_ops": self.new_fallback_ops, "vanished_fallback_ops": self.vanished_fallback_ops,
                "new_counters": self.new_counters, "vanished_counters": self.vanished_counters,
                "noise_band_s": _json_num(self.noise_band_s), "within_noise": [v.to_dict() for v in self.within_noise],
                "finding_changes": [c.to_dict() for c in self.finding_changes],
                "rows": [r.to_dict() for r in self.rows]}


NOISE_ROWS = ("step_time_p50", "step_time_p90", "step_time_mean", "step_time_min", "step_time_max")


def noise_band(a: Source, b: Source) -> float | None:
    """How far step time moves between steps of one run: the larger of the two runs' per-step spread, p90 - p50
    (a slow step against a typical one). A step-time change no larger than this cannot be told from the noise of
    the machine the runs shared. None unless both inputs carry step-time statistics (report JSON)."""
    spreads = []
    for side in (a, b):
        p50, p90 = side.values.get("step_time_p50", (None,))[0], side.values.get("step_time_p90", (None,))[0]
        if p50 is None or p90 is None:
            return None
        spreads.append(max(p90 - p50, 0.0))
    return max(spreads)


def _json_num(v: float | None):
    if v is None or math.isnan(v) or math.isinf(v):
        return None if v is None or math.isnan(v) else ("inf" if v > 0 else "-inf")
    return int(v) if v == int(v) and abs(v) < 2**53 else v


def _status(a: float | None, b: float | None, zero_default: bool) -> str:
    if a is None and b is None:
        return "n/a"
    if a is None:
        return "new" if zero_default else "n/a"
    if b is None:
        return "vanished" if zero_default else "n/a"
    if a == b or (math.isnan(a) and math.isnan(b)):
        return "same"
    return "changed"


def _row(name, a, b, unit, group, zero_default) -> Row:
    status = _status(a, b, zero_default)
    delta = ratio = None
    if status in ("new", "vanished", "changed", "same"):
        av, bv = a or 0.0, b or 0.0
        delta = bv - av
        if av:
            ratio = bv / av
    return Row(name=name, a=a, b=b, delta=delta, ratio=ratio, status=status, unit=unit, group=group)


def compare(a: Source, b: Source, per_step: bool = False) -> Comparison:
    """Rows for every value either side has: canonical rows first (compiles, executions, transfers, step time,
    steps, fallback ops), then each `aten::` op, then raw metrics and counters (when both inputs are metrics
    text). With per_step=True and both step counts known, totals are divided by each side's step count."""
    if isinstance(a, (str, Path)):
        a = load(a)
    if isinstance(b, (str, Path)):
        b = load(b)
    notes = [*a.notes, *b.notes]
    scale_a = scale_b = 1.0
    if per_step:
        if a.steps and b.steps:
            scale_a, scale_b = 1.0 / a.steps, 1.0 / b.steps
        else:
            per_step = False
            missing = " and ".join(s.label or "?" for s in (a, b) if not s.steps)
            notes.append(f"--per-step ignored: step count unknown for {missing} "
                         "(metrics text: no MarkStep counter; report JSON: summary.steps)")
    rows: list[Row] = []
    band = noise_band(a, b)
    for name, unit, additive in CANONICAL:
        va, vb = a.values.get(name, (None, unit))[0], b.values.get(name, (None, unit))[0]
        if va is None and vb is None:
            continue
        if additive and per_step:
            va = va * scale_a if va is not None else None
            vb = vb * scale_b if vb is not None else None
        rows.append(_row(name, va, vb, unit, "headline", zero_default=False))
    step_noise = _mark_step_time_noise(rows, band)
    # fallback ops, new ones first
    ops = set(a.fallback) | set(b.fallback)
    if a.kind != b.kind:  # whether a report JSON lists .item() reads among its fallback ops is up to its adapter
        ops -= NOT_A_FALLBACK
    ops = sorted(ops, key=lambda k: (k in a.fallback, k))
    new_ops, gone_ops = [], []
    for op in ops:
        va, vb = a.fallback.get(op), b.fallback.get(op)
        va = float(va) * scale_a if va is not None else None
        vb = float(vb) * scale_b if vb is not None else None
        r = _row(op, va, vb, None, "fallback", zero_default=True)
        rows.append(r)
        if r.status == "new":
            new_ops.append(op)
        elif r.status == "vanished":
            gone_ops.append(op)
    new_counters, gone_counters = [], []
    if a.kind == b.kind == "metrics_text":
        names = sorted((set(a.raw) | set(b.raw)) - set(ops),
                       key=lambda n: (0 if (a.raw.get(n) or b.raw.get(n)) != "counter" else 1, n))
        for name in names:
            kind = a.raw.get(name) or b.raw.get(name)
            va = a.values.get(name, (None, None))
            vb = b.values.get(name, (None, None))
            unit = va[1] or vb[1]
            x, y = va[0], vb[0]
            if name not in a.raw:
                x = None
            if name not in b.raw:
                y = None
            if per_step:
                x = x * scale_a if x is not None else None
                y = y * scale_b if y is not None else None
            group = "counter" if kind == "counter" else "metric"
            r = _row(name, x, y, unit, group, zero_default=True)
            rows.append(r)
            if kind == "counter" and r.status == "new":
                new_counters.append(name)
            elif kind == "counter" and r.status == "vanished":
                gone_counters.append(name)
    elif a.kind != b.kind:
        notes.append("inputs are of different kinds (metrics text vs report JSON): only the shared rows "
                     "are compared")
    return Comparison(a=a, b=b, rows=rows, per_step=per_step, notes=notes, new_fallback_ops=new_ops,
                      vanished_fallback_ops=gone_ops, new_counters=new_counters, vanished_counters=gone_counters,
                      noise_band_s=band, step_time_noise=step_noise,
                      finding_changes=F.changes(a.findings or [], b.findings or [])
                      if a.findings is not None and b.findings is not None else [])


def _mark_step_time_noise(rows: list[Row], band: float | None) -> bool:
    """One verdict for the step-time rows: noise when both p50 and p90 moved no more than the band (then each
    changed step-time row is `noise`), else every one of them that changed is `changed` - never a p50 called noise
    beside a p90 called changed for the same two runs."""
    by = {r.name: r for r in rows if r.name in NOISE_ROWS}
    central = [by.get("step_time_p50"), by.get("step_time_p90")]
    if not band or any(r is None or r.delta is None for r in central) or \
            any(abs(r.delta) > band for r in central):
        return False
    for r in by.values():
        if r.status == "changed":
            r.status = "noise"
    return True
