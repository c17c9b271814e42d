"""Trace analysis of a profile capture (.xplane.pb): `analyze_trace(path)` -> the report's `trace` section, typed
(trace_section.TraceSection; report.assemble serializes it).

Uses xprof's converters where they compute something meaningful for the device at hand (device planes:
`hlo_stats` for op statistics, `overview_page` for the device duty cycle), and its own reading of the XSpace for
what they don't (CPU captures: no device plane, the XLA CPU executor's op events sit on host threads).
Shape of the result: docs/analyze.md."""
from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

from . import analyses as A
from .events import Capture, load_capture
from ..analysis.figures import stats
from ..model.summary import Stats
from .locate import TraceError, list_runs, locate_xplanes
from .hosts import per_host
from .rules import findings as judge_window
from .section import CollectiveShare, Gaps, StepSummary, TraceSection, TraceSource, TraceWindow

__all__ = ["analyze_trace", "locate_xplanes", "list_runs", "TraceError", "load_capture", "Capture", "TraceSection",
           "summarize_steps"]

SOURCE_HOST = "host executor events"
SOURCE_XPROF = "xprof device tables"


def _xprof_device_tables(files: list[Path]) -> dict:
    """hlo_stats (top ops by self time, with xprof's categories) and overview_page (device duty cycle)."""
    from xprof.convert import raw_to_tool_data

    out: dict = {"tools": []}
    paths = [str(f) for f in files]
    data, _ = raw_to_tool_data.xspace_to_tool_data(paths, "hlo_stats", {})
    out["tools"].append("hlo_stats")
    table = json.loads(data) if data else {}
    cols = [c["id"] for c in table.get("cols", [])]
    rows = []
    for r in table.get("rows", []):
        vals = dict(zip(cols, [c.get("v") if isinstance(c, dict) else c for c in r.get("c", [])]))
        rows.append(vals)
    out["hlo_rows"] = rows
    try:
        data, _ = raw_to_tool_data.xspace_to_tool_data(paths, "overview_page", {})
        ov = json.loads(data)
        props = ov[0].get("p", {}) if isinstance(ov, list) and ov else {}
        out["tools"].append("overview_page")
        duty = props.get("device_duty_cycle_percent")
        out["duty_cycle"] = float(duty.rstrip("%")) / 100 if duty else None
    except Exception:  # noqa: BLE001 - the duty cycle is optional
        out["duty_cycle"] = None
    return out


def _ops_from_xprof(rows: list[dict], limit: int) -> tuple[list[dict], dict, dict]:
    total = sum(float(r.get("total_self_time") or 0) for r in rows) or 1.0
    out, cats = [], {}
    for r in rows:
        name = str(r.get("hlo_op_name") or "?")
        t = float(r.get("total_self_time") or 0)
        cat = A.op_category(name)
        cats[cat] = cats.get(cat, 0.0) + t / total
        out.append({"name": name, "module": r.get("program_id"), "category": cat,
                    "xprof_category": r.get("category"), "occurrences": int(r.get("occurrences") or 0),
                    "devices": None, "self_time_ms_per_device": round(t / 1000.0, 4), "share": round(t / total, 4)})
    out.sort(key=lambda r: -r["share"])
    coll = round(cats.get("collective", 0.0), 4)
    return out[:limit], {k: round(v, 4) for k, v in sorted(cats.items(), key=lambda kv: -kv[1])}, \
        {"mean": coll, "min": coll, "max": coll, "per_device": []}


def summarize_steps(step_rows: list[dict], detection: str) -> StepSummary:
    """The `step_summary` of some trace step rows: steady steps (no compile, and not the first step after one: a
    fresh executable's first run warms up), their time and mean breakdown."""
    steady = [r for k, r in enumerate(step_rows)
              if r["compiles"] == 0 and (k == 0 or step_rows[k - 1]["compiles"] == 0)] \
        or [r for r in step_rows if r["compiles"] == 0] or step_rows
    per_step = {k: round(float(np.mean([r["breakdown_ms"][k] for r in steady])), 4) if steady else 0.0
                for k in A.CATEGORIES}
    tot = sum(per_step.values()) or 1.0
    return StepSummary(len(step_rows), len(steady) if step_rows else 0,
                       Stats.from_json(stats([r["duration_ms"] for r in steady], ndigits=4)), per_step,
                       {k: round(v / tot, 4) for k, v in per_step.items()} if step_rows else {}, detection)


