"""A report's sections as pandas DataFrames, one function per table. They read the report JSON as any version
writes it (keys a version lacks become missing values), so a 0.1.0 report loads as well as today's.

pandas is imported here only, on first use: a clear one-line ImportError when the `notebook` extra is missing."""
from __future__ import annotations

from typing import Any

from ..model import summary_keys as K
from ..model.finding import cost_of

_STEP_SCALARS = ("index", "phase", "steady", "attributed", "wall_time_s", "compiles", "compile_time_s",
                 "cached_compiles", "executions", "early_executions", "host_reads", "device_to_host_time_s",
                 "launch_time_s", "device_wait_s", "device_time_s", "host_cpu_s", "data_wait_s", "flops",
                 "bytes_accessed", "live_arrays", "live_bytes", "samples", "tokens", "own_time_us")
BREAKDOWN = ("data", "host", "launch", "compile", "read_wait", "device", "profiler", "other")


def pandas():
    try:
        import pandas as pd
    except ImportError:
        raise ImportError("ptxla_perf: report tables need pandas: pip install 'ptxla_perf[notebook]'") from None
    return pd


def _ints(frame, *cols):
    """Line numbers and cell counts as integers with missing values (not floats: 15, not 15.0)."""
    for c in cols:
        frame[c] = frame[c].astype("Int64")
    return frame


def _where(loc: dict | None) -> str | None:
    if not isinstance(loc, dict) or not loc.get("file"):
        return None
    return f"{loc['file']}:{loc.get('line')}"


def steps(report: dict[str, Any], cells: dict[str, int] | None = None):
    """One row per iteration (`steps[]`): its figures, the transfers' count and bytes, the ending line."""
    rows = []
    for s in report.get("steps") or []:
        row = {k: s.get(k) for k in _STEP_SCALARS}
        if row["host_reads"] is None:
            row["host_reads"] = (s.get("device_to_host") or {}).get("count")  # before 0.3.0: gross = reads
        for side in ("device_to_host", "host_to_device"):
            d = s.get(side) or (s.get("device_to_host_transfers") if side == "device_to_host" else None) or {}
            row[f"{side}"] = d.get("count")
            row[f"{side}_bytes"] = d.get("bytes")
        row["fallback_ops"] = sum((s.get("fallback_ops") or {}).values())
        site = s.get("site") or {}
        row.update(file=site.get("file"), line=site.get("line"), function=site.get("function"),
                   cell=(cells or {}).get(site.get("file")))
        rows.append(row)
    frame = pandas().DataFrame(rows, columns=[*_STEP_SCALARS, "device_to_host", "device_to_host_bytes",
                                              "host_to_device", "host_to_device_bytes", "fallback_ops", "file",
                                              "line", "function", "cell"])
    return _ints(frame, "line", "cell").set_index("index")


def findings(report: dict[str, Any], cells: dict[str, int] | None = None):
    """One row per finding, worst first as the report lists them: kind, severity, the user's line, message."""
    rows = []
    for f in report.get("findings") or []:
        loc = f.get("location") or {}
        ev = f.get("evidence") or {}
        rows.append({"kind": f.get("kind"), "severity": f.get("severity"), "count": f.get("count"),
                     "per_step": f.get("per_step"), "file": loc.get("file"), "line": loc.get("line"),
                     "function": loc.get("function"), "where": _where(loc), "cell": (cells or {}).get(loc.get("file")),
                     "ms_per_step": cost_of(f).ms_per_step, "ranks": f.get("ranks"),
                     "message": f.get("message"), "evidence": ev})
    return _ints(pandas().DataFrame(rows, columns=["kind", "severity", "count", "per_step", "file", "line",
                                                   "function", "where", "cell", "ms_per_step", "ranks", "message",
                                                   "evidence"]), "line", "cell")


def compiles(report: dict[str, Any], cells: dict[str, int] | None = None):
    """One row per iteration that compiled: how many, how long, and what attribution saw of the first compile
    (its cause and the user's line; the step's ending line when it ran without attribution)."""
    rows = []
    for s in report.get("steps") or []:
        if not s.get("compiles"):
            continue
        events = [e for e in s.get("events") or [] if e.get("kind") in ("compile", "dynamo_compile")]
        first = events[0] if events else {}
        loc = first.get("location") or s.get("site") or {}
        detail = first.get("detail") or {}
        rows.append({"step": s.get("index"), "phase": s.get("phase"), "compiles": s.get("compiles"),
                     "compile_time_s": s.get("compile_time_s"), "cause": detail.get("cause"),
                     "differences": detail.get("differences"), "file": loc.get("file"), "line": loc.get("line"),
                     "where": _where(loc), "cell": (cells or {}).get(loc.get("file")),
                     "graph_hashes": s.get("graph_hashes") or []})
    return _ints(pandas().DataFrame(rows, columns=["step", "phase", "compiles", "compile_time_s", "cause",
                                                   "differences", "file", "line", "where", "cell", "graph_hashes"]),
                 "line", "cell")


def time_breakdown(report: dict[str, Any]):
    """Where each iteration's time went: seconds per component (docs/report.md), one row per iteration (missing
    values where the report has no breakdown for it), with the wall time and whether it is steady."""
    rows = []
    for s in report.get("steps") or []:
        split = s.get(K.STEP_BREAKDOWN) or {}
        rows.append({"step": s.get("index"), "phase": s.get("phase"), "steady": s.get(K.STEP_STEADY),
                     "wall_time_s": s.get("wall_time_s"), **{c: split.get(c) for c in BREAKDOWN}})
    return pandas().DataFrame(rows, columns=["step", "phase", "steady", "wall_time_s", *BREAKDOWN]).set_index("step")


def memory(report: dict[str, Any]):
    """One row per step graph of the memory section: its argument, output, aliased, temporary and peak bytes."""
    sec = report.get("memory") or {}
    cols = ["id", "peak_bytes", "argument_bytes", "output_bytes", "alias_bytes", "temp_bytes",
            "generated_code_bytes", "source", "largest_buffer"]
    rows = []
    for g in sec.get("graphs") or []:
        big = (g.get("largest_buffers") or [{}])[0]
        rows.append({**{c: g.get(c) for c in cols[:-1]},
                     "largest_buffer": f"{big.get('shape')} {big.get('kind')}" if big else None})
    return pandas().DataFrame(rows, columns=cols)


_RANK_COLS = ("rank", "host", "pid", "status", "steps", "warmup_steps", "compiles", "compile_time_s",
              "recompiles_after_warmup", "device_to_host_per_step")


def ranks(report: dict[str, Any]):
    """One row per process: a merged report's `processes`; a single process's report is one row of its own."""
    procs = report.get("processes")
    if not procs:
        run, env, s = report.get("run") or {}, report.get("environment") or {}, report.get("summary") or {}
        procs = [{"rank": run.get("rank", env.get("process_index", 0)), "host": env.get("hostname"),
                  "pid": run.get("pid"), "status": run.get("status"),
                  **{k: s.get(k) for k in _RANK_COLS[4:]}, "step_time_s": s.get(K.STEP_TIME)}]
    rows = []
    for p in procs:
        st = p.get("step_time_s") or {}
        rows.append({**{k: p.get(k) for k in _RANK_COLS}, "step_time_p50_s": st.get("p50"),
                     "step_time_p90_s": st.get("p90")})
    return pandas().DataFrame(rows, columns=[*_RANK_COLS, "step_time_p50_s", "step_time_p90_s"]).set_index("rank")
