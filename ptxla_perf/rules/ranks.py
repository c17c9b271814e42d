"""Rank rules (scope `ranks`): what no single process can see, judged over the per-process reports of one run -
`straggler` (one rank consistently slower) and `rank_divergence` (one rank compiles or syncs where the others do
not). merge.py runs them (`judge`) when it merges a run's reports. Thresholds are thresholds.py's."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from ..analysis import rank_wait
from ..model import summary_keys as K
from ..analysis.figures import median
from ..model.fmt import ms
from ..model.thresholds import value as threshold
from ..model.finding import RANKS_SCOPE, Cost, Evidence, Finding, Rule, run as run_rules

_DIVERGENT_KINDS = ("device_to_host_sync", "recompilation", "graph_break", "op_fallback", "eager_compile",
                    "host_to_device_transfer")


def rank_of(report: dict[str, Any]) -> int:
    env = report.get("environment") or {}
    run = report.get("run") or {}
    for v in (run.get("rank"), env.get("process_index")):
        if isinstance(v, int):
            return v
    return 0


def steady_times(report: dict[str, Any], key: str = "step") -> list[float]:
    """A per-step figure ("step" time net of compile, "host" time outside device reads, "data" wait; as
    values.row_series) over the rank's steady training iterations, in order, as its report's rows say
    (values.StepRow; reports written before `steps[].steady` get the process's own rule) or its `rank_digest`."""
    return rank_wait.steady(report).series(key)


@dataclass
class DivergenceEvidence(Evidence):
    """rank_divergence's evidence: the finding kind some ranks have and others not (with the ranks on each side),
    or `compiles` with each rank's compile count."""

    finding: str
    on_ranks: list[int] | None = None
    not_on_ranks: list[int] | None = None
    compiles: dict[str, int] | None = None

    def to_json(self) -> dict[str, Any]:
        if self.compiles is not None:
            return {"finding": self.finding, "compiles": self.compiles}
        return {"finding": self.finding, "on_ranks": self.on_ranks, "not_on_ranks": self.not_on_ranks}


@dataclass
class Ranks:
    """What a rank rule reads: the per-process reports of one run."""

    reports: list[dict[str, Any]]


class _CrossRank(Rule):
    scope = RANKS_SCOPE

    def unmet(self, r: Ranks) -> str | None:
        return None if len(r.reports) > 1 else "one process: no other rank to compare with"


@dataclass
class StragglerEvidence(Evidence):
    rank: int  # the slowest of the straggling ranks
    phase: str  # step | data | host | own_work: the figure in which it is slower
    gap_s: float  # its typical figure above the other ranks' (cost.ms_per_step for step | data | host)
    gap_share: float | None  # the gap over the other ranks' typical figure
    component: str | None  # the breakdown part that differs most
    p50_s: dict[str, float]  # each rank's typical figure (at most MAX_RANKS_KEPT ranks: the slow ones first)
    steps_compared: int
    steps_above_all_others: int  # steps in which the slowest rank is above the others' median of that step
    slow_ranks: list[int] = field(default_factory=list)  # every straggling rank, slowest first
    others_wait_s: float | None = None  # own_work: what the other ranks wait on the device per step for it


MAX_RANKS_NAMED = 4  # a message names at most this many ranks ("and N more")
MAX_RANKS_KEPT = 64  # evidence keeps at most this many ranks' figures (a pod has thousands)


def _slow_ranks(typical: dict[int, float], least_gap) -> tuple[list[int], float]:
    """The ranks whose typical figure stands above the reference (the median of the faster half of the ranks,
    so that a few slow ranks among many do not raise it) by at least `least_gap(ref)`, slowest first; none when
    they are more than half of the ranks (then there is no single slow minority to name)."""
    vals = sorted(typical.values())
    ref = median(vals[:max(1, (len(vals) + 1) // 2)])
    slow = sorted((k for k, v in typical.items() if v - ref >= least_gap(ref)), key=lambda k: -typical[k])
    if 2 * len(slow) > len(typical):
        return [], ref
    return slow, ref


def _consistent(series: dict[int, list[float]], slow: list[int]) -> tuple[list[int], int, int]:
    """The slow ranks that stand above the median of the other ranks at that step in at least
    straggler_consistency of the steps compared; the steps compared, and the steps the slowest of them is above."""
    n = min(len(v) for v in series.values())
    fast = [k for k in series if k not in slow]
    ref = _step_medians([series[k] for k in fast], n)
    above = {k: sum(1 for i in range(n) if series[k][i] > ref[i]) for k in slow}
    kept = [k for k in slow if n and above[k] / n >= threshold("straggler_consistency")]
    return kept, n, above[kept[0]] if kept else 0


def _step_medians(series: list[list[float]], n: int) -> list[float]:
    """Step by step, the median over the ranks' series of each of the first `n` steps."""
    return [median(col) for col in zip(*(v[:n] for v in series))] if series else [None] * n


def _named(ranks: list[int]) -> str:
    """`1`, `1, 5` or `1, 5, 7, 9 and 12 more`: the console names at most MAX_RANKS_NAMED ranks."""
    head = ", ".join(str(k) for k in ranks[:MAX_RANKS_NAMED])
    return head + (f" and {len(ranks) - MAX_RANKS_NAMED} more" if len(ranks) > MAX_RANKS_NAMED else "")


def _kept(typical: dict[int, float], slow: list[int]) -> dict[str, float]:
    order = slow + sorted(k for k in typical if k not in slow)
    return {str(k): typical[k] for k in order[:MAX_RANKS_KEPT]}


class Straggler(_CrossRank):
    """Ranks consistently slower than the others. Phase "step": their iterations take longer (the others do not
    wait for them, e.g. no collective in the step; a rank whose longer steps are waits for another rank's own work
    is not one: `_waits_for_another`). When a collective makes every rank's iteration as long, the
    rank the others wait for shows in what it does instead of waiting: phase "data", it waits longer for its
    input (session.data_wait()); phase "host", it keeps the host busy while the others wait in device reads;
    phase "own_work", its own part of the time breakdown (data, host, launch, other) is longer while the others
    wait on the device (in the collective) for about as long (rank_wait.py)."""

    kind = "straggler"

    def run(self, r: Ranks) -> list[Finding]:
        for phase in ("step", "data", "host"):
            found = self._phase(r.reports, phase)
            if found:
                return [found]
        found = self._own_work(r.reports)
        return [found] if found else []

    def _phase(self, reports: list[dict[str, Any]], phase: str) -> Finding | None:
        times = {rank_of(r): steady_times(r, phase) for r in reports}
        times = {k: v for k, v in times.items() if len(v) >= threshold("straggler_min_steps")}
        if len(times) < 2:
            return None
        typical = {k: median(v) for k, v in times.items()}
        slow_ranks, ref = _slow_ranks(typical, lambda ref: max(threshold("straggler_share") * ref,
                                                               threshold("straggler_min_s")))
        if not slow_ranks:
            return None
        if phase == "step":
            splits = _splits(reports)
            slow_ranks = [k for k in slow_ranks if not _waits_for_another(splits, k, typical[k] - ref)]
            if not slow_ranks:
                return None
        slow_ranks, n, above = _consistent(times, slow_ranks)
        if not slow_ranks:
            return None
        slow = slow_ranks[0]
        gap = typical[slow] - ref
        share = above / n
        what = {"step": "step time", "data": "wait for input data per step",
                "host": "host time per step (outside device waits)"}[phase]
        slow_part = _slowest_component(reports, slow)
        who = f"Rank {slow} is a straggler" if len(slow_ranks) == 1 else \
            f"Ranks {_named(slow_ranks)} are stragglers ({len(slow_ranks)} of {len(typical)}); the slowest, {slow}"
        msg = (f"{who}: its {what} is {ms(gap)} above the other ranks' "
               f"(p50 {ms(typical[slow])} vs {ms(ref)}) in {share:.0%} of {n} steady steps"
               + (f"; the part that differs most is its {slow_part[0].replace('_', ' ')} time "
                  f"({ms(slow_part[1])} more per step)" if slow_part else "") + ". In a "
               "synchronous job every rank waits for the slowest at each collective. Look at what is different on "
               f"rank {slow}: its input pipeline, its share of the data, its host (load, other processes).")
        return Finding("straggler", "warning", msg, above, None,
                       StragglerEvidence(slow, phase, gap, gap / ref if ref else None,
                                         slow_part[0] if slow_part else None, _kept(typical, slow_ranks), n, above,
                                         slow_ranks),
                       ranks=sorted(slow_ranks), cost=Cost(ms_per_step=round(gap * 1e3, 3),
                                                           share_of_wall=round(gap / typical[slow], 4)
                                                           if typical[slow] else None))

    def _own_work(self, reports: list[dict[str, Any]]) -> Finding | None:
        """Equal step times (a synchronous job): the rank whose own work is longer while the others wait on the
        device for about that long."""
        splits = {k: s for k, s in _splits(reports).items() if s and len(s.own_s) >= threshold("straggler_min_steps")}
        if len(splits) < 2:
            return None
        step_ref = median(s_.wait + s_.own for s_ in splits.values())
        typical = {k: s.own for k, s in splits.items()}
        slow_ranks, ref = _slow_ranks(typical, lambda ref: max(threshold("straggler_min_s"),
                                                               threshold("straggler_part_share") * step_ref))
        if not slow_ranks:
            return None
        fast = [k for k in splits if k not in slow_ranks]
        n = min(len(s.own_s) for s in splits.values())
        fast_own = _step_medians([splits[k].own_s for k in fast], n)
        fast_wait = _step_medians([splits[k].wait_s for k in fast], n)
        above = {k: sum(1 for i in range(n) if splits[k].own_s[i] > fast_own[i] and fast_wait[i] > splits[k].wait_s[i])
                 for k in slow_ranks}  # steps in which it works longer while the others wait longer
        slow_ranks = [k for k in slow_ranks if n and above[k] / n >= threshold("straggler_consistency")]
        if not slow_ranks:
            return None
        slow = slow_ranks[0]
        gap = typical[slow] - ref
        lost = median(fast_wait) - median(splits[slow].wait_s)  # what the others wait beyond the straggler's wait
        if lost < threshold("straggler_wait_match") * gap:
            return None  # the others do not wait for it: its own work overlaps theirs, costs them nothing
        above = above[slow]
        part_gaps = {p: median(splits[slow].parts_s[p]) - median(median(splits[k].parts_s[p]) for k in fast)
                     for p in rank_wait.OWN_PARTS}
        part = max(part_gaps, key=part_gaps.get)
        step = median(splits[slow].step_s)
        cost_s = min(lost, gap)  # they cannot lose more to it than its own work's excess
        who = f"Rank {slow} is a straggler" if len(slow_ranks) == 1 else \
            f"Ranks {_named(slow_ranks)} are stragglers ({len(slow_ranks)} of {len(splits)}); the slowest, {slow}"
        msg = (f"{who}: its own work per step ({'/'.join(rank_wait.OWN_PARTS)}) is {ms(gap)} longer than the "
               f"other ranks' (p50 {ms(typical[slow])} vs {ms(ref)}), most of it in its {part} part "
               f"({ms(part_gaps[part])} more per step), while the other ranks wait on the device, in the "
               f"collective, {ms(lost)} per step longer than it does - in {above / n:.0%} of {n} steady steps. Every "
               f"rank's step is as long as rank {slow}'s: the others lose {ms(cost_s)} per step waiting for it. Look at "
               f"what rank {slow} does on its host before or around each step ({part} time: its Python, its input, "
               "its host's load).")
        return Finding("straggler", "warning", msg, above, None,
                       StragglerEvidence(slow, "own_work", gap, gap / ref if ref else None, part,
                                         _kept(typical, slow_ranks), n, above, slow_ranks, lost),
                       ranks=sorted(slow_ranks),
                       cost=Cost(ms_per_step=round(cost_s * 1e3, 3), share_of_wall=round(cost_s / step, 4)
                                 if step else None))


def _splits(reports: list[dict[str, Any]]) -> dict[int, rank_wait.RankSplit | None]:
    """Each rank's steady steps split into own work and waits (rank_wait.split_of), by rank."""
    return {rank_of(r): rank_wait.split_of(r, rank_of(r)) for r in reports}


def _waits_for_another(splits: dict[int, rank_wait.RankSplit | None], rank: int, gap: float) -> bool:
    """Whether a rank's longer steps are waits for another rank's own work: at least straggler_wait_match of its
    excess is in its waits (device, read_wait) while another rank's own work (data, host, launch, other) is longer
    than its own by at least straggler_part_share of the step and straggler_min_s. Under asynchronous dispatch a
    rank that runs ahead waits at its next read for everything its device did since - the all-reduce's wait for
    the slow rank, and once its peers' start-up (their compiles) - spread back over its steps (analysis/pacing.py):
    its step is the slow rank's, plus that one-off, and the slow rank is the one found in a later phase."""
    me = splits.get(rank)
    if me is None or any(s is None for s in splits.values()):
        return False
    others = [s for k, s in splits.items() if k != rank]
    if me.wait - median([s.wait for s in others]) < threshold("straggler_wait_match") * gap:
        return False
    least = max(threshold("straggler_min_s"), threshold("straggler_part_share") * median(me.step_s))
    return max(s.own for s in others) - me.own >= least


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


class RankDivergence(_CrossRank):
    """A line that compiles or syncs on some ranks and not the others (e.g. a rank-0-only logging read): every
    other rank waits for it at the next collective. Also: ranks that compiled different numbers of graphs."""

    kind = "rank_divergence"

    def run(self, r: Ranks) -> list[Finding]:
        reports = r.reports
        ranks = sorted(rank_of(x) for x in reports)
        out = []
        by_line: dict[tuple, dict[int, dict]] = {}
        for x in reports:
            for f in map(Finding.from_json, x.get("findings", [])):  # a rank's written findings: the load edge
                if f.location and f.kind in _DIVERGENT_KINDS:
                    by_line.setdefault((f.kind, f.location.file, f.location.line), {})[rank_of(x)] = f
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
            out.append(Finding("rank_divergence", "warning" if f.severity != "info" else "info", msg,
                               sum(h.count for h in hits.values()), f.location,
                               DivergenceEvidence(kind, on_ranks=on, not_on_ranks=off), f.per_step,
                               ranks=on, cost=f.cost))
        compiles = {rank_of(x): int((x.get("summary") or {}).get("compiles") or 0) for x in reports}
        diverged = {kind for (kind, _, _), hits in by_line.items() if len(hits) != len(ranks)}
        if len(set(compiles.values())) > 1 and "recompilation" not in diverged:
            typical = median(compiles.values())
            odd = sorted(k for k, v in compiles.items() if v != typical)
            if odd and len(odd) < len(ranks):
                out.append(Finding(
                    "rank_divergence", "info",
                    f"Rank{'s' if len(odd) > 1 else ''} {_ranks(odd)} compiled "
                    f"{', '.join(str(compiles[k]) for k in odd)} graph(s) where the other ranks compiled "
                    f"{typical:g}: a rank that compiles while the others wait holds them at the next collective.",
                    int(sum(abs(compiles[k] - typical) for k in odd)), None,
                    DivergenceEvidence("compiles", compiles={str(k): v for k, v in compiles.items()}), ranks=odd))
        return out


def _ranks(ranks: list[int]) -> str:
    return ", ".join(str(r) for r in ranks)


RULES: tuple[Rule, ...] = (Straggler(), RankDivergence())


def judge(reports: list[dict[str, Any]]) -> list[Finding]:
    """The ranks scope's findings of one run's reports."""
    return run_rules(RULES, Ranks(reports)).findings
