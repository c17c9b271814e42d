"""Compare two runs, backend-neutrally, and gate CI on rules.

Inputs (see `load`): torch_xla metrics-report text (a plain report or an `XLA_METRICS_FILE` multi-step file) or a
ptxla_perf report JSON (schema `ptxla_perf.report/1`). Each input becomes a `Source`: a flat map of row name ->
value, with *canonical* rows shared by both kinds (compiles, executions, device_to_host, step_time_p50, ...) and,
for metrics text, *raw* rows named after torch_xla's own metrics and counters (`ExecuteTime`, `UncachedCompile`).

    from ptxla_perf.diff import load, compare, parse_rules, check
    cmp = compare(load("before.txt"), load("after.txt"), per_step=True)
    broken = check(cmp, parse_rules("device_to_host_per_step>0,step_time_p50>+5%"))

Mapping of canonical rows (docs/diff.md has the table):
    metrics text                                  report JSON
    compiles          UncachedCompile counter     summary.compiles
    cached_compiles   CachedCompile counter       summary.cached_compiles
    compile_time_s    CompileTime accumulator     summary.compile_time_s
    executions        ExecuteTime samples         sum of steps[].executions
    execute_time_s    ExecuteTime accumulator     (not in the report)
    device_to_host    TransferFromDeviceTime samples   sum of steps[].device_to_host.count
    device_to_host_bytes  InboundData accumulator      sum of steps[].device_to_host.bytes
    host_to_device    TransferToDeviceTime samples     sum of steps[].host_to_device.count
    host_to_device_bytes  OutboundData accumulator     sum of steps[].host_to_device.bytes
    steps             MarkStep counter            summary.steps
    step_time_p50 ... (not in metrics text)       summary.step_time_s.{p50,p90,mean,min,max}
    fallback_ops      sum of aten::* counters but aten::_local_scalar_dense (an .item()-style read, not an
                      un-lowered op)              sum of summary.fallback_ops (same exclusion)
    X_per_step        X / steps                   summary.X_per_step where the report has it, else X / steps
    mfu, achieved_tflops_per_s, flops_per_step   (not in metrics text)   summary.* (roofline, docs/roofline.md)
"""
from __future__ import annotations

import fnmatch
import json
import math
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from . import SCHEMA_ID
from .metrics_text import MetricsParseError, Snapshot, parse, parse_value

__all__ = [
    "Source", "Row", "Comparison", "Rule", "Violation", "DiffInputError", "RuleError",
    "load", "from_text", "from_snapshot", "from_report", "compare", "parse_rules", "check",
    "render_table", "render_json", "render_markdown", "format_value",
]

NOT_A_FALLBACK = {"aten::_local_scalar_dense"}  # counts host reads of a scalar (.item()), not an un-lowered op


class DiffInputError(ValueError):
    """An input that cannot be compared (missing file, not a metrics report, unknown JSON, absent step)."""


class RuleError(ValueError):
    """A `--fail-on` rule that does not parse, or names something neither input has."""


# ------------------------------------------------------------------------------------------------ sources

# canonical rows: name, unit, additive (a total that per-step normalisation divides by the step count)
CANONICAL: list[tuple[str, str | None, bool]] = [
    ("compiles", None, True),
    ("compiles_per_step", None, False),
    ("cached_compiles", None, True),
    ("recompiles_after_warmup", None, True),
    ("compile_time_s", "s", True),
    ("executions", None, True),
    ("executions_per_step", None, False),
    ("execute_time_s", "s", True),
    ("device_to_host", None, True),
    ("device_to_host_per_step", None, False),
    ("device_to_host_bytes", "B", True),
    ("device_to_host_bytes_per_step", "B", False),
    ("host_to_device", None, True),
    ("host_to_device_per_step", None, False),
    ("host_to_device_bytes", "B", True),
    ("host_to_device_bytes_per_step", "B", False),
    ("step_time_p50", "s", False),
    ("step_time_p90", "s", False),
    ("step_time_mean", "s", False),
    ("step_time_min", "s", False),
    ("step_time_max", "s", False),
    ("wall_time_s", "s", True),
    ("steps", None, False),
    ("warmup_steps", None, False),
    ("distinct_graphs", None, False),
    ("fallback_ops", None, True),
    ("fallback_ops_per_step", None, False),
    ("mfu", None, False),  # roofline (docs/roofline.md): achieved / peak FLOP/s over steady steps, a fraction
    ("achieved_tflops_per_s", None, False),
    ("flops_per_step", None, False),
]
_CANON = {name: (unit, additive) for name, unit, additive in CANONICAL}
_PER_STEP_BASES = ["compiles", "executions", "device_to_host", "device_to_host_bytes", "host_to_device",
                   "host_to_device_bytes", "fallback_ops"]
