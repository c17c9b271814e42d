"""Per-process reports of one run -> one report: a `processes` section (one row per rank), run-level aggregate
throughput, findings merged per line with the ranks they occur on, and the cross-rank findings no single
process can see (rules/ranks.py: `straggler`, `rank_divergence`). docs/multiprocess.md, docs/report.md.

The merged report keeps schema v1: `steps` and `summary` are rank 0's (so `diff` and the sweep table read it as
before); `processes`, `aggregate` and `finding.ranks` are added.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, replace
from typing import Any

from .._meta import SCHEMA_ID
from . import heatmap as rank_heatmap
from ..rules import ranks as rank_rules
from ..analysis import rank_wait
from ..model.faults import FAULTS, errors_json, guarded
from ..analysis.figures import stats
from ..analysis.memory import MemorySection
from ..report.assemble import assemble
from ..rules.ranks import rank_of, steady_times
from ..report.outputs import profiler_error
from ..model import summary_keys as K
from ..model.finding import TRACE, Evidence, Finding, severity_counts, severity_rank, worst_first
from ..model.summary import Stats, Summary

_STATUS_ORDER = ["completed", "running", "stopped", "interrupted", "crashed"]


class MergeError(ValueError):
    """Reports that cannot be merged (another schema, another run, the same rank twice): one line for the user."""


# a flag whose value is the process's rank (--rank=1, --process_id 1, --local-rank 0, --task_index=3)
_RANK_FLAG = re.compile(r"^--?(local|global|node|machine)?[_-]?(rank|process[_-]?(id|index|idx)|proc[_-]?id|"
                        r"task[_-]?(id|index)|worker[_-]?(id|index)|host[_-]?(id|index))$", re.I)


def _rank_values(report: dict[str, Any]) -> set[str]:
    """The small integers a process's own command line may carry as its rank."""
    run, env = report.get("run") or {}, report.get("environment") or {}
    return {str(v) for v in (rank_of(report), run.get("local_rank"), env.get("process_index")) if isinstance(v, int)}


