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
from .findings import Analysis, Finding, analyze
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


def summarize(a: Analysis, findings: list[Finding], totals: dict[str, Any] | None = None) -> dict[str, Any]:
    """Numbers over the training iterations (`steps`); evaluation iterations are counted apart."""
    steps = a.train
    n = len(steps)
    per = (lambda total: total / n) if n else (lambda total: None)
    fallback: dict[str, int] = {}
    for s in a.iterations:
        for op, c in s.fallback_ops.items():
            fallback[op] = fallback.get(op, 0) + c
    evals = [s for s in a.iterations if s.phase == "eval"]
    summary: dict[str, Any] = {
        "steps": n,
        "warmup_steps": a.warmup,
        "steady_steps": len(a.steady),
        "eval_steps": len(evals),
        "boundaries": sum(max(1, len(s.boundaries)) for s in a.iterations),
        "wall_time_s": sum(s.wall_time_s for s in a.iterations),
        "step_time_s": stats([s.wall_time_s for s in a.steady]),
        "eval_step_time_s": stats([s.wall_time_s for s in evals if not s.compiles]),
        "compiles": sum(s.compiles for s in a.iterations),
        "compile_time_s": sum(s.compile_time_s for s in a.iterations),
        "cached_compiles": sum(s.cached_compiles for s in a.iterations),
        "recompiles_after_warmup": a.recompiles,
        "distinct_graphs": len({h for s in a.iterations for h in s.graph_hashes}) or None,
        # totals over the training steps: what the per-step figures divide, and what `diff` compares
        "executions": sum(s.executions for s in steps),
        "device_to_host": sum(s.device_to_host.count for s in steps),
        "host_to_device": sum(s.host_to_device.count for s in steps),
        "device_to_host_bytes": sum(s.device_to_host.bytes or 0 for s in steps),
        "host_to_device_bytes": None,
        "executions_per_step": per(sum(s.executions for s in steps)),
        "device_to_host_per_step": per(sum(s.device_to_host.count for s in steps)),
        "host_to_device_per_step": per(sum(s.host_to_device.count for s in steps)),
        "device_to_host_bytes_per_step": per(sum(s.device_to_host.bytes or 0 for s in steps)),
        "host_to_device_bytes_per_step": None,
        "fallback_ops": fallback,
        "throughput": _throughput(a.steady),
        "overhead_us_per_step": stats([s.own_time_us for s in a.steady if s.own_time_us is not None]),
        "findings_by_severity": severity_counts(findings),
    }
    if totals and n and totals.get("host_to_device_bytes") is not None:
        summary["host_to_device_bytes"] = int(totals["host_to_device_bytes"])
        summary["host_to_device_bytes_per_step"] = totals["host_to_device_bytes"] / n
    return summary


def severity_counts(findings: list) -> dict[str, int]:
    sev = [f.severity if isinstance(f, Finding) else f["severity"] for f in findings]
    return {k: sev.count(k) for k in ("error", "warning", "info")}


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


def build(*, backend: str, run: dict[str, Any], env: dict[str, Any], analysis: Analysis | None = None,
          steps: list[StepRecord] | None = None, profiler: dict[str, Any] | None = None,
          extra: dict[str, Any] | None = None, totals: dict[str, Any] | None = None,
          extra_findings: list[Finding] | None = None, max_warmup: int = 5) -> dict[str, Any]:
    """Assemble a report from an analysis (findings.analyze); given only boundary `steps`, analyse them here."""
    if analysis is None:
        analysis = analyze(steps or [], max_warmup=max_warmup, expect_steps=run.get("kind") != "trace")
    findings = (extra_findings or []) + analysis.findings
    report = {
        "schema": SCHEMA_ID,
        "tool_version": __version__,
        "backend": backend,
        "run": run,
        "environment": env,
        "profiler": profiler or {},
        "steps": [s.to_json() for s in analysis.iterations],
        "summary": summarize(analysis, findings, totals),
        "findings": [f.to_json() for f in findings],
    }
    if extra:
        report["extra"] = extra
    from .sources import attach  # issue 12: the culprit lines travel with the report (findings[].source)
    attach(report["findings"])
    return report


def merge_trace(report: dict[str, Any], trace: dict[str, Any]) -> dict[str, Any]:
    """Put a trace analysis into a report: its section, and its findings (evidence.source = "trace") in place of
    any earlier trace findings."""
    report["trace"] = trace
    report["findings"] = [f for f in report.get("findings", [])
                          if (f.get("evidence") or {}).get("source") != "trace"] + list(trace.get("findings", []))
    report.setdefault("summary", {})["findings_by_severity"] = severity_counts(report["findings"])
    return report


def write(report: dict[str, Any], path: str, html: bool = True) -> str:
    """Atomic write: a reader (or a crash mid-write) never sees half a report. With `html`, the page of the
    report goes beside it (report.html, docs/html.md); a page that cannot be written never fails the run."""
    path = os.path.abspath(path)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".ptxla_perf.", dir=os.path.dirname(path))
    with os.fdopen(fd, "w") as f:
        json.dump(report, f, indent=1, default=_json_default)
        f.write("\n")
    os.replace(tmp, path)
    if html:
        write_html(report, path)
    return path


def write_html(report: dict[str, Any], path: str) -> str | None:
    """report.html beside the report at `path`; None (and a one-line note) when it could not be written."""
    from . import html as H
    try:
        return H.write(report, H.html_path(path))
    except Exception as exc:  # noqa: BLE001 - the JSON report is what counts; the page is a view of it
        print(f"ptxla_perf: note: could not write {H.html_path(path)}: {type(exc).__name__}: {exc}",
              file=sys.stderr)
        return None


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
