"""The merged report's ranks x steps heat map (`aggregate.heatmap`): each rank's steady step time, and the
straggler's slow part (rules/ranks.py) where one was found, in at most MAX_COLUMNS columns (consecutive steps
averaged) and MAX_ROWS rows. Rows are grouped by host - the host with the slowest rank first - and within a host
the straggling ranks, then the slowest, come first: on a pod of hundreds of ranks the slow ones are the top rows.
The page (html/heatmap.py) draws it."""
from __future__ import annotations

from typing import Any

from ..analysis.figures import median
from ..analysis.rank_wait import steady

MAX_COLUMNS = 60
MAX_ROWS = 128


def _columns(values: list[float], n_cols: int) -> list[float | None]:
    """`values` averaged into `n_cols` columns of consecutive steps (None where a rank has fewer steps)."""
    per = max(1, -(-len(values) // n_cols)) if values else 1
    out: list[float | None] = []
    for c in range(n_cols):
        chunk = values[c * per:(c + 1) * per]
        out.append(round(sum(chunk) / len(chunk) * 1e3, 3) if chunk else None)
    return out


def heatmap(reports: list[dict[str, Any]], ranks: list[int], hosts: list[str | None],
            straggler: dict[str, Any] | None) -> dict[str, Any] | None:
    """The heat map of the ranks' reports (in the order of `ranks`, with their `hosts`), `straggler` the merged
    straggler finding (or None). None when no rank has steady steps."""
    part = None
    slow: list[int] = []
    if straggler:
        ev = straggler.get("evidence") or {}
        slow = list(ev.get("slow_ranks") or straggler.get("ranks") or [])
        part = ev.get("component") or ("data" if ev.get("phase") == "data" else None)
    series: dict[int, list[float]] = {}
    parts: dict[int, list[float]] = {}
    for rep, rank in zip(reports, ranks):
        cols = steady(rep)  # its steps' columns, or its rank_digest's (the same)
        series[rank] = list(cols.step_s)
        if part:
            parts[rank] = cols.part(part)
    longest = max((len(v) for v in series.values()), default=0)
    if not longest:
        return None
    n_cols = min(MAX_COLUMNS, longest)
    p50 = {k: (median(v) or 0.0) for k, v in series.items()}
    host_of = dict(zip(ranks, hosts))
    key = {k: (k in slow, p50[k]) for k in ranks}
    host_key: dict[Any, tuple] = {}
    for k in ranks:
        h = host_of[k]
        host_key[h] = max(host_key.get(h, key[k]), key[k])
    order = sorted(ranks, key=lambda k: (tuple(-float(x) for x in host_key[host_of[k]]), str(host_of[k]),
                                         -float(key[k][0]), -key[k][1], k))
    shown = order[:MAX_ROWS]
    per = max(1, -(-longest // n_cols))
    return {"ranks": shown, "hosts": [host_of[k] for k in shown], "columns": n_cols, "steps_per_column": per,
            "step_ms": [_columns(series[k], n_cols) for k in shown], "part": part,
            "part_ms": [_columns(parts[k], n_cols) for k in shown] if part else None,
            "slow_ranks": slow, "ranks_left_out": len(order) - len(shown)}