ALIASES = {"step_time": "step_time_p50", "d2h": "device_to_host", "h2d": "host_to_device",
           "d2h_per_step": "device_to_host_per_step", "h2d_per_step": "host_to_device_per_step"}


@dataclass
class Source:
    """One side of a comparison: a flat map of row name -> (value, unit)."""

    label: str
    kind: str  # 'metrics_text' | 'report_json'
    steps: int | None
    values: dict[str, tuple[float | None, str | None]]
    raw: dict[str, str] = field(default_factory=dict)  # raw row name -> 'metric' | 'samples' | 'counter'
    fallback: dict[str, int] = field(default_factory=dict)  # aten::* name -> count
    snapshot: Snapshot | None = None
    snapshot_step: int | None = None
    notes: list[str] = field(default_factory=list)

    def describe(self) -> str:
        kind = "metrics text" if self.kind == "metrics_text" else "report JSON"
        bits = [kind]
        if self.snapshot_step is not None:
            bits.append(f"snapshot step={self.snapshot_step}")
        bits.append(f"{self.steps} steps" if self.steps is not None else "step count unknown")
        return f"{self.label} ({', '.join(bits)})"

    # -- lookups used by rules
    def lookup(self, name: str) -> tuple[float | None, str | None] | None:
        """(value, unit) for any row name, `NAME.field` of a metric, or `X_per_step`; None when unknown."""
        name = ALIASES.get(name, name)
        if name in self.values:
            return self.values[name]
        if self.snapshot is not None and "." in name:
            base, _, fld = name.rpartition(".")
            metric = self.snapshot.metrics.get(base)
            if metric is not None:
                unit = metric.unit
                if fld in ("samples", "count", "total_samples"):
                    return float(metric.total_samples) if metric.total_samples is not None else None, None
                if fld in ("accumulator", "total"):
                    return metric.accumulator, unit
                if fld in ("mean", "stddev", "value_rate"):
                    return getattr(metric, fld), unit
                if fld == "rate":
                    return metric.rate, None
                pm = re.fullmatch(r"p?(\d+(?:\.\d+)?)%?", fld)
                if pm and f"{pm.group(1)}%" in metric.percentiles:
                    return metric.percentiles[f"{pm.group(1)}%"], unit
                return None
        if name.endswith("_per_step"):
            base = self.lookup(name[: -len("_per_step")])
            if base is None:
                return None
            if base[0] is None or not self.steps:
                return None, base[1]
            return base[0] / self.steps, base[1]
        return None

    def absent_means_zero(self, name: str) -> bool:
        """Counters that torch_xla omits while they are zero, and fallback ops in either kind of input."""
        base = name.removesuffix("_per_step")
        if base.startswith(("aten::", "xla::")):
            return True
        return self.kind == "metrics_text" and "." not in base and base not in _CANON


def _num(x: Any) -> float | None:
    if isinstance(x, bool) or x is None:
        return None
    if isinstance(x, (int, float)):
        return float(x)
    return None


