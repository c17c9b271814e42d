"""Several hosts in one capture (`capture --service h1:9012,h2:9012`: one .xplane.pb per host): each host's step
breakdown side by side, and the step-time spread across hosts. Hosts are aligned on their step annotations
(the same step number on every host), never on wall clocks, which differ between machines."""
from __future__ import annotations

from pathlib import Path
from typing import Callable

from ..analysis.figures import stats
from .section import TraceSection


def per_host(files: list[Path], analyze_one: Callable[[Path], TraceSection]) -> dict:
    """`analyze_one(file)` is the single-host analysis (trace.analyze_trace of that file). The result stays a dict:
    it is only rendered (trace/render.py) and written (the section's `per_host`)."""
    rows, durations = [], []
    for f in files:
        t = analyze_one(f)
        ss = t.step_summary.to_json()
        rows.append({"host": (t.source.hosts or [f.stem])[0], "file": str(f), "steps": ss["steps"],
                     "steady_steps": ss["steady_steps"], "step_time_ms": ss["step_time_ms"],
                     "breakdown_ms_per_step": ss["breakdown_ms_per_step"]})
        durations.append({r["step"]: r["duration_ms"] for r in t.steps if r["compiles"] == 0})
    names = [r["host"] for r in rows]
    if len(set(names)) < len(names):  # several servers on one machine (tests, one process per chip): the file names
        for r in rows:
            r["host"] = Path(r["file"]).name.removesuffix(".xplane.pb")
    common = sorted(set.intersection(*(set(d) for d in durations))) if durations else []
    spread = [max(d[s] for d in durations) - min(d[s] for d in durations) for s in common]
    slowest: dict[int, int] = {}
    for s in common:
        k = max(range(len(durations)), key=lambda i: durations[i][s])
        slowest[k] = slowest.get(k, 0) + 1
    out = {"hosts": rows, "aligned_steps": len(common), "step_spread_ms": stats(spread, ndigits=4)}
    if slowest:
        k, n = max(slowest.items(), key=lambda kv: kv[1])
        out["slowest_host"] = {"host": rows[k]["host"], "file": rows[k]["file"], "slowest_in_steps": n}
    return out
