"""Report schema v1: the one place a report is assembled (docs/report.md, schema/report.schema.json).

`assemble` puts a report together from its parts - the analysis's steps, summary and findings, the roofline, a
capture's trace analysis, the processes of a merged run - serializes the typed ones (values.Summary, the
roofline and memory sections) and adds what depends on more than one part (severity counts over all findings, the
sections' summary fields, the findings' source lines) in this one place. `from_analysis` is the front door of a process's own report (Session, `build`); `merge` assembles the
merged report through `assemble` too, and `with_trace` re-assembles a written report with a new trace."""
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

from .._meta import SCHEMA_ID, __version__
from ..model import summary_keys as K
from ..rules.end import run_end
from ..rules.iteration import Analysis, Finding, analyze
from ..config import MAX_WARMUP
from ..model.faults import FAULTS, check, guarded
from ..analysis.memory import MemorySection
from ..model.rank_digest import KEY as DIGEST, Steady
from ..analysis.rank_wait import steady_rows
from ..model.records import StepRecord
from ..rules.registry import backend_rules
from .excerpts import attach
from .. import html as H
from ..analysis.roofline import RooflineSection
from .precedence import defer_distorted
from ..trace.section import TraceSection
from ..model.summary import StepRow, Summary
from . import retention as R
from ..model.finding import TRACE, severity_counts


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