def from_snapshot(snap: Snapshot, label: str = "") -> Source:
    m, c = snap.metrics, snap.counters

    def acc(name: str, *alts: str) -> float:
        for n in (name, *alts):
            if n in m and m[n].accumulator is not None:
                return m[n].accumulator
        return 0.0

    def samples(name: str, *alts: str) -> float:
        for n in (name, *alts):
            if n in m and m[n].total_samples is not None:
                return float(m[n].total_samples)
        return 0.0

    values: dict[str, tuple[float | None, str | None]] = {}
    compiles = float(c["UncachedCompile"]) if "UncachedCompile" in c else samples("CompileTime")
    values["compiles"] = (compiles, None)
    values["cached_compiles"] = (float(c.get("CachedCompile", 0)), None)
    values["compile_time_s"] = (acc("CompileTime"), "s")
    values["executions"] = (samples("ExecuteTime") or float(c.get("ExecuteComputation", 0)), None)
    values["execute_time_s"] = (acc("ExecuteTime"), "s")
    # XRT-era client metrics were called ...ServerTime
    values["device_to_host"] = (samples("TransferFromDeviceTime", "TransferFromServerTime"), None)
    values["device_to_host_bytes"] = (acc("InboundData"), "B")
    values["host_to_device"] = (samples("TransferToDeviceTime", "TransferToServerTime"), None)
    values["host_to_device_bytes"] = (acc("OutboundData"), "B")
    steps = c.get("MarkStep")
    values["steps"] = (float(steps) if steps is not None else None, None)
    fallback = {k: v for k, v in c.items() if k.startswith("aten::")}
    values["fallback_ops"] = (float(sum(v for k, v in fallback.items() if k not in NOT_A_FALLBACK)), None)
    raw: dict[str, str] = {}
    for name, metric in m.items():
        values[name] = (metric.accumulator, metric.unit)
        raw[name] = "metric"
        values[f"{name}.samples"] = (float(metric.total_samples) if metric.total_samples is not None else None, None)
        raw[f"{name}.samples"] = "samples"
    for name, value in c.items():
        values[name] = (float(value), None)
        raw[name] = "counter"
    src = Source(label=label, kind="metrics_text", steps=steps if steps else None, values=values, raw=raw,
                 fallback=fallback, snapshot=snap, snapshot_step=snap.step)
    _add_per_step(src)
    return src


def _add_per_step(src: Source) -> None:
    for base in _PER_STEP_BASES:
        key = f"{base}_per_step"
        if key in src.values and src.values[key][0] is not None:
            continue
        value, unit = src.values.get(base, (None, _CANON[base][0]))
        src.values[key] = (value / src.steps if value is not None and src.steps else None, unit)


def from_text(text: str, label: str = "", step: int | None = None) -> Source:
    """Metrics-report text -> Source for its last snapshot (or the `[MetricsData; step=N]` one)."""
    try:
        snapshots = parse(text)
    except MetricsParseError as exc:
        raise DiffInputError(f"{label or 'input'}: {exc}") from None
    notes = []
    if step is not None:
        chosen = [s for s in snapshots if s.step == step]
        if not chosen:
            have = [s.step for s in snapshots if s.step is not None]
            if not have:
                raise DiffInputError(f"{label or 'input'}: --step {step} given, but it is a single report "
                                     "without [MetricsData; step=N] blocks")
            raise DiffInputError(f"{label or 'input'}: no [MetricsData; step={step}] block "
                                 f"(it has steps {min(have)}..{max(have)})")
        snap = chosen[-1]
    else:
        snap = snapshots[-1]
        if (snap.truncated or snap.empty) and len(snapshots) > 1:
            earlier = [s for s in snapshots[:-1] if not s.empty and not s.truncated]
            if earlier:
                notes.append(f"{label}: last block (step={snap.step}) is truncated; "
                             f"using step={earlier[-1].step}")
                snap = earlier[-1]
        elif snap.truncated:
            notes.append(f"{label}: the report looks truncated (its last block is incomplete)")
    src = from_snapshot(snap, label)
    src.notes.extend(notes)
    return src


