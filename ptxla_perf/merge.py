"""Per-process reports of one run -> one report: a `processes` section (one row per rank), run-level aggregate
throughput, findings merged per line with the ranks they occur on, and the cross-rank findings no single
process can see: `straggler` (one rank consistently slower) and `rank_divergence` (one rank compiles or syncs
where the others do not). docs/multiprocess.md, docs/report.md.

The merged report keeps schema v1: `steps` and `summary` are rank 0's (so `diff` and the sweep table read it as
before); `processes`, `aggregate` and `finding.ranks` are added.
"""
from __future__ import annotations

import os
import re
from dataclasses import replace
from typing import Any

from . import SCHEMA_ID
from . import summary_keys as K
from .figures import median, stats
from .fmt import ms
from .memory import MemorySection
from .report import assemble
from .thresholds import value as threshold
from .values import Stats, Summary, row_series, rows_from_json

_DIVERGENT_KINDS = ("device_to_host_sync", "recompilation", "graph_break", "op_fallback", "eager_compile",
                    "host_to_device_transfer")
_SEV_ORDER = {"info": 0, "warning": 1, "error": 2}
_STATUS_ORDER = ["completed", "running", "stopped", "interrupted", "crashed"]


class MergeError(ValueError):
    """Reports that cannot be merged (another schema, another run, the same rank twice): one line for the user."""


def rank_of(report: dict[str, Any]) -> int:
    env = report.get("environment") or {}
    run = report.get("run") or {}
    for v in (run.get("rank"), env.get("process_index")):
        if isinstance(v, int):
            return v
    return 0


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
    base = reports[0]
    procs = [_process_row(r, p) for r, p in zip(reports, paths)]
    findings = merge_findings(reports)
    if len(reports) > 1:
        findings = straggler(reports, procs) + rank_divergence(reports) + findings
    run = dict(base.get("run", {}), status=_worst_status(reports),
               exit_code=next((r["run"].get("exit_code") for r in reports if r["run"].get("exit_code")),
                              base.get("run", {}).get("exit_code")),
               merged_from=[os.path.abspath(p) for p in paths])
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
        trace = dict(trace, findings=[f for f in findings if (f.get("evidence") or {}).get("source") == "trace"])
    return assemble(backend=base["backend"], run=run, env=env, steps=base.get("steps", []),
                    summary=base.get("summary", {}), findings=findings, profiler=base.get("profiler"),
                    roofline=base.get("roofline"), trace=trace, extra=base.get("extra"), rules=base.get("rules"),
                    processes=procs, aggregate=dict(aggregate(procs), **({"notes": notes} if notes else {})),
                    memory=_memory(base, reports))


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


def _steady_times(report: dict[str, Any], key: str = "step") -> list[float]:
    """A per-step figure (values.row_series: "step" time net of compile, "host" time outside device reads, "data"
    wait) over the rank's steady training iterations, in order, as its report's rows say (values.StepRow; reports
    written before `steps[].steady` get the process's own rule)."""
    warm = Summary.from_json(report.get("summary")).warmup_steps
    rows = rows_from_json(report.get("steps", []), warm)
    return row_series([r for r in rows if r.steady], key)


