"""Each rank's steady step split in two from its time breakdown (figures.py): its own work (data, host, launch,
other - what only it does) and its waits (device, read_wait - where a synchronous rank also waits for the others
at a collective). A rank that waits on the device while another rank's own work is longer by about as much is
waiting for that rank: the straggler rule (rank_rules.py) and each merged rank's `collective_wait_s` read this.

One rank alone cannot tell its wait for its own device work from a wait for the others: the collective runs inside
its step graph, so even a measured device time (torch_xla's `steps[].device_time_s`, a trace's busy time) counts
the time the device spends waiting in the all-reduce. `collective_wait_s` is therefore told across ranks only: a
rank's wait above the least-waiting rank's (basis "cross_rank"; data-parallel ranks run the same device work)."""
from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Iterator

from .figures import median
from .values import StepRow, Summary, rows_from_json

_MEMO: dict[int, tuple[dict, Any]] | None = None  # while a merge runs: each report's rows, read once


@contextlib.contextmanager
def rows_memo() -> Iterator[None]:
    """Within it, steady_rows reads each report's steps once (a merge of 1,024 ranks reads them in several
    rules); the memo is dropped at its end."""
    global _MEMO
    outer, _MEMO = _MEMO, {} if _MEMO is None else _MEMO
    try:
        yield
    finally:
        _MEMO = outer


def steady_rows(report: dict[str, Any]) -> list[StepRow]:
    """The report's steady training iterations as rows (values.rows_from_json with its warm-up)."""
    hit = _MEMO.get(id(report)) if _MEMO is not None else None
    if hit is not None and hit[0] is report:
        return hit[1]
    warm = Summary.from_json(report.get("summary")).warmup_steps
    rows = [r for r in rows_from_json(report.get("steps", []), warm) if r.steady]
    if _MEMO is not None:
        _MEMO[id(report)] = (report, rows)
    return rows


OWN_PARTS = ("data", "host", "launch", "other")  # what only this rank does
WAIT_PARTS = ("device", "read_wait")  # where it waits on the device (its own graph, or the others at a collective)


@dataclass(frozen=True)
class RankSplit:
    """One rank's steady steps, step by step: its own work, its waits, each own part, its step time."""

    rank: int
    own_s: list[float]
    wait_s: list[float]
    parts_s: dict[str, list[float]]
    step_s: list[float]

    @property
    def own(self) -> float:
        return median(self.own_s)

    @property
    def wait(self) -> float:
        return median(self.wait_s)


def split_of(report: dict[str, Any], rank: int) -> RankSplit | None:
    """The rank's steady steps split into own work and waits; None when a steady step has no breakdown (reports
    written before `steps[].time_breakdown`). Read once per report within rows_memo."""
    key = -1 - id(report)  # the memo's rows are under id(report), its split under this
    hit = _MEMO.get(key) if _MEMO is not None else None
    if hit is not None and hit[0] is report:
        return hit[1]
    split = _split_of(report, rank)
    if _MEMO is not None:
        _MEMO[key] = (report, split)
    return split


def _split_of(report: dict[str, Any], rank: int) -> RankSplit | None:
    rows = steady_rows(report)
    if not rows or any(r.time_breakdown is None for r in rows):
        return None
    parts = {p: [float(r.time_breakdown.get(p) or 0.0) for r in rows] for p in OWN_PARTS}
    own = [sum(v[i] for v in parts.values()) for i in range(len(rows))]
    wait = [sum(float(r.time_breakdown.get(p) or 0.0) for p in WAIT_PARTS) for r in rows]
    return RankSplit(rank, own, wait, parts, [r.step_time_s for r in rows])


def collective_waits(splits: dict[int, RankSplit]) -> dict[int, tuple[float, str]]:
    """Each rank's typical wait for the other ranks per steady step, with its basis (module docstring); {} for a
    single rank (nothing to compare with)."""
    if len(splits) < 2:
        return {}
    floor = min(s.wait for s in splits.values())
    return {k: (max(s.wait - floor, 0.0), "cross_rank") for k, s in splits.items()}