def analyze_trace(path: str | Path, run: str | None = None, *, top_n: int = 15, gaps_n: int = 5,
                  min_gap_ms: float | None = None, use_xprof: bool | None = None) -> TraceSection:
    """Analyze one capture (an .xplane.pb, a run folder, or a logdir: newest run or `run`). Returns the `trace`
    section of a ptxla_perf report (docs/analyze.md), typed. `use_xprof`: None = xprof's device tables when the capture
    has a device plane; True/False to force."""
    t0 = time.perf_counter()
    run_dir, files = locate_xplanes(path, run)
    cap = load_capture(files)
    t_load = time.perf_counter() - t0
    streams = A.executor_streams(cap)
    steps, step_detection = A.find_steps(cap)
    main = A._main_line(cap)
    cats = A._category_intervals(cap, streams, main)
    comp = A.compiles(cap)
    rows = A.step_breakdown(cap, steps, cats, comp)
    window = (steps[0]["start"], rows[-1]["end"]) if steps else cap.window
    base = window[0]
    step_ms = [(r["end"] - r["start"]) / A.PS_PER_MS for r in rows]
    if min_gap_ms is None:  # 5% of the median step, at least 0.1 ms; 1 ms without steps
        min_gap_ms = max(0.1, 0.05 * float(np.median(step_ms))) if step_ms else 1.0
    devices, gaps = A.device_activity(cap, streams, window, int(min_gap_ms * A.PS_PER_MS), gaps_n, steps, cats)

    has_device_plane = bool(cap.device_planes)
    use_xprof = has_device_plane if use_xprof is None else use_xprof
    xprof_tools: list[str] = []
    ops, categories, collective = A.top_ops(streams, top_n)
    op_source = SOURCE_HOST if not has_device_plane else "device plane events"
    if use_xprof:
        try:
            xt = _xprof_device_tables(files)
            xprof_tools = xt["tools"]
            if xt["hlo_rows"]:
                ops, categories, collective = _ops_from_xprof(xt["hlo_rows"], top_n)
                op_source = SOURCE_XPROF
                if xt.get("duty_cycle") is not None:
                    gaps["xprof_device_duty_cycle"] = xt["duty_cycle"]
        except Exception as exc:  # noqa: BLE001 - fall back to our own tables
            xprof_tools.append(f"failed: {type(exc).__name__}: {exc}"[:200])
    for d in devices:  # per-device collective share next to its duty cycle
        for c in collective.get("per_device", []):
            if c["device"] == d["device"]:
                d["collective_share"] = c["share"]

    step_rows = []
    for r in rows:
        step_rows.append({"step": r["step"], "start_ms": A.ms(r["start"] - base),
                          "duration_ms": A.ms(r["end"] - r["start"]), "annotation_ms": A.ms(r["annotation"]),
                          "compiles": r["compiles"], "breakdown_ms": {k: A.ms(v) for k, v in r["parts"].items()}})
    step_summary = summarize_steps(step_rows, step_detection)
    compile_rows = []
    starts = np.array([r["start"] for r in rows], dtype=np.int64)
    for c in comp:
        k = int(np.searchsorted(starts, c["start"], side="right")) - 1 if len(starts) else -1
        compile_rows.append({"name": c["name"], "thread": c["thread"], "start_ms": A.ms(c["start"] - base),
                             "duration_ms": A.ms(c["end"] - c["start"]),
                             "step": rows[k]["step"] if 0 <= k < len(rows) and c["start"] < rows[k]["end"] else None})
    coll, gap = CollectiveShare.from_json(collective), Gaps.from_json(gaps)
    found = judge_window(step_summary, coll, gap, op_source)
    backend = None
    for line in cap.lines:
        if line.name.startswith("tf_pytorchxla") or any(n == "StepMarker" for n in line.names.values()):
            backend = "torch_xla"
            break
    if backend is None and any("PjitFunction" in n for l in cap.lines[:3] for n in l.names.values()):
        backend = "jax"
    out = TraceSection(
        TraceSource(str(files[0] if len(files) == 1 else run_dir), run_dir.name, [str(f) for f in files], cap.hosts,
                    cap.size_bytes, backend, cap.device_planes, op_source, xprof_tools, list(cap.errors)[:5]),
        TraceWindow(A.ms(window[0] - cap.window[0]), A.ms(window[1] - window[0]), A.ms(cap.window[1] - cap.window[0]),
                    round(cap.profile_ms, 3) if cap.profile_ms else None),
        step_summary, step_rows, devices, gap, ops, categories, coll, compile_rows, found,
        {"load": round(t_load, 3), "total": round(time.perf_counter() - t0, 3)})
    if len(files) > 1:  # several hosts: each one's steps side by side, aligned on step numbers (trace/hosts.py)
        out.per_host = per_host(files, lambda f: analyze_trace(f, top_n=top_n, gaps_n=gaps_n,
                                                               min_gap_ms=min_gap_ms, use_xprof=False))
    return out
