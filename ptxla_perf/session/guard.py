"""The runaway guard: stop a run only when it is heading for memory exhaustion, warn first (docs/guard.md).

What runaway compilation looks like depends on the backend, so the adapter says which boundaries are runaway
(`Adapter.runaway(rec, cfg)`): torch_xla - one step that compiled graph after graph at host reads (each read cuts
a new partial graph of the same step: `torch.autograd.set_detect_anomaly(True)`, a host read in a per-op hook);
JAX - never from compile counts (eager ops compile once per op and shape, tens of them in an evaluation pass are
normal and cached).

Policy: the first runaway boundary prints a console warning (what was seen, how to opt out). The run is stopped
when runaway boundaries come `stop_after` times in a row (the partial graphs keep coming, and each compiled
executable stays cached), or at any runaway boundary when the machine's available memory has fallen below
`min_available_memory` of the total. `guard: null` (config) / `--guard off` (CLI) turns it off.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Callable

from ..config import GuardConfig
from ..model.records import StepRecord

DEFAULTS = asdict(GuardConfig())  # one set of defaults: the config schema's (config.py)


def available_memory_share() -> float | None:
    """MemAvailable / MemTotal from /proc/meminfo (Linux); None elsewhere. Read only at runaway boundaries."""
    try:
        with open("/proc/meminfo") as f:
            info = {line.split(":")[0]: int(line.split()[1]) for line in f if line.split()[1:2]}
        return info["MemAvailable"] / info["MemTotal"]
    except (OSError, KeyError, ValueError, ZeroDivisionError):
        return None


@dataclass(frozen=True)
class GuardDecision:
    warn: str | None = None
    stop: str | None = None


_GO_ON = GuardDecision()  # the answer at almost every boundary, made once


class Guard:
    def __init__(self, cfg: dict | None, is_runaway: Callable[[StepRecord, dict], str | None],
                 memory: Callable[[], float | None] = available_memory_share):
        self.enabled = cfg is not None
        self.cfg = {**DEFAULTS, **(cfg or {})}
        self._is_runaway = is_runaway
        self._memory = memory
        self._streak = 0
        self._warned = False

    def check(self, rec: StepRecord) -> GuardDecision:
        if not self.enabled:
            return _GO_ON
        what = self._is_runaway(rec, self.cfg)
        if not what:
            self._streak = 0
            return _GO_ON
        self._streak += 1
        avail = self._memory()
        low = avail is not None and avail < float(self.cfg["min_available_memory"])
        if self._streak >= int(self.cfg["stop_after"]) or low:
            why = (f"only {avail:.0%} of memory is available" if low else
                   f"{self._streak} steps in a row did this, and every partial graph stays compiled and cached")
            return GuardDecision(stop=f"step {rec.index}: {what}; {why}, so the run was stopped before it exhausts "
                                      "memory. Turn the guard off with --guard off (config: guard: null).")
        if self._warned:
            return _GO_ON
        self._warned = True
        return GuardDecision(warn=f"ptxla_perf: guard: step {rec.index}: {what}. If the next step does the same, "
                                  "the run is stopped before it exhausts memory (--guard off / guard: null to "
                                  "never stop).")