def from_report(report: dict, label: str = "") -> Source:
    """ptxla_perf report JSON (schema ptxla_perf.report/1) -> Source."""
    if not isinstance(report, dict) or report.get("schema") != SCHEMA_ID:
        found = report.get("schema") if isinstance(report, dict) else type(report).__name__
        raise DiffInputError(f"{label or 'input'}: JSON is not a ptxla_perf report "
                             f"(schema {found!r}, expected {SCHEMA_ID!r})")
    summary = report.get("summary")
    if not isinstance(summary, dict):
        raise DiffInputError(f"{label or 'input'}: report JSON has no 'summary' object")
    steps_list = [s for s in report.get("steps") or [] if isinstance(s, dict)]
    steps = summary.get("steps")
    steps = int(steps) if isinstance(steps, int) and not isinstance(steps, bool) else None
    values: dict[str, tuple[float | None, str | None]] = {}

    def total(key: str, sub: str | None = None) -> float | None:
        if not steps_list:
            return None
        out = 0.0
        for s in steps_list:
            v = s.get(key)
            if sub is not None:
                v = v.get(sub) if isinstance(v, dict) else None
            v = _num(v)
            if v is None:
                return None
            out += v
        return out

    def per_step_total(per_step_key: str) -> float | None:
        v = _num(summary.get(per_step_key))
        return v * steps if v is not None and steps is not None else None

    values["compiles"] = (_num(summary.get("compiles")), None)
    values["cached_compiles"] = (_num(summary.get("cached_compiles")) if "cached_compiles" in summary
                                 else total("cached_compiles"), None)
    values["recompiles_after_warmup"] = (_num(summary.get("recompiles_after_warmup")), None)
    values["compile_time_s"] = (_num(summary.get("compile_time_s")), "s")
    ex = total("executions")
    values["executions"] = (ex if ex is not None else per_step_total("executions_per_step"), None)
    for direction in ("device_to_host", "host_to_device"):
        count = total(direction, "count")
        values[direction] = (count if count is not None else per_step_total(f"{direction}_per_step"), None)
        nbytes = total(direction, "bytes")
        values[f"{direction}_bytes"] = (nbytes if nbytes is not None
                                        else per_step_total(f"{direction}_bytes_per_step"), "B")
        for key in (f"{direction}_per_step", f"{direction}_bytes_per_step"):
            if _num(summary.get(key)) is not None:
                values[key] = (_num(summary[key]), "B" if "bytes" in key else None)
    if _num(summary.get("executions_per_step")) is not None:
        values["executions_per_step"] = (_num(summary["executions_per_step"]), None)
    stats = summary.get("step_time_s")
    if isinstance(stats, dict):
        for k in ("p50", "p90", "mean", "min", "max"):
            if _num(stats.get(k)) is not None:
                values[f"step_time_{k}"] = (_num(stats[k]), "s")
    for k in ("mfu", "achieved_tflops_per_s", "flops_per_step"):  # roofline figures (absent: unknown)
        if _num(summary.get(k)) is not None:
            values[k] = (_num(summary[k]), None)
    for k in ("wall_time_s", "warmup_steps", "distinct_graphs"):
        if _num(summary.get(k)) is not None:
            values[k] = (_num(summary[k]), "s" if k.endswith("_s") else None)
    values["steps"] = (float(steps) if steps is not None else None, None)
    fallback = {k: int(v) for k, v in (summary.get("fallback_ops") or {}).items()
                if isinstance(v, (int, float)) and not isinstance(v, bool)}
    values["fallback_ops"] = (float(sum(v for k, v in fallback.items() if k not in NOT_A_FALLBACK)), None)
    for k, v in fallback.items():
        values[k] = (float(v), None)
    src = Source(label=label, kind="report_json", steps=steps if steps else None, values=values,
                 raw={k: "counter" for k in fallback}, fallback=fallback)
    _add_per_step(src)
    run = report.get("run") if isinstance(report.get("run"), dict) else {}
    if run.get("status") not in (None, "completed"):
        src.notes.append(f"{label}: run status is {run['status']!r}")
    return src