def argv_differences(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """How two processes' command lines differ beyond their rank arguments (`train.py 0 2` vs `train.py 1 2`,
    `--rank=0` vs `--rank=1`, `--process_id 0` vs `--process_id 1`); [] when they are the same program."""
    ra, rb = a.get("run") or {}, b.get("run") or {}
    what_a, what_b = ra.get("recipe") or ra.get("script"), rb.get("recipe") or rb.get("script")
    if what_a != what_b:
        return [f"{what_a} vs {what_b}"]
    xa, xb = list(ra.get("argv") or [None])[1:], list(rb.get("argv") or [None])[1:]
    if len(xa) != len(xb):
        return [f"arguments {' '.join(map(str, xa))!r} vs {' '.join(map(str, xb))!r}"]
    ranks_a, ranks_b = _rank_values(a), _rank_values(b)
    out = []
    for i, (x, y) in enumerate(zip(xa, xb), 1):
        if x == y:
            continue
        flag_x, eq, _ = str(x).partition("=")
        if eq and flag_x == str(y).partition("=")[0] and _RANK_FLAG.match(flag_x):
            continue
        if i > 1 and xa[i - 2] == xb[i - 2] and _RANK_FLAG.match(str(xa[i - 2])):
            continue
        if x in ranks_a and y in ranks_b:
            continue
        out.append(f"argument {i}: {x!r} vs {y!r}")
    return out


def check(reports: list[dict[str, Any]], paths: list[str], force: bool = False) -> list[str]:
    """One run, one schema, one report per rank - else a MergeError naming the two files that disagree and how.
    With `force`, reports that look like different runs are merged all the same: the returned notes say how they
    differ."""
    notes: list[str] = []
    names = [os.path.basename(p) for p in paths]
    for r, name in zip(reports, names):
        if not isinstance(r, dict) or r.get("schema") != SCHEMA_ID:
            got = r.get("schema") if isinstance(r, dict) else type(r).__name__
            raise MergeError(f"{name} has schema {got!r}, not {SCHEMA_ID!r}")
    first, name0 = reports[0], names[0]
    for r, name in zip(reports[1:], names[1:]):
        if r.get("backend") != first.get("backend"):
            raise MergeError(f"{name0} and {name} come from different backends ({first.get('backend')} vs "
                             f"{r.get('backend')})")
        a, b = first.get("run", {}), r.get("run", {})
        ida, idb = a.get("run_id"), b.get("run_id")
        shared = "local" not in (a.get("run_id_source"), b.get("run_id_source"))
        why = None
        if ida and idb and shared and ida != idb:
            why = f"run id {ida} vs {idb}"
        elif not (ida and idb and ida == idb):  # ids made locally (per host): the same program, at the same time
            diffs = argv_differences(first, r)
            if diffs:
                why = "; ".join(diffs)
            elif not _overlap(a, b):
                why = "they did not run at the same time"
        if why and not force:
            raise MergeError(f"{name0} and {name} come from different runs ({why}); --force merges them anyway")
        if why:
            notes.append(f"merged with --force: {name0} and {name} look like different runs ({why})")
    seen: dict[int, str] = {}
    for r, name in zip(reports, names):
        rank = rank_of(r)
        if rank in seen:
            raise MergeError(f"{seen[rank]} and {name} are both rank {rank}")
        seen[rank] = name
    return notes


def _overlap(a: dict, b: dict) -> bool:
    try:
        return (a.get("started_at") or "") <= (b.get("ended_at") or "~") and \
            (b.get("started_at") or "") <= (a.get("ended_at") or "~")
    except TypeError:
        return True


def merge(reports: list[dict[str, Any]], paths: list[str] | None = None,
          outcome_of: dict[str, Any] | None = None, force: bool = False) -> dict[str, Any]:
    """Merge per-process reports (any order) into one report (_merge); each report's steps are read once."""
    with rank_wait.rows_memo():
        return _merge(reports, paths, outcome_of, force)


def _merge(reports: list[dict[str, Any]], paths: list[str] | None,
           outcome_of: dict[str, Any] | None, force: bool) -> dict[str, Any]:
    """Merge per-process reports (any order) into one report, assembled like every report (report.assemble);
    raises MergeError. `outcome_of`: the run facts of a parent that spawned these processes (its status, exit
    code, argv) in place of the worst of the ranks'. `force`: merge reports `check` would refuse (noted)."""
    if not reports:
        raise MergeError("no reports to merge")
    paths = paths or [f"report {i}" for i in range(len(reports))]
    notes = check(reports, paths, force)
    order = sorted(range(len(reports)), key=lambda i: rank_of(reports[i]))
    reports = [reports[i] for i in order]
    paths = [paths[i] for i in order]
    if hasattr(reports[0], "full_report"):  # read up to its digest (pods/inputs.py): rank 0's steps are kept
        reports[0] = reports[0].full_report()
    base = reports[0]
    mark = FAULTS.seen()  # the merge's own failures: each section on its own (faults.py), listed with rank 0's
    procs = [_process_row(r, p) for r, p in zip(reports, paths)]
    waits = guarded("merge.rank_wait", _collective_waits, reports, default={})
    for row in procs:  # what each rank waited for the others per steady step (rank_wait.py says how it is told)
        if row["rank"] in waits:
            row["collective_wait_s"], row["collective_wait_basis"] = round(waits[row["rank"]][0], 7), \
                waits[row["rank"]][1]
    # the cross-rank rules (rules/ranks.py) first
    findings = guarded("merge.rank_rules", rank_rules.judge, reports, default=[]) + merge_findings(reports)
    run = dict(base.get("run", {}), status=_worst_status(reports),
               exit_code=next((r["run"].get("exit_code") for r in reports if r["run"].get("exit_code")),
                              base.get("run", {}).get("exit_code")),
               merged_from=[_where(p) for p in paths])
    run.pop("rank", None)
    for key in ("status", "exit_code", "stop_reason", "started_at", "ended_at", "argv", "kind", "pid"):
        if outcome_of and key in outcome_of:
            run[key] = outcome_of[key]
    env = dict(base.get("environment", {}))
    env["process_count"] = max(len(reports), max(int((r.get("environment") or {}).get("process_count") or 1)
                                                 for r in reports))
    env["process_index"] = 0
    env["hosts"] = sorted({p["host"] for p in procs if p.get("host")})
    # steps and summary are rank 0's (diff and the sweep table read them as before); the trace stays rank 0's
    trace = base.get("trace")
    if trace is not None:  # its findings as merged across ranks (with the ranks they occur on)
        trace = dict(trace, findings=[f.to_json() for f in findings if f.origin == TRACE])
    straggler = next((f.to_json() for f in findings if f.kind == "straggler"), None)
    heat = guarded("merge.heatmap", rank_heatmap.heatmap, reports, [p["rank"] for p in procs],
                   [p.get("host") for p in procs], straggler)
    agg = dict(aggregate(procs, straggler), **({"notes": notes} if notes else {}),
               **({"heatmap": heat} if heat else {}))
    out = assemble(backend=base["backend"], run=run, env=env, steps=base.get("steps", []),
                   summary=base.get("summary", {}), findings=findings, profiler=base.get("profiler"),
                   roofline=base.get("roofline"), trace=trace, extra=base.get("extra"), rules=base.get("rules"),
                   processes=procs, aggregate=agg,
                   memory=guarded("merge.memory", _memory, base, reports), step_buckets=base.get("step_buckets"))
    own = FAULTS.since(mark)
    if own and not any(f.get("kind") == "profiler_error" for f in out["findings"]):
        out["findings"].append(profiler_error(own).to_json())
        out["summary"][K.FINDINGS_BY_SEVERITY] = severity_counts(Finding.from_json(f) for f in out["findings"])
    errors = list(base.get("profiler_errors") or []) + errors_json(own)
    if errors:  # rank 0's own (the other ranks' are named by their merged profiler_error finding) and the merge's
        out["profiler_errors"] = errors
    return out


def _collective_waits(reports: list[dict[str, Any]]) -> dict[int, tuple]:
    """What each rank waited for the others per steady step (rank_wait.py)."""
    splits = {rank_of(r): rank_wait.split_of(r, rank_of(r)) for r in reports}
    return rank_wait.collective_waits({k: v for k, v in splits.items() if v is not None})


def _memory(base: dict[str, Any], reports: list[dict[str, Any]]) -> MemorySection | None:
    """Rank 0's memory section with every rank's peak, headroom and live growth beside it (`per_rank`)."""
    sec = MemorySection.from_json(base.get("memory"))
    if sec is None:
        return None
    rows = []
    for r in sorted(reports, key=rank_of):
        m = MemorySection.from_json(r.get("memory")) or MemorySection("unavailable", None, None, [])
        rows.append({"rank": rank_of(r), "peak_bytes": m.peak_bytes, "headroom_bytes": m.headroom_bytes,
                     "bytes_per_step": (m.live or {}).get("bytes_per_step")})
    return replace(sec, per_rank=rows)


def _where(path: str) -> str:
    """A report's place as the merged report keeps it: a local path made absolute, a URL as given."""
    return path if "://" in path else os.path.abspath(path)


def _process_row(report: dict[str, Any], path: str) -> dict[str, Any]:
    s = Summary.from_json(report.get("summary"))
    run = report.get("run") or {}
    env = report.get("environment") or {}
    return {
        "rank": rank_of(report),
        "host": env.get("hostname"),
        "pid": run.get("pid"),
        "local_rank": run.get("local_rank"),
        "report": _where(path) if not path.startswith("report ") else None,
        "status": run.get("status"),
        "steps": s.steps,
        "warmup_steps": s.warmup_steps,
        "step_time_s": _stats(s.step_time_s),
        # the process's own figures (figures.py); derived here the same way for reports written before them
        "host_time_s": _stats(s.host_time_s) or stats(steady_times(report, "host")),
        "data_wait_s": _stats(s.data_wait_s) or stats(steady_times(report, "data")),
        "time_breakdown": s.time_breakdown,  # where the rank's steady step goes (figures.py)
        "compiles": s.compiles,
        "compile_time_s": s.compile_time_s,
        "recompiles_after_warmup": s.recompiles_after_warmup,
        "device_to_host_per_step": s.device_to_host_per_step,
        "throughput": dict(s.throughput),
        "findings_by_severity": s.findings_by_severity,
        "peak_bytes": s.peak_bytes,  # memory (memory.py): the largest graph's peak, live growth per step
        "live_bytes_per_step": s.live_bytes_per_step,
    }


def _stats(v: Stats | None) -> dict[str, float] | None:
    return v.to_json() if v is not None else None


def aggregate(procs: list[dict[str, Any]], straggler: dict[str, Any] | None = None) -> dict[str, Any]:
    """What a pod user quotes: samples/s and tokens/s of the whole job - the ranks' work per step summed, over
    the slowest rank's mean step time (a synchronous job moves at its slowest rank's pace; with balanced ranks
    this is the sum of their rates, kept as `*_sum`). Also the spread of the ranks' typical step times, and the
    slowest rank: the straggler the cross-rank rule named (`straggler`, the merged finding: in a synchronous job
    every rank's step is as long, and the largest p50 may be any rank's), else the rank with the largest p50."""
    tp: dict[str, float] = {}
    timed = [p for p in procs if p.get("step_time_s")]
    for key in ("samples_per_s", "tokens_per_s"):
        vals = [p["throughput"].get(key) for p in procs]
        if not vals or not all(isinstance(v, (int, float)) for v in vals):
            continue
        tp[f"{key}_sum"] = sum(vals)
        if len(timed) == len(procs):
            per_step = sum(p["throughput"][key] * p["step_time_s"]["mean"] for p in procs)
            slowest = max(p["step_time_s"]["mean"] for p in procs)
            if slowest > 0:
                tp[key] = per_step / slowest
    p50s = [p["step_time_s"]["p50"] for p in timed]
    out: dict[str, Any] = {"processes": len(procs), "hosts": len({p.get("host") for p in procs}),
                           "steps": sum(p["steps"] for p in procs), "throughput": tp,
                           "step_time_p50_s": stats(p50s)}
    if len(p50s) > 1:
        out["step_time_spread_s"] = max(p50s) - min(p50s)
        named = ((straggler or {}).get("evidence") or {}).get("rank")
        if isinstance(named, int) and any(p["rank"] == named for p in procs):
            out["slowest_rank"], out["slowest_rank_basis"] = named, "straggler"
        else:
            out["slowest_rank"] = max(timed, key=lambda p: p["step_time_s"]["p50"])["rank"]
            out["slowest_rank_basis"] = "step_time_p50"
    return out


@dataclass
class PerRankEvidence(Evidence):
    """A merged finding's evidence: the first rank's evidence as it wrote it, then `per_rank` (rank -> its count,
    per_step and severity)."""

    first: Evidence
    per_rank: dict[str, dict[str, Any]]

    def to_json(self) -> dict[str, Any]:
        return {**self.first.to_json(), "per_rank": self.per_rank}


def merge_findings(reports: list[dict[str, Any]]) -> list[Finding]:
    """One finding per (kind, line) across ranks, with the ranks it occurs on; counts summed, worst severity. The
    ranks' written findings become Findings here (the load edge: `Finding.from_json`)."""
    merged: dict[tuple, Finding] = {}
    per_rank: dict[tuple, dict[str, Any]] = {}  # each merged finding's evidence.per_rank
    for r in reports:
        rank = rank_of(r)
        for f in map(Finding.from_json, r.get("findings", [])):
            key = (f.kind, f.location.file if f.location else None, f.location.line if f.location else None,
                   f.origin)
            m = merged.get(key)
            if m is None:
                ev = PerRankEvidence(f.evidence, per_rank.setdefault(key, {}))
                m = merged[key] = replace(f, ranks=[], evidence=ev, count=0)
            m.ranks.append(rank)
            m.count += f.count
            per_rank[key][str(rank)] = {"count": f.count, "per_step": f.per_step, "severity": f.severity}
            if severity_rank(f.severity) < severity_rank(m.severity):
                m.severity, m.message = f.severity, f.message
    out = list(merged.values())
    for m in out:
        m.ranks = sorted(set(m.ranks))
    return worst_first(out)


def _worst_status(reports: list[dict[str, Any]]) -> str:
    statuses = [r.get("run", {}).get("status", "completed") for r in reports]
    return max(statuses, key=lambda s: _STATUS_ORDER.index(s) if s in _STATUS_ORDER else 0)
