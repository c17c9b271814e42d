"""`Report`: one report JSON as a notebook reads it - a typed summary, the sections as DataFrames (built on first
use), the same page as report.html inline -, `load(path_or_url)` that makes one, and `compare(r1, r2, ...)` that
puts loaded runs side by side (compare.py)."""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from .._meta import SCHEMA_ID
from ..model import summary_keys as K
from .. import diff as D
from . import inline, tables
from .compare import Comparison
from .. import html
from ..report.render import summary_lines
from ..report import assemble as report_mod


class ReportLoadError(ValueError):
    """A path or URL that does not hold a ptxla_perf report: one line saying which and why."""


@dataclass(frozen=True)
class Summary:
    """The headline figures of `summary` (docs/report.md), typed; `raw` is the whole summary dict. Figures a
    report's version did not write are None."""
    steps: int
    warmup_steps: int | None
    steady_steps: int | None
    wall_time_s: float | None
    step_time_p50_s: float | None
    step_time_p90_s: float | None
    step_time_mean_s: float | None
    compiles: int | None
    compile_time_s: float | None
    recompiles_after_warmup: int | None
    executions_per_step: float | None
    device_to_host_per_step: float | None
    host_to_device_per_step: float | None
    fallback_ops: dict[str, int]
    samples_per_s: float | None
    tokens_per_s: float | None
    mfu: float | None
    peak_bytes: int | None
    findings_by_severity: dict[str, int]
    raw: dict[str, Any] = field(repr=False)

    @classmethod
    def of(cls, s: dict[str, Any]) -> "Summary":
        st = s.get(K.STEP_TIME) or {}
        tp = s.get(K.THROUGHPUT) or {}
        return cls(steps=int(s.get(K.STEPS) or 0), warmup_steps=s.get(K.WARMUP_STEPS),
                   steady_steps=s.get(K.STEADY_STEPS), wall_time_s=s.get(K.WALL_TIME), step_time_p50_s=st.get("p50"),
                   step_time_p90_s=st.get("p90"), step_time_mean_s=st.get("mean"), compiles=s.get(K.COMPILES),
                   compile_time_s=s.get(K.COMPILE_TIME), recompiles_after_warmup=s.get(K.RECOMPILES),
                   executions_per_step=s.get(K.EXECUTIONS_PER_STEP), device_to_host_per_step=s.get(K.D2H_PER_STEP),
                   host_to_device_per_step=s.get(K.H2D_PER_STEP), fallback_ops=dict(s.get(K.FALLBACK_OPS) or {}),
                   samples_per_s=tp.get("samples_per_s"), tokens_per_s=tp.get("tokens_per_s"), mfu=s.get(K.MFU),
                   peak_bytes=s.get(K.PEAK_BYTES), findings_by_severity=dict(s.get(K.FINDINGS_BY_SEVERITY) or {}),
                   raw=dict(s))


class Report:
    """A report (the dict of docs/report.md) with views for a notebook. The DataFrame properties are built on
    first use and kept; `data` is the report itself."""

    def __init__(self, data: dict[str, Any], source: str | None = None):
        if not isinstance(data, dict) or data.get("schema") != SCHEMA_ID:
            raise ReportLoadError(f"{source or 'the data'} is not a ptxla_perf report (schema {SCHEMA_ID})")
        self.data = data
        self.source = source  # where it was read from or written to; None for a report kept in memory only
        self.summary = Summary.of(data.get("summary") or {})

    # --- facts -------------------------------------------------------------------------------------------
    @property
    def status(self) -> str | None:
        return (self.data.get("run") or {}).get("status")

    @property
    def backend(self) -> str | None:
        return self.data.get("backend")

    @property
    def tool_version(self) -> str | None:
        return self.data.get("tool_version")

    @property
    def label(self) -> str:
        """A short name for tables that put runs side by side: the file's name, else what ran."""
        if self.source:
            return os.path.basename(self.source.rstrip("/"))
        run = self.data.get("run") or {}
        what = run.get("recipe") or run.get("script") or run.get("kind") or "run"
        return os.path.basename(str(what))

    # --- tables ------------------------------------------------------------------------------------------
    @cached_property
    def steps(self):
        return tables.steps(self.data, _cells())

    @cached_property
    def findings(self):
        return tables.findings(self.data, _cells())

    @cached_property
    def compiles(self):
        return tables.compiles(self.data, _cells())

    @cached_property
    def time_breakdown(self):
        return tables.time_breakdown(self.data)

    @cached_property
    def memory(self):
        return tables.memory(self.data)

    @cached_property
    def ranks(self):
        return tables.ranks(self.data)

    # --- views -------------------------------------------------------------------------------------------
    def html(self) -> str:
        """The page report.html holds (docs/html.md): self-contained, no network."""
        return html.render(self.data)

    def _repr_html_(self) -> str:
        return inline.iframe(self.html())

    def summary_text(self) -> str:
        """The summary the console prints at the end of a run."""
        return "\n".join(summary_lines(self.data, self.source))

    def __repr__(self) -> str:
        s = self.summary
        return (f"<ptxla_perf Report {self.label}: {self.backend}, {s.steps} steps, status {self.status}, "
                f"{len(self.data.get('findings') or [])} findings>")

    def diff(self, other: "Report | dict | str", **kwargs: Any) -> Comparison:
        """This run (A, the baseline) against `other` (B): `compare(self, other, **kwargs)`."""
        return compare(self, other, **kwargs)

    def save(self, path: str, html: bool = True) -> str:
        """Write the report (and report.html beside it) as the CLI does; returns the absolute path."""
        self.source = report_mod.write(self.data, path, html=html)
        return self.source