def load(path: str | Path, step: int | None = None) -> Source:
    """Read a metrics-report text file or a ptxla_perf report JSON file. Raises DiffInputError."""
    p = Path(path)
    label = str(path)
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise DiffInputError(f"{label}: no such file") from None
    except IsADirectoryError:
        raise DiffInputError(f"{label}: is a directory, expected a file") from None
    except OSError as exc:
        raise DiffInputError(f"{label}: cannot read ({exc.strerror or exc})") from None
    text = data.decode("utf-8", errors="replace")
    if text.lstrip().startswith("{"):
        try:
            report = json.loads(text)
        except json.JSONDecodeError as exc:
            raise DiffInputError(f"{label}: invalid JSON ({exc.msg} at line {exc.lineno})") from None
        src = from_report(report, label)
        if step is not None:
            src.notes.append(f"{label}: --step applies to metrics files only; using the whole report")
        return src
    return from_text(text, label, step)


# ------------------------------------------------------------------------------------------------ compare

@dataclass
class Row:
    name: str
    a: float | None
    b: float | None
    delta: float | None
    ratio: float | None
    status: str  # new | vanished | changed | same | n/a (one side cannot know this value)
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
                "rows": [r.to_dict() for r in self.rows]}


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
    for name, unit, additive in CANONICAL:
        va, vb = a.values.get(name, (None, unit))[0], b.values.get(name, (None, unit))[0]
        if va is None and vb is None:
            continue
        if additive and per_step:
            va = va * scale_a if va is not None else None
            vb = vb * scale_b if vb is not None else None
        rows.append(_row(name, va, vb, unit, "headline", zero_default=False))
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
                      vanished_fallback_ops=gone_ops, new_counters=new_counters, vanished_counters=gone_counters)


# ------------------------------------------------------------------------------------------------ rules

_RULE_RE = re.compile(
    r"^\s*(?P<name>[^\s<>=!]+)\s*(?P<op>>=|<=|==|!=|>|<)\s*"
    r"(?P<sign>[+-])?(?P<num>(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)\s*(?P<unit>%|[A-Za-z]+)?\s*$")
_OPS = {">": lambda x, t: x > t, ">=": lambda x, t: x >= t, "<": lambda x, t: x < t,
        "<=": lambda x, t: x <= t, "==": lambda x, t: x == t, "!=": lambda x, t: x != t}


@dataclass
class Rule:
    text: str
    name: str  # a row name, `NAME.p50`-style metric field, `X_per_step`, or a glob (`aten::*`)
    op: str
    threshold: float  # percent for 'relative'; normalised units (s, B) otherwise
    mode: str  # 'absolute' (B's value) | 'delta' (B - A, threshold written +N / -N) | 'relative' (% change B vs A)
    unit: str | None = None  # 's' | 'B' when the threshold carried a unit

    @property
    def is_glob(self) -> bool:
        return any(ch in self.name for ch in "*?[")


@dataclass
class Violation:
    rule: str
    name: str
    a: float | None
    b: float | None
    value: float  # what was compared: B, B - A or the % change
    message: str

    def to_dict(self) -> dict:
        return {"rule": self.rule, "name": self.name, "a": _json_num(self.a), "b": _json_num(self.b),
                "value": _json_num(self.value), "message": self.message}


def parse_rules(spec: str | list[str] | None) -> list[Rule]:
    """`compiles>0,device_to_host_per_step>0,step_time_p50>+5%,aten::*>0` -> rules. Raises RuleError.

    Threshold forms: `N` compares B's value; `+N` / `-N` compares B - A; `N%` / `+N%` / `-N%` compares the
    percentage change from A to B. A threshold may carry a unit (`0.5s`, `20ms`, `100us`, `1MB`, `512B`)."""
    if spec is None:
        return []
    pieces = spec if isinstance(spec, list) else [spec]
    rules: list[Rule] = []
    for piece in pieces:
        for text in str(piece).split(","):
            text = text.strip()
            if not text:
                continue
            m = _RULE_RE.match(text)
            if not m:
                raise RuleError(f"bad rule {text!r}: expected NAME OP THRESHOLD, e.g. 'compiles>0', "
                                "'step_time_p50>+5%', 'aten::*>0' (OP one of > >= < <= == !=)")
            sign, num, unit = m.group("sign"), float(m.group("num")), m.group("unit")
            value = -num if sign == "-" else num
            norm_unit = None
            if unit == "%":
                mode = "relative"
            else:
                mode = "delta" if sign else "absolute"
                if unit:
                    parsed = parse_value(f"{num}{unit}" if unit in ("B", "KB", "MB", "GB", "TB", "PB")
                                         else f"{m.group('num')}{unit}")
                    if parsed is None or parsed[1] is None:
                        raise RuleError(f"bad rule {text!r}: unknown unit {unit!r} "
                                        "(use %, us, ms, s, m, h, B, KB, MB, GB, TB, PB)")
                    value = -parsed[0] if sign == "-" else parsed[0]
                    norm_unit = parsed[1]
            rules.append(Rule(text=text, name=ALIASES.get(m.group("name"), m.group("name")), op=m.group("op"),
                              threshold=value, mode=mode, unit=norm_unit))
    if not rules:
        raise RuleError("no rules given (e.g. --fail-on 'compiles>+0,device_to_host_per_step>0')")
    return rules


