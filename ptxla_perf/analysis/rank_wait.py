"""Each rank's steady step split in two from its time breakdown (figures.py): its own work (data, host, launch,
other - what only it does) and its waits (device, read_wait - where a synchronous rank also waits for the others
at a collective). A rank that waits on the device while another rank's own work is longer by about as much is
waiting for that rank: the straggler rule (rules/ranks.py) and each merged rank's `collective_wait_s` read this.

One rank alone cannot tell its wait for its own device work from a wait for the others: the collective runs inside
its step graph, so even a measured device time (torch_xla's `steps[].device_time_s`, a trace's busy time) counts
the time the device spends waiting in the all-reduce. `collective_wait_s` is therefore told across ranks only: a
rank's wait above the least-waiting rank's (basis "cross_rank"; data-parallel ranks run the same device work)."""
from __future__ import annotations

import contextlib
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Iterator

from .figures import median
from ..model.rank_digest import KEY as DIGEST, Steady
from ..model.summary import StepRow, Summary, rows_from_json

_MEMO: dict[int, tuple[dict, Any]] | None = None  # while a merge runs: each report's steady columns, read once


@contextlib.contextmanager
def rows_memo() -> Iterator[None]:
    """Within it, `steady` reads each report's steps (or its digest) once (a merge of 1,024 ranks reads them in
    several rules); the memo is dropped at its end."""
    global _MEMO
    outer, _MEMO = _MEMO, {} if _MEMO is None else _MEMO
    try:
        yield
    finally:
        _MEMO = outer


def steady_rows(report: dict[str, Any]) -> list[StepRow]:
    """The report's steady training iterations as rows (values.rows_from_json with its warm-up)."""
    warm = Summary.from_json(report.get("summary")).warmup_steps
    return [r for r in rows_from_json(report.get("steps", []), warm) if r.steady]


def steady(report: dict[str, Any]) -> Steady:
    """The report's steady iterations as the columns a merge compares (rank_digest.Steady): from its `steps[]`,
    or, for a report read without them (pods/inputs.py), from its `rank_digest` - the same columns, written from
    the same steps. Read once per report within rows_memo."""
    hit = _MEMO.get(id(report)) if _MEMO is not None else None
    if hit is not None and hit[0] is report:
        return hit[1]
    got = Steady.from_json(report.get(DIGEST)) if "steps" not in report else None
    if got is None:
        full = getattr(report, "full_report", None)  # a digest that does not decode: the steps after all
        got = Steady.of_rows(steady_rows(full() if "steps" not in report and full else report))
    if _MEMO is not None:
        _MEMO[id(report)] = (report, got)
    return got


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

    @cached_property
    def own(self) -> float:
        return median(self.own_s)

    @cached_property
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
    cols = steady(report)
    if not len(cols) or not cols.breakdown_complete:
        return None
    parts = {p: cols.part(p) for p in OWN_PARTS}
    waits = [cols.part(p) for p in WAIT_PARTS]
    own = list(map(sum, zip(*parts.values())))  # per step, the parts added in order (as before: 0 + a + b...)
    wait = list(map(sum, zip(*waits)))
    return RankSplit(rank, own, wait, parts, list(cols.step_s))


def collective_waits(splits: dict[int, RankSplit]) -> dict[int, tuple[float, str]]:
    """Each rank's typical wait for the other ranks per steady step, with its basis (module docstring); {} for a
    single rank (nothing to compare with)."""
    if len(splits) < 2:
        return {}
    floor = min(s.wait for s in splits.values())
    return {k: (max(s.wait - floor, 0.0), "cross_rank") for k, s in splits.items()}
