"""Report schema v1: records + findings -> one JSON document (docs/report.md, schema/report.schema.json)."""
from __future__ import annotations

import json
import os
import platform
import socket
import sys
import tempfile
from functools import lru_cache
from importlib import resources
from typing import Any

from . import SCHEMA_ID, __version__
from .findings import Finding, analyze, classify_compiles
from .records import StepRecord


def stats(values: list[float], ndigits: int | None = None) -> dict[str, float] | None:
    """p50/p90 (linear interpolation), mean, min, max, n: the one statistics shape every section of a report uses."""
    if not values:
        return None
    v = sorted(values)

    def pct(p: float) -> float:
        k = (len(v) - 1) * p
        lo, hi = int(k), min(int(k) + 1, len(v) - 1)
        return v[lo] + (v[hi] - v[lo]) * (k - lo)
    out = {"p50": pct(0.5), "p90": pct(0.9), "mean": sum(v) / len(v), "min": v[0], "max": v[-1]}
    if ndigits is not None:
        out = {k: round(float(x), ndigits) for k, x in out.items()}
    return {**out, "n": len(v)}


def steady_steps(steps: list[StepRecord], warmup: int) -> list[StepRecord]:
    """Steps that time the loop as it really runs: after warm-up, no compile, no attribution overhead.
    Falls back to every post-warm-up step for runs too short to have such steps."""
    after = [s for s in steps if s.index >= warmup]
    clean = [s for s in after if not s.compiles and not s.attributed]
    return clean or [s for s in after if not s.compiles] or after


def summarize(steps: list[StepRecord], warmup: int, findings: list[Finding],
              totals: dict[str, Any] | None = None) -> dict[str, Any]:
    n = len(steps)
    steady = steady_steps(steps, warmup)
    per = (lambda total: total / n) if n else (lambda total: None)
    recompiles = sum(s.compiles for hits in classify_compiles(steps, warmup)[0].values() for s in hits)
    fallback: dict[str, int] = {}
    for s in steps:
        for op, c in s.fallback_ops.items():
            fallback[op] = fallback.get(op, 0) + c
    summary: dict[str, Any] = {
        "steps": n,
        "warmup_steps": warmup,
        "steady_steps": len(steady),
        "wall_time_s": sum(s.wall_time_s for s in steps),
        "step_time_s": stats([s.wall_time_s for s in steady]),
        "compiles": sum(s.compiles for s in steps),
        "compile_time_s": sum(s.compile_time_s for s in steps),
        "cached_compiles": sum(s.cached_compiles for s in steps),
        "recompiles_after_warmup": recompiles,
        "distinct_graphs": len({h for s in steps for h in s.graph_hashes}) or None,
        "executions_per_step": per(sum(s.executions for s in steps)),
        "device_to_host_per_step": per(sum(s.device_to_host.count for s in steps)),
        "host_to_device_per_step": per(sum(s.host_to_device.count for s in steps)),
        "device_to_host_bytes_per_step": per(sum(s.device_to_host.bytes or 0 for s in steps)),
        "host_to_device_bytes_per_step": None,
        "fallback_ops": fallback,
        "throughput": _throughput(steady),
        "overhead_us_per_step": stats([s.own_time_us for s in steady if s.own_time_us is not None]),
        "findings_by_severity": {sev: sum(f.severity == sev for f in findings)
                                 for sev in ("error", "warning", "info")},
    }
    if totals and n and totals.get("host_to_device_bytes") is not None:
        summary["host_to_device_bytes_per_step"] = totals["host_to_device_bytes"] / n
    return summary


def _throughput(steady: list[StepRecord]) -> dict[str, float]:
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


def environment(extra: dict[str, Any]) -> dict[str, Any]:
    env = {"python": sys.version.split()[0], "platform": platform.platform(), "hostname": socket.gethostname(),
           "process_count": 1, "process_index": 0,
           "env_flags": {k: v for k, v in os.environ.items()
                         if k.startswith(("XLA_", "PT_XLA", "PJRT_", "TPU_", "JAX_")) and len(v) < 500}}
    versions = {"ptxla_perf": __version__}
    versions.update(extra.pop("versions", {}))
    env.update(extra)
    env["versions"] = versions
    return env


def build(*, backend: str, run: dict[str, Any], env: dict[str, Any], steps: list[StepRecord],
          profiler: dict[str, Any] | None = None, extra: dict[str, Any] | None = None,
          totals: dict[str, Any] | None = None, extra_findings: list[Finding] | None = None,
          max_warmup: int = 5) -> dict[str, Any]:
    warmup, findings = analyze(steps, max_warmup, expect_steps=run.get("kind") != "trace")
    findings = (extra_findings or []) + findings
    report = {
        "schema": SCHEMA_ID,
        "tool_version": __version__,
        "backend": backend,
        "run": run,
        "environment": env,
        "profiler": profiler or {},
        "steps": [s.to_json() for s in steps],
        "summary": summarize(steps, warmup, findings, totals),
        "findings": [f.to_json() for f in findings],
    }
    if extra:
        report["extra"] = extra
    return report


def merge_trace(report: dict[str, Any], trace: dict[str, Any]) -> dict[str, Any]:
    """Put a trace analysis into a report: its section, and its findings (evidence.source = "trace") in place of
    any earlier trace findings."""
    report["trace"] = trace
    report["findings"] = [f for f in report.get("findings", [])
                          if (f.get("evidence") or {}).get("source") != "trace"] + list(trace.get("findings", []))
    report.setdefault("summary", {})["findings_by_severity"] = {
        sev: sum(f["severity"] == sev for f in report["findings"]) for sev in ("error", "warning", "info")}
    return report


def write(report: dict[str, Any], path: str) -> str:
    """Atomic write: a reader (or a crash mid-write) never sees half a report."""
    path = os.path.abspath(path)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".ptxla_perf.", dir=os.path.dirname(path))
    with os.fdopen(fd, "w") as f:
        json.dump(report, f, indent=1, default=_json_default)
        f.write("\n")
    os.replace(tmp, path)
    return path


def _json_default(o: Any):
    if hasattr(o, "__dataclass_fields__"):
        from dataclasses import asdict
        return asdict(o)
    if isinstance(o, (set, tuple)):
        return list(o)
    return str(o)


@lru_cache(maxsize=1)
def schema() -> dict[str, Any]:
    return json.loads(resources.files("ptxla_perf").joinpath("schema/report.schema.json").read_text())


def validate(report: dict[str, Any]) -> None:
    """Raise jsonschema.ValidationError if `report` does not follow schema v1."""
    import jsonschema
    jsonschema.validate(json.loads(json.dumps(report, default=_json_default)), schema())


def load(path: str) -> dict[str, Any]:
    with open(path) as f:
        data = json.load(f)
    if not isinstance(data, dict) or data.get("schema") != SCHEMA_ID:
        raise ValueError(f"{path} is not a ptxla_perf report (schema {SCHEMA_ID})")
    return data