def _resolve(src: Source, other: Source, name: str) -> tuple[float | None, str | None] | None:
    """src's value for a rule name; names absent from src that mean zero there (counters torch_xla omits while
    zero, fallback ops, fields of a metric with no samples on this side) resolve to 0."""
    found = src.lookup(name)
    if found is not None:
        return found
    other_found = other.lookup(name)
    base = name.removesuffix("_per_step")
    if src.absent_means_zero(name) and (other_found is not None or base.startswith(("aten::", "xla::"))):
        if name.endswith("_per_step") and not src.steps:
            return None, None
        return 0.0, (other_found or (None, None))[1]
    if src.kind == "metrics_text" and other_found is not None and other.snapshot is not None:
        metric = base.rpartition(".")[0] if "." in base else base
        if metric in other.snapshot.metrics:  # the metric has no samples on this side
            if name.endswith("_per_step") and not src.steps:
                return None, None
            return 0.0, other_found[1]
    return None


def _fmt_rule_value(v: float | None, unit: str | None) -> str:
    return format_value(v, unit)


def check(comparison: Comparison, rules: list[Rule] | str) -> list[Violation]:
    """Evaluate rules on a comparison; return the broken ones (empty list: all passed). Raises RuleError for a
    rule whose name neither input knows, or that needs a value an input cannot provide (e.g. step_time_p50 from
    metrics text, X_per_step without a step count)."""
    if isinstance(rules, str):
        rules = parse_rules(rules)
    a, b = comparison.a, comparison.b
    broken: list[Violation] = []
    for rule in rules:
        if rule.is_glob:
            names = sorted({n for n in (*a.values, *b.values) if fnmatch.fnmatchcase(n, rule.name)}
                           | {n + "_per_step" for n in (*a.fallback, *b.fallback)
                              if rule.name.endswith("_per_step")
                              and fnmatch.fnmatchcase(n + "_per_step", rule.name)})
        else:
            names = [rule.name]
        for name in names:
            vb = _resolve(b, a, name)
            va = _resolve(a, b, name)
            if vb is None and va is None and not rule.is_glob:
                hint = ""
                if name.startswith("step_time") and b.kind == "metrics_text":
                    hint = " (metrics text has no wall-clock step times; try execute_time_s_per_step)"
                raise RuleError(f"rule {rule.text!r}: neither input has {name!r}{hint}")
            if vb is None or vb[0] is None:
                if rule.is_glob:
                    continue
                raise RuleError(f"rule {rule.text!r}: {b.label or 'B'} has no value for {name!r}"
                                + (" (its step count is unknown)" if name.endswith("_per_step") else ""))
            unit = vb[1]
            if rule.unit is not None and unit is not None and rule.unit != unit:
                raise RuleError(f"rule {rule.text!r}: {name} is in {unit!r}, the threshold in {rule.unit!r}")
            bval = vb[0]
            aval = va[0] if va is not None else None
            if rule.mode == "absolute":
                value = bval
                desc = f"B = {_fmt_rule_value(bval, unit)}"
            else:
                if aval is None:
                    if rule.is_glob:
                        continue
                    raise RuleError(f"rule {rule.text!r}: {a.label or 'A'} has no value for {name!r}, "
                                    "which a relative rule needs")
                if rule.mode == "delta":
                    value = bval - aval
                    desc = (f"B - A = {'+' if value >= 0 else ''}{_fmt_rule_value(value, unit)} "
                            f"(A {_fmt_rule_value(aval, unit)} -> B {_fmt_rule_value(bval, unit)})")
                else:
                    if aval == 0:
                        value = 0.0 if bval == 0 else math.copysign(math.inf, bval)
                    else:
                        value = (bval - aval) / abs(aval) * 100.0
                    desc = (f"change {value:+.1f}% (A {_fmt_rule_value(aval, unit)} -> "
                            f"B {_fmt_rule_value(bval, unit)})")
            if _OPS[rule.op](value, rule.threshold):
                broken.append(Violation(rule=rule.text, name=name, a=aval, b=bval, value=value,
                                        message=f"{rule.text}: {name}: {desc}"))
    return broken