def _process_row(report: dict[str, Any], path: str) -> dict[str, Any]:
    s = Summary.from_json(report.get("summary"))
    run = report.get("run") or {}
    env = report.get("environment") or {}
    return {
        "rank": rank_of(report),
        "host": env.get("hostname"),
        "pid": run.get("pid"),
        "local_rank": run.get("local_rank"),
        "report": os.path.abspath(path) if not path.startswith("report ") else None,
        "status": run.get("status"),
        "steps": s.steps,
        "warmup_steps": s.warmup_steps,
        "step_time_s": _stats(s.step_time_s),
        # the process's own figures (figures.py); derived here the same way for reports written before them
        "host_time_s": _stats(s.host_time_s) or stats(_steady_times(report, "host")),
        "data_wait_s": _stats(s.data_wait_s) or stats(_steady_times(report, "data")),
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


def aggregate(procs: list[dict[str, Any]]) -> dict[str, Any]:
    """What a pod user quotes: samples/s and tokens/s of the whole job - the ranks' work per step summed, over
    the slowest rank's mean step time (a synchronous job moves at its slowest rank's pace; with balanced ranks
    this is the sum of their rates, kept as `*_sum`). Also the spread of the ranks' typical step times."""
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
        out["slowest_rank"] = max(timed, key=lambda p: p["step_time_s"]["p50"])["rank"]
    return out


def merge_findings(reports: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One finding per (kind, line) across ranks, with the ranks it occurs on; counts summed, worst severity."""
    merged: dict[tuple, dict[str, Any]] = {}
    for r in reports:
        rank = rank_of(r)
        for f in r.get("findings", []):
            loc = f.get("location") or {}
            key = (f["kind"], loc.get("file"), loc.get("line"), (f.get("evidence") or {}).get("source"))
            m = merged.get(key)
            if m is None:
                m = merged[key] = dict(f, ranks=[], evidence=dict(f.get("evidence") or {}, per_rank={}))
                m["count"] = 0
            m["ranks"].append(rank)
            m["count"] += int(f.get("count") or 0)
            m["evidence"]["per_rank"][str(rank)] = {"count": f.get("count"), "per_step": f.get("per_step"),
                                                    "severity": f["severity"]}
            if _SEV_ORDER[f["severity"]] > _SEV_ORDER[m["severity"]]:
                m["severity"], m["message"] = f["severity"], f["message"]
    out = list(merged.values())
    for m in out:
        m["ranks"] = sorted(set(m["ranks"]))
    out.sort(key=lambda m: -_SEV_ORDER[m["severity"]])
    return out


def straggler(reports: list[dict[str, Any]], procs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One rank consistently slower than the others. Phase "step": its iterations take longer (the others do not
    wait for it, e.g. no collective in the step). When a collective makes every rank's iteration as long, the
    rank the others wait for shows in what it does instead of waiting: phase "data", it waits longer for its
    input (session.data_wait()); phase "host", it keeps the host busy while the others wait in device reads."""
    for phase in ("step", "data", "host"):
        times = {rank_of(r): _steady_times(r, phase) for r in reports}
        times = {k: v for k, v in times.items() if len(v) >= threshold("straggler_min_steps")}
        if len(times) < 2:
            continue
        typical = {k: median(v) for k, v in times.items()}
        slow = max(typical, key=typical.get)
        others = [typical[k] for k in typical if k != slow]
        ref = median(others)
        gap = typical[slow] - ref
        if gap < max(threshold("straggler_share") * ref, threshold("straggler_min_s")):
            continue
        n = min(len(v) for v in times.values())
        above = sum(1 for i in range(n)
                    if times[slow][i] > max(times[k][i] for k in times if k != slow))
        share = above / n if n else 0.0
        if share < threshold("straggler_consistency"):
            continue
        what = {"step": "step time", "data": "wait for input data per step",
                "host": "host time per step (outside device waits)"}[phase]
        slow_part = _slowest_component(reports, slow)
        msg = (f"Rank {slow} is a straggler: its {what} is {ms(gap)} above the other ranks' "
               f"(p50 {ms(typical[slow])} vs {ms(ref)}) in {share:.0%} of {n} steady steps"
               + (f"; the part that differs most is its {slow_part[0].replace('_', ' ')} time "
                  f"({ms(slow_part[1])} more per step)" if slow_part else "") + ". In a "
               "synchronous job every rank waits for the slowest at each collective. Look at what is different on "
               f"rank {slow}: its input pipeline, its share of the data, its host (load, other processes).")
        return [{"kind": "straggler", "severity": "warning", "message": msg, "count": above,
                 "per_step": gap, "location": None, "steps": [], "ranks": [slow],
                 "evidence": {"rank": slow, "phase": phase, "gap_s": gap, "gap_share": gap / ref if ref else None,
                              "component": slow_part[0] if slow_part else None,
                              "p50_s": {str(k): v for k, v in sorted(typical.items())},
                              "steps_compared": n, "steps_above_all_others": above}}]
    return []


def _slowest_component(reports: list[dict[str, Any]], slow: int) -> tuple[str, float] | None:
    """The breakdown component (summary.time_breakdown) by which the slow rank's steady step exceeds the other
    ranks' typical one the most: its slow phase, named."""
    split = {rank_of(r): ((r.get("summary") or {}).get(K.TIME_BREAKDOWN) or {}).get("components_s")
             for r in reports}
    if not split.get(slow) or not all(split.values()):
        return None
    gaps = {c: v - median(split[k][c] for k in split if k != slow) for c, v in split[slow].items()}
    c = max(gaps, key=gaps.get)
    return (c, gaps[c]) if gaps[c] > 0 else None


def rank_divergence(reports: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A line that compiles or syncs on some ranks and not the others (e.g. a rank-0-only logging read): every
    other rank waits for it at the next collective. Also: ranks that compiled different numbers of graphs."""
    ranks = sorted(rank_of(r) for r in reports)
    out = []
    by_line: dict[tuple, dict[int, dict]] = {}
    for r in reports:
        for f in r.get("findings", []):
            loc = f.get("location")
            if loc and f["kind"] in _DIVERGENT_KINDS:
                by_line.setdefault((f["kind"], loc["file"], loc["line"]), {})[rank_of(r)] = f
    for (kind, file, line), hits in sorted(by_line.items(), key=lambda kv: (kv[0][1], kv[0][2])):
        if len(hits) == len(ranks):
            continue
        on = sorted(hits)
        off = [k for k in ranks if k not in hits]
        f = hits[on[0]]
        what = "syncs the host" if kind == "device_to_host_sync" else (
            "recompiles" if kind == "recompilation" else f"has a {kind}")
        msg = (f"Only rank{'s' if len(on) > 1 else ''} {_ranks(on)} {what} at {os.path.basename(file)}:{line} "
               f"(rank{'s' if len(off) > 1 else ''} {_ranks(off)} do{'es' if len(off) == 1 else ''} not): the "
               "other ranks wait for it at the next collective. Do the same work on every rank, or move it out "
               "of the step (e.g. a rank-0-only log read every N steps after the step's sync).")
        out.append({"kind": "rank_divergence", "severity": "warning" if f["severity"] != "info" else "info",
                    "message": msg, "count": sum(int(h.get("count") or 0) for h in hits.values()),
                    "per_step": f.get("per_step"), "location": f.get("location"), "steps": [], "ranks": on,
                    "evidence": {"finding": kind, "on_ranks": on, "not_on_ranks": off}})
    compiles = {rank_of(r): int((r.get("summary") or {}).get("compiles") or 0) for r in reports}
    if len(set(compiles.values())) > 1 and not any(o["evidence"]["finding"] == "recompilation" for o in out):
        typical = median(compiles.values())
        odd = sorted(k for k, v in compiles.items() if v != typical)
        if odd and len(odd) < len(ranks):
            out.append({"kind": "rank_divergence", "severity": "info",
                        "message": (f"Rank{'s' if len(odd) > 1 else ''} {_ranks(odd)} compiled "
                                    f"{', '.join(str(compiles[k]) for k in odd)} graph(s) where the other ranks "
                                    f"compiled {typical:g}: a rank that compiles while the others wait holds them "
                                    "at the next collective."),
                        "count": sum(abs(compiles[k] - typical) for k in odd), "per_step": None, "location": None,
                        "steps": [], "ranks": odd,
                        "evidence": {"finding": "compiles", "compiles": {str(k): v for k, v in compiles.items()}}})
    return out


def _ranks(ranks: list[int]) -> str:
    return ", ".join(str(r) for r in ranks)


def _worst_status(reports: list[dict[str, Any]]) -> str:
    statuses = [r.get("run", {}).get("status", "completed") for r in reports]
    return max(statuses, key=lambda s: _STATUS_ORDER.index(s) if s in _STATUS_ORDER else 0)