def _cells() -> dict[str, int]:
    """Cell file name -> its execution count (`In[N]`), when we run in IPython: a finding's line in a cell."""
    import sys
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    return dict(getattr(getattr(shell, "compile", None), "_filename_map", None) or {})


def load(source: "str | os.PathLike | dict | Report") -> Report:
    """A report from a local path, a `file://` or `http(s)://` URL (fsspec's other protocols too when it is
    installed), a report dict, or a `Report` (returned as is). Raises ReportLoadError with one line."""
    if isinstance(source, Report):
        return source
    if isinstance(source, dict):
        return Report(source)
    name = os.fspath(source)
    text = _read(name)
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ReportLoadError(f"{name} is not JSON: {exc}") from None
    return Report(data, name)


def _read(name: str) -> str:
    if "://" not in name:
        try:
            with open(name, encoding="utf-8") as f:
                return f.read()
        except OSError as exc:
            raise ReportLoadError(f"cannot read {name}: {exc.strerror or exc}") from None
    try:
        import fsspec
    except ImportError:
        fsspec = None
    try:
        if fsspec is not None:
            with fsspec.open(name, "rt", encoding="utf-8") as f:
                return f.read()
        scheme = name.split("://", 1)[0].lower()
        if scheme not in ("http", "https", "file"):
            raise ReportLoadError(f"cannot read {name}: {scheme}:// needs fsspec (pip install fsspec)")
        import urllib.request
        with urllib.request.urlopen(name, timeout=60) as r:
            return r.read().decode("utf-8")
    except ReportLoadError:
        raise
    except Exception as exc:  # noqa: BLE001 - any transport's failure is one line for the user
        raise ReportLoadError(f"cannot read {name}: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
                              ) from None


def compare(*runs: "Report | dict | str", labels: list[str] | None = None, per_step: bool = False,
            fail_on: str | list[str] | None = None, strict: bool = False) -> Comparison:
    """Compare runs (Reports, report dicts, paths or URLs) with the first: the `diff` command's rows for each
    pair. `fail_on` takes the diff command's `--fail-on` rules (e.g. "warnings:device_to_host_sync>0"):
    `Comparison.passed` and `.violations` say what broke - also that a run measured nothing (no steady step, a
    `no_steps` finding), which never passes; `strict` as `--strict`. Raises ValueError (a bad rule:
    `diff.RuleError`) with one line."""
    if len(runs) < 2:
        raise ValueError("compare needs at least two runs (the first is the baseline)")
    reports = [load(r) for r in runs]
    names = list(labels) if labels is not None else [r.label for r in reports]
    if len(names) != len(reports):
        raise ValueError(f"{len(names)} labels for {len(reports)} runs")
    seen: dict[str, int] = {}
    unique = []
    for name in names:  # two runs of the same name still get a column each
        seen[name] = seen.get(name, 0) + 1
        unique.append(name if seen[name] == 1 else f"{name} ({seen[name]})")
    rules = D.parse_rules(fail_on) if fail_on is not None else None
    return Comparison([r.data for r in reports], unique, per_step, rules, strict)