# ------------------------------------------------------------------------------------------------ rendering

def format_value(v: float | None, unit: str | None, signed: bool = False) -> str:
    if v is None:
        return "-"
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "+inf" if v > 0 else "-inf"
    sign = "+" if signed and v > 0 else ""
    v = float(f"{v:.12g}")  # 0.000999999999 -> 0.001, so the unit picked below is the one a reader expects
    if unit == "s":
        x = abs(v)
        neg = "-" if v < 0 else sign
        if x == 0:
            return f"{sign}0 s"
        if x >= 60:
            return f"{neg}{x:.1f} s"
        if x >= 1:
            return f"{neg}{x:.3f} s"
        if x >= 1e-3:
            return f"{neg}{x * 1e3:.3f} ms"
        return f"{neg}{x * 1e6:.3f} us"
    if unit == "B":
        x = abs(v)
        neg = "-" if v < 0 else sign
        for label in ("B", "KiB", "MiB", "GiB", "TiB"):
            if x < 1024:
                return f"{neg}{x:.0f} {label}" if label == "B" else f"{neg}{x:.2f} {label}"
            x /= 1024
        return f"{neg}{x:.2f} PiB"
    if v == int(v) and abs(v) < 1e15:
        return f"{sign}{int(v)}"
    return f"{sign}{v:.4g}"


def _ratio(r: float | None) -> str:
    return "-" if r is None else f"x{r:.3g}"


def _cells(row: Row) -> list[str]:
    status = {"new": "NEW", "vanished": "gone"}.get(row.status, row.status)
    return [row.name, format_value(row.a, row.unit), format_value(row.b, row.unit),
            format_value(row.delta, row.unit, signed=True) if row.status != "same" else "0", _ratio(row.ratio),
            status]


_HEAD = ["name", "A", "B", "delta", "ratio", "status"]
_GROUP_TITLES = {"headline": "Headline", "fallback": "Fallback ops (aten::*)", "metric": "Metrics",
                 "counter": "Counters"}


def _preamble(cmp: Comparison) -> list[str]:
    lines = [f"A: {cmp.a.describe()}", f"B: {cmp.b.describe()}"]
    if cmp.per_step:
        lines.append("Totals are per step (each divided by its side's step count).")
    new_real = [op for op in cmp.new_fallback_ops if op not in NOT_A_FALLBACK]
    if new_real:
        lines.append("!!! NEW FALLBACK OPS in B (run on the CPU, not lowered to XLA): " + ", ".join(new_real))
    new_reads = [op for op in cmp.new_fallback_ops if op in NOT_A_FALLBACK]
    if new_reads:
        lines.append("!!! NEW in B: " + ", ".join(new_reads) + " (device-to-host reads such as .item())")
    if cmp.vanished_fallback_ops:
        lines.append("Fallback ops gone in B: " + ", ".join(cmp.vanished_fallback_ops))
    if cmp.new_counters:
        lines.append("New counters in B: " + ", ".join(cmp.new_counters))
    if cmp.vanished_counters:
        lines.append("Counters gone in B: " + ", ".join(cmp.vanished_counters))
    lines.extend(f"note: {n}" for n in cmp.notes)
    return lines


