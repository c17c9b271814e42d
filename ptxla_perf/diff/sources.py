"""Inputs of a comparison -> `Source`: metrics-report text (a snapshot of torch_xla's counters) or a report JSON
(its `summary`, the report's contract). Canonical rows are shared by both kinds; docs/diff.md has the mapping."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._meta import SCHEMA_ID
from ..model import summary_keys as K
from .metrics_text import MetricsParseError, Snapshot, parse
from ..model.summary import Summary, rows_from_json
from . import findings as F

NOT_A_FALLBACK = {"aten::_local_scalar_dense"}  # counts host reads of a scalar (.item()), not an un-lowered op


class DiffInputError(ValueError):
    """An input that cannot be compared (missing file, not a metrics report, unknown JSON, absent step)."""


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
    ("device_to_host", None, True),  # host reads of the user's code, net of CPU-fallback copies (report JSON)
    ("device_to_host_per_step", None, False),
    ("device_to_host_transfers", None, True),  # every device-to-host transfer, fallback copies included
    ("device_to_host_transfers_per_step", None, False),
    ("device_to_host_transfer_bytes", "B", True),
    ("device_to_host_transfer_bytes_per_step", "B", False),
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
    ("peak_bytes", "B", False),  # memory (docs/report.md#memory): the largest step graph's peak, its temporaries
    ("temp_bytes", "B", False),
    # where the steady step's time goes (summary.time_breakdown, breakdown.py): mean seconds per steady step
    *((f"time_{c}_s", "s", False) for c in ("data", "host", "launch", "compile", "read_wait", "device", "profiler",
                                                 "other")),
]
_CANON = {name: (unit, additive) for name, unit, additive in CANONICAL}
_PER_STEP_BASES = ["compiles", "executions", "device_to_host", "device_to_host_transfers",
                   "device_to_host_transfer_bytes", "host_to_device", "host_to_device_bytes", "fallback_ops"]
ALIASES = {"step_time": "step_time_p50", "d2h": "device_to_host", "h2d": "host_to_device",
           "d2h_per_step": "device_to_host_per_step", "h2d_per_step": "host_to_device_per_step",
           # names before 0.5.0
           "device_to_host_bytes": "device_to_host_transfer_bytes",
           "device_to_host_bytes_per_step": "device_to_host_transfer_bytes_per_step"}
# metrics text cannot tell the user's host reads from CPU-fallback copies (TransferFromDeviceTime counts both): a
# rule on host reads reads the gross transfers there (docs/diff.md)
_TEXT_READS = {"device_to_host": "device_to_host_transfers",
               "device_to_host_per_step": "device_to_host_transfers_per_step"}


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
    findings: list | None = None  # report JSON: its findings (diff/findings.py); None for metrics text
    judged: set = field(default_factory=set)  # report JSON: the finding kinds its rules looked for
    unmeasured: str | None = None  # report JSON: why nothing was measured (no steady step, a no_steps finding)

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
        if self.kind == "metrics_text":
            name = _TEXT_READS.get(name, name)
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
    # every transfer, CPU-fallback copies included: its own row, never `device_to_host` (host reads)
    values["device_to_host_transfers"] = (samples("TransferFromDeviceTime", "TransferFromServerTime"), None)
    values["device_to_host_transfer_bytes"] = (acc("InboundData"), "B")
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
    except MetricsParseError:
        raise DiffInputError(neither(label)) from None
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
    steps = summary.get(K.STEPS)
    steps = int(steps) if isinstance(steps, int) and not isinstance(steps, bool) else None
    values: dict[str, tuple[float | None, str | None]] = {}
    sm = Summary.from_json(summary)  # any version's summary, renamed keys under their new names

    def total(value: float | None, per: float | None) -> float | None:
        """A total from the summary; reports written before the totals give it as per-step x steps."""
        if value is not None:
            return float(value)
        return float(per) * steps if per is not None and steps is not None else None

    values["compiles"] = (_num(summary.get(K.COMPILES)), None)
    values["cached_compiles"] = (_num(summary.get(K.CACHED_COMPILES)), None)
    values["recompiles_after_warmup"] = (_num(summary.get(K.RECOMPILES)), None)
    values["compile_time_s"] = (_num(summary.get(K.COMPILE_TIME)), "s")
    values["executions"] = (total(sm.executions, sm.executions_per_step), None)
    values["device_to_host"] = (total(sm.device_to_host, sm.device_to_host_per_step), None)
    values["host_to_device"] = (total(sm.host_to_device, sm.host_to_device_per_step), None)
    transfers = sm.device_to_host_transfers
    if transfers is None and report.get("steps"):  # before 0.5.0: the steps' gross counts
        transfers = sum(r.device_to_host_transfers for r in rows_from_json(report["steps"]) if r.train)
    values["device_to_host_transfers"] = (total(transfers, sm.device_to_host_transfers_per_step), None)
    values["device_to_host_transfer_bytes"] = (total(sm.device_to_host_transfer_bytes,
                                                     sm.device_to_host_transfer_bytes_per_step), "B")
    values["host_to_device_bytes"] = (total(sm.host_to_device_bytes, sm.host_to_device_bytes_per_step), "B")
    for key, per in (("executions_per_step", sm.executions_per_step),
                     ("device_to_host_per_step", sm.device_to_host_per_step),
                     ("device_to_host_transfers_per_step", sm.device_to_host_transfers_per_step),
                     ("device_to_host_transfer_bytes_per_step", sm.device_to_host_transfer_bytes_per_step),
                     ("host_to_device_per_step", sm.host_to_device_per_step),
                     ("host_to_device_bytes_per_step", sm.host_to_device_bytes_per_step)):
        if _num(per) is not None:
            values[key] = (_num(per), "B" if "bytes" in key else None)
    if sm.step_time_s is not None:
        for k in ("p50", "p90", "mean", "min", "max"):
            values[f"step_time_{k}"] = (float(getattr(sm.step_time_s, k)), "s")
    if _num(sm.fallback_copies) is not None:  # copies CPU fallbacks made (not in device_to_host)
        values[K.FALLBACK_COPIES] = (_num(sm.fallback_copies), None)
    for k in (K.MFU, K.ACHIEVED_TFLOPS, K.FLOPS_PER_STEP):  # roofline figures (absent: unknown)
        if _num(getattr(sm, k)) is not None:
            values[k] = (_num(getattr(sm, k)), None)
    for k in (K.PEAK_BYTES, K.TEMP_BYTES):  # memory figures (absent: unknown)
        if _num(getattr(sm, k)) is not None:
            values[k] = (_num(getattr(sm, k)), "B")
    split = summary.get(K.TIME_BREAKDOWN)
    if isinstance(split, dict) and isinstance(split.get("components_s"), dict):
        for c, v in split["components_s"].items():
            if _num(v) is not None:
                values[f"time_{c}_s"] = (_num(v), "s")
    for k in (K.WALL_TIME, K.WARMUP_STEPS, K.DISTINCT_GRAPHS):
        if _num(summary.get(k)) is not None:
            values[k] = (_num(summary[k]), "s" if k.endswith("_s") else None)
    values["steps"] = (float(steps) if steps is not None else None, None)
    fallback = {k: int(v) for k, v in (summary.get(K.FALLBACK_OPS) or {}).items()
                if isinstance(v, (int, float)) and not isinstance(v, bool)}
    values["fallback_ops"] = (float(sum(v for k, v in fallback.items() if k not in NOT_A_FALLBACK)), None)
    for k, v in fallback.items():
        values[k] = (float(v), None)
    src = Source(label=label, kind="report_json", steps=steps if steps else None, values=values,
                 raw={k: "counter" for k in fallback}, fallback=fallback)
    _add_per_step(src)
    src.findings, src.judged = F.collect(report), F.judged(report)
    src.unmeasured = _unmeasured(summary, src.findings)
    run = report.get("run") if isinstance(report.get("run"), dict) else {}
    if run.get("status") not in (None, "completed"):
        src.notes.append(f"{label}: run status is {run['status']!r}")
    return src


def _unmeasured(summary: dict, findings: list) -> str | None:
    """Why a report measured nothing a gate can judge: a `no_steps` finding, or no steady step (every step
    warm-up, or none at all). None where it measured steady steps (reports before `steady_steps`: steps > 0)."""
    if any(f.kind == "no_steps" for f in findings):
        return "it has a no_steps finding: no step boundary was seen"
    steady, steps = summary.get(K.STEADY_STEPS), summary.get(K.STEPS)
    if not isinstance(steps, int) or isinstance(steps, bool) or steps <= 0:
        return "it has no steps"
    if isinstance(steady, int) and not isinstance(steady, bool) and steady <= 0:
        return f"it has no steady steps ({steps} steps, all warm-up or compiling)"
    return None


def neither(label: str, what: str = "no torch_xla metric or counter in it") -> str:
    """The one line for an input that is neither kind diff reads: it names both."""
    return (f"{label or 'input'}: neither a torch_xla metrics report (metrics_report() text or an XLA_METRICS_FILE "
            f"file) nor a ptxla_perf report JSON ({what}); diff accepts either")


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
        if not isinstance(report, dict) or "schema" not in report:
            raise DiffInputError(neither(label, "JSON without a ptxla_perf 'schema'"))
        src = from_report(report, label)
        if step is not None:
            src.notes.append(f"{label}: --step applies to metrics files only; using the whole report")
        return src
    return from_text(text, label, step)
