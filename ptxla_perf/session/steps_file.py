"""Every step's record, streamed to a JSON-lines side file as it happens (`profile --steps-file PATH`,
docs/report.md#step-retention): a long run's report keeps only some steps in full, and this file holds all of them
without holding any in memory. One line per step boundary: the adapter's record (StepRecord.to_json), as the
report's `steps[]` has it before the analysis adds its figures (steady, step_time_s, host_reads, time_breakdown)."""
from __future__ import annotations

import json
from typing import IO, Callable

from ..model.records import StepRecord


class StepsFile:
    """An append-only JSON-lines file, opened at the first step, flushed by the OS's buffering, closed at the end: a
    step sink (sinks.py). `path_of()` names it when it opens (the rank is known by then); `path` is None until."""

    name = "steps_file"

    def __init__(self, path_of: Callable[[], str]):
        self.path: str | None = None
        self.lines = 0
        self._path_of = path_of
        self._f: IO[str] | None = None

    def on_step(self, rec: StepRecord) -> None:
        if self._f is None:
            self.path = self._path_of()
            self._f = open(self.path, "w", buffering=1 << 16)
        self._f.write(json.dumps(rec.to_json(), separators=(",", ":"), default=str))
        self._f.write("\n")
        self.lines += 1

    def close(self) -> None:
        if self._f is not None:
            self._f.close()
            self._f = None