def _rule_lines(violations: list[Violation] | None, n_rules: int) -> list[str]:
    if violations is None:
        return []
    if not violations:
        return [f"All {n_rules} rule(s) passed."]
    return [f"FAILED {len(violations)} rule check(s):"] + [f"FAIL {v.message}" for v in violations]


def render_table(cmp: Comparison, violations: list[Violation] | None = None, n_rules: int = 0,
                 rich: bool = False) -> str:
    """Aligned plain text (stable for logs); with rich=True a rich table rendered to text with colours."""
    if rich:
        try:
            return _render_rich(cmp, violations, n_rules)
        except ImportError:
            pass
    out = list(_preamble(cmp))
    for group in ("headline", "fallback", "metric", "counter"):
        rows = [r for r in cmp.rows if r.group == group]
        if not rows:
            continue
        cells = [_HEAD] + [_cells(r) for r in rows]
        widths = [max(len(c[i]) for c in cells) for i in range(len(_HEAD))]
        out.append("")
        out.append(f"== {_GROUP_TITLES[group]}")
        for k, c in enumerate(cells):
            line = "  ".join(c[i].ljust(widths[i]) if i == 0 or i == 5 else c[i].rjust(widths[i])
                             for i in range(len(c)))
            out.append(line.rstrip())
            if k == 0:
                out.append("  ".join("-" * w for w in widths))
    rl = _rule_lines(violations, n_rules)
    if rl:
        out.append("")
        out.extend(rl)
    return "\n".join(out) + "\n"


def _render_rich(cmp: Comparison, violations, n_rules) -> str:
    import io
    import shutil

    from rich.console import Console
    from rich.table import Table

    console = Console(file=io.StringIO(), width=max(80, shutil.get_terminal_size((120, 40)).columns),
                      force_terminal=True, color_system="standard")
    for line in _preamble(cmp):
        console.print(line, style="bold red" if line.startswith("!!!") else None, markup=False, highlight=False)
    styles = {"new": "bold red", "vanished": "yellow", "changed": "cyan", "same": "dim", "n/a": "dim"}
    for group in ("headline", "fallback", "metric", "counter"):
        rows = [r for r in cmp.rows if r.group == group]
        if not rows:
            continue
        table = Table(title=_GROUP_TITLES[group], title_justify="left")
        for i, h in enumerate(_HEAD):
            table.add_column(h, justify="left" if i in (0, 5) else "right")
        for r in rows:
            table.add_row(*_cells(r), style=styles.get(r.status))
        console.print(table)
    for line in _rule_lines(violations, n_rules):
        console.print(line, style="bold red" if line.startswith("FAIL") else "green", markup=False,
                      highlight=False)
    return console.file.getvalue()


def render_markdown(cmp: Comparison, violations: list[Violation] | None = None, n_rules: int = 0) -> str:
    esc = lambda s: s.replace("|", "\\|")
    out = [f"- {esc(line)}" for line in _preamble(cmp)]
    for group in ("headline", "fallback", "metric", "counter"):
        rows = [r for r in cmp.rows if r.group == group]
        if not rows:
            continue
        out += ["", f"### {_GROUP_TITLES[group]}", "", "| " + " | ".join(_HEAD) + " |",
                "|" + "|".join([":---"] + ["---:"] * 4 + [":---"]) + "|"]
        for r in rows:
            cells = [esc(c) for c in _cells(r)]
            cells[0] = f"`{cells[0]}`"
            if r.status == "new" and r.group == "fallback":
                cells[5] = "**NEW**"
            out.append("| " + " | ".join(cells) + " |")
    rl = _rule_lines(violations, n_rules)
    if rl:
        out += ["", rl[0]] + [f"- `{esc(v.rule)}`: {esc(v.message)}" for v in violations or []]
    return "\n".join(out) + "\n"


def render_json(cmp: Comparison, violations: list[Violation] | None = None, n_rules: int = 0) -> str:
    doc = cmp.to_dict()
    if violations is not None:
        doc["rules_checked"] = n_rules
        doc["violations"] = [v.to_dict() for v in violations]
    return json.dumps(doc, indent=2) + "\n"
