"""Which coming step boundaries run line attribution, and of which kind (docs/attribution.md). Pure: no runtime.

Two kinds never share a step: GRAPHS (capture the pending graph's HLO, to diff a recompile against the site's
previous graph) and CALLS (a TorchFunctionMode that notices which torch call launched, copied or fell back).
`auto` spends at most `max_steps` attribution steps: `initial_steps` graph steps first (warm-up compiles happen
there, in `always` mode too: every warm-up graph is captured, so its cause does not depend on the mode), then
`rearm_steps` call steps; after that only where an anomaly has no line yet, and at the period of a
problem that recurs every N steps (a loss logged every N updates is missed by the steps right after it).
"""
from __future__ import annotations

from typing import Any, Iterable

GRAPHS, CALLS = "graphs", "calls"


class AttributionPlan:
    def __init__(self, cfg: dict[str, Any]):
        self.mode = cfg["mode"]
        self.max_steps = int(cfg["max_steps"])
        self.rearm = int(cfg["rearm_steps"])
        self.hlo = bool(cfg["hlo"])
        self.spent = 0
        self.initial = int(cfg["initial_steps"]) if self.mode != "off" else 0
        self._queue: list[str] = []
        self._booked: dict[int, str] = {}  # boundary index -> kind booked for it
        self._seen_at: dict[tuple, list[int]] = {}  # anomaly -> boundaries it happened at
        self._last: str | None = None  # the kind given to the previous boundary
        if self.mode != "off":
            self._queue = [GRAPHS] * int(cfg["initial_steps"])
            if self.mode == "auto":
                self._queue += [CALLS] * self.rearm

    def next_kind(self, step: int) -> str | None:
        """The kind of attribution for boundary `step` (the next one), or None."""
        if not self._queue and not self._booked and self.mode != "always":  # steady: nothing planned (every boundary)
            self._last = None
            return None
        if self.mode == "always" and self._last == GRAPHS and self._queue[:1] == [GRAPHS] \
                and self.spent >= self.initial:  # the first steps are all graphs, as in auto: warm-up is there
            # graphs re-armed by every recompile would take every step: leave every other one to calls, which see
            # the Python values (ints indexing a device tensor) that a graph diff cannot put a line to
            self._last = CALLS
            self.spent += 1
            return CALLS
        kind = self._queue.pop(0) if self._queue else None
        booked = self._booked.pop(step, None)
        if booked and kind is None and (self.mode != "auto" or self.spent < self.max_steps):
            kind = booked
        if kind is None and self.mode == "always":
            kind = CALLS  # every step; graphs only where a site recompiles
        if kind == GRAPHS and not self.hlo:
            kind = CALLS
        if kind is not None:
            self.spent += 1
        self._last = kind
        return kind

    def saw(self, step: int, unexplained: Iterable[tuple]) -> None:
        """Boundary `step` had these anomalies without a line (or, for compiles, without their own evidence):
        attribute the next steps, and the step each one should recur at."""
        for key in unexplained:
            kind = GRAPHS if key[0] == "compile" else CALLS
            self._want(kind, self.rearm)
            seen = self._seen_at.setdefault(key, [])
            seen.append(step)
            if len(seen) >= 2 and seen[-1] - seen[-2] > 1:
                self._booked[seen[-1] + (seen[-1] - seen[-2])] = kind

    def _want(self, kind: str, steps: int) -> None:
        if self.mode == "off" or (self.mode == "always" and kind == CALLS):
            return
        room = self.max_steps - self.spent - len(self._queue) if self.mode == "auto" else steps
        if room > 0 and self._queue.count(kind) < steps:
            self._queue += [kind] * min(steps - self._queue.count(kind), room)