def assemble(*, backend: str, run: dict[str, Any], env: dict[str, Any], steps: list[dict[str, Any]],
             summary: Summary | dict[str, Any], findings: list[Finding], profiler: dict[str, Any] | None = None,
             roofline: RooflineSection | dict[str, Any] | None = None,
             trace: TraceSection | dict[str, Any] | None = None,
             extra: dict[str, Any] | None = None, rules: dict[str, Any] | None = None,
             processes: list[dict[str, Any]] | None = None, aggregate: dict[str, Any] | None = None,
             memory: MemorySection | dict[str, Any] | None = None,
             step_buckets: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The report from its parts. A trace's findings replace any earlier trace findings; severity counts are
    over the final findings; the summary carries the sections' own summary fields. Typed parts (Summary, the
    findings, the sections) are serialized here, once; dict parts are a written report's (`merge`, `with_trace`)
    and are read back through the same types, so an older report's summary comes out with today's keys (a written
    report's findings are read with `Finding.from_json` by the caller: the load edge)."""
    traced: list[Finding] = []
    if trace is not None:  # its findings in place of any earlier trace findings
        findings = [f for f in findings if f.origin != TRACE]
        read = trace.findings if isinstance(trace, TraceSection) else [  # a written trace's: the load edge
            Finding.from_json(f) for f in trace.get("findings", [])]
        trace = trace.to_json() if isinstance(trace, TraceSection) else dict(trace)
        traced = guarded("section.trace", defer_distorted, findings, read, default=read)
    own, window = _written(findings), _written(traced)
    kept = own + window
    written = [j for _, j in kept]
    if trace is not None:  # the same dicts in both lists: the source lines attached below show in both
        trace["findings"] = [j for _, j in window]
    if not isinstance(summary, Summary):
        summary = Summary.from_json(summary)
    summary = summary.with_fields({K.FINDINGS_BY_SEVERITY: severity_counts(f for f, _ in kept)})
    for sec in (roofline, memory):
        if isinstance(sec, (RooflineSection, MemorySection)):
            summary = summary.with_fields(sec.summary_fields())
    # key order: what a merge reads of every rank first, then its `rank_digest` (the steady steps' columns), the
    # rest, and steps[] last - a merge stops reading a rank's report at its digest (pods/inputs.py)
    summary_json = summary.to_json()
    parts: list[tuple[str, Any]] = [
        ("schema", SCHEMA_ID), ("tool_version", __version__), ("backend", backend), ("run", run),
        ("environment", env), ("profiler", profiler or {}), ("summary", summary_json), ("findings", written),
        ("memory", memory), ("trace", trace), ("roofline", roofline), ("extra", extra or None), ("rules", rules),
        ("processes", processes), ("aggregate", aggregate),
        ("step_buckets", step_buckets),  # a trimmed report's aggregates of every step (retention.py)
        ("steps", steps)]
    parts = [(k, v.to_json() if isinstance(v, (RooflineSection, MemorySection)) else v) for k, v in parts
             if v is not None or k == "steps"]
    if processes is None:  # a process's own report: what a merge reads of its steps (rank_digest.py)
        keys = [k for k, _ in parts]
        at = keys.index("memory") + 1 if "memory" in keys else keys.index("findings") + 1
        keys.insert(at, DIGEST)
        digest = guarded("section.rank_digest", lambda: Steady.of_rows(
            steady_rows({"steps": steps, "summary": summary_json})).to_json(keys))
        if digest is not None:  # without it a merge reads the rank's steps (pods/inputs.py)
            parts.insert(at, (DIGEST, digest))
    report: dict[str, Any] = dict(parts)
    guarded("section.sources", attach, report["findings"])  # the findings' source lines: a view, never the report
    return report


def _written(findings: list[Finding]) -> list[tuple[Finding, dict[str, Any]]]:
    """Each finding with its JSON; one that cannot be written is left out (faults.py, point `finding.KIND`)."""
    out = []
    for f in findings:
        j = guarded(f"finding.{f.kind}", f.to_json)
        if j is not None:
            out.append((f, j))
    return out


def from_analysis(analysis: Analysis, *, backend: str, run: dict[str, Any], env: dict[str, Any],
                  extra_findings: list[Finding] | None = None, rows: list[StepRow] | None = None,
                  retention: R.Retention | None = None, steps_file: str | None = None, **parts: Any) -> dict[str, Any]:
    """A process's own report: steps (each with its StepRow), summary (figures.py) and findings of its analysis.
    `rows`: the analysis's StepRows when the caller has them already; `retention`: trim a long run's steps[] to
    those a person looks at, with step_buckets of all (retention.py; None: every step, as `build` does)."""
    findings = (extra_findings or []) + analysis.findings
    fig = analysis.figures
    rows = fig.rows() if rows is None else rows
    its = analysis.iterations
    trim = None
    if retention is not None:  # a long run: only the steps kept in full are serialized (retention.py)
        # on a failure of ours (faults.py): every step, untrimmed
        trim = guarded("section.retention", _plan, fig, rows, findings, retention, steps_file)
        kept = R.untrimmed(len(rows), steps_file) if trim is None else trim.info
        if kept is not None:
            run = dict(run, step_retention=kept)
    positions = range(len(rows)) if trim is None else trim.keep
    rep = assemble(backend=backend, run=run, env=env, steps=[fig.step_json(its[p], rows[p]) for p in positions],
                   summary=fig.summary(), findings=findings,
                   rules={"judged": analysis.judged, "not_judged": analysis.not_judged},
                   step_buckets=trim.buckets if trim else None, **parts)
    if trim is not None:
        guarded("section.retention", trim.trim_findings, rep["findings"], rows)
    return rep


def _plan(fig, rows: list[StepRow], findings: list[Finding], retention: R.Retention, steps_file: str | None):
    p50 = fig.step_time.p50 if fig.step_time else None
    return R.plan(rows, [f.steps for f in findings], retention, p50, steps_file)


def build(*, backend: str, run: dict[str, Any], env: dict[str, Any], steps: list[StepRecord],
          max_warmup: int = MAX_WARMUP, **parts: Any) -> dict[str, Any]:
    """Analyse boundary records here and assemble their report (tests, offline tools): the same rules as a live
    session's (findings.analyze with the backend's own rules; the run-end rules from `run`'s status)."""
    status = run.get("status")
    mem = parts.get("memory")
    mem = mem.to_json() if isinstance(mem, MemorySection) else mem
    analysis = analyze(steps, max_warmup=max_warmup, rules=backend_rules(backend),
                       expect_steps=run.get("kind") != "trace" and status != "crashed",
                       attribution=(run.get("attribution") or {}).get("mode") != "off",
                       capacity=(mem or {}).get("capacity") or None)
    ended = run_end(status, run.get("stop_reason"), steps, parts.get("memory"))
    return from_analysis(analysis, backend=backend, run=run, env=env, extra_findings=ended, **parts)


def with_trace(report: dict[str, Any], trace: TraceSection | dict[str, Any]) -> dict[str, Any]:
    """A written report re-assembled with a capture's trace analysis (`analyze --report`)."""
    parts = {k: report.get(k) for k in ("profiler", "roofline", "extra", "rules", "processes", "aggregate",
                                      "memory", "step_buckets")}
    return assemble(backend=report["backend"], run=report.get("run", {}), env=report.get("environment", {}),
                    steps=report.get("steps", []), summary=report.get("summary", {}),
                    findings=[Finding.from_json(f) for f in report.get("findings", [])], trace=trace, **parts)


def write(report: dict[str, Any], path: str, html: bool = True) -> str:
    """Atomic write: a reader (or a crash mid-write) never sees half a report. With `html`, the page of the
    report goes beside it (report.html, docs/html.md); a page that cannot be written never fails the run."""
    path = os.path.abspath(path)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".ptxla_perf.", dir=os.path.dirname(path))
    os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes it 0600: readable by teammates and `merge`, as open() would
    with os.fdopen(fd, "w") as f:
        json.dump(report, f, indent=1, default=_json_default)
        f.write("\n")
    os.replace(tmp, path)
    if html:
        write_html(report, path)
    return path


def _umask() -> int:
    """The process's umask, read without changing it where the OS says it (Linux), else set and restored."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_html(report: dict[str, Any], path: str) -> str | None:
    """report.html beside the report at `path`; None (and a one-line note) when it could not be written."""
    try:
        check("html")
        return H.write(report, H.html_path(path))
    except Exception as exc:  # noqa: BLE001 - the JSON report is what counts; the page is a view of it
        FAULTS.record("html", exc)
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
