"""Per-step records as TensorBoard scalars, in the run's TensorBoard log directory (the one captures go to), so
`tensorboard --logdir DIR` shows Scalars and Profile of the same run side by side (docs/html.md#tensorboard).

Nothing is written per step: the session already keeps every record, and this writes the iterations not yet
written when the periodic report flush runs and when the run finishes. The writer is TensorBoard's own
(`tensorboard.summary.Writer`: framework-neutral, no torch or TensorFlow import), not a hand-made encoder."""
from __future__ import annotations

import datetime as _dt
from typing import Any, Callable

PREFIX = "ptxla_perf/"
# tag -> (value of an iteration record, or None when the tag does not apply to it); step = the record's index,
# the same index as the report's steps[] and the HTML page's timeline
SCALARS: dict[str, Callable[[dict[str, Any]], float | None]] = {
    "step_time_ms": lambda s: None if s.get("phase") == "eval" else s["wall_time_s"] * 1e3,
    "eval_step_time_ms": lambda s: s["wall_time_s"] * 1e3 if s.get("phase") == "eval" else None,
    "compiles": lambda s: s.get("compiles", 0),
    "executions": lambda s: s.get("executions", 0),
    "device_to_host": lambda s: (s.get("device_to_host") or {}).get("count", 0),
    "host_to_device": lambda s: (s.get("host_to_device") or {}).get("count", 0),
}
TAGS = [PREFIX + k for k in SCALARS]


class ScalarLog:
    """Writes a report's `steps` as scalars, each iteration once, across periodic flushes and the final write."""

    def __init__(self, logdir: str, started_at: str | None = None):
        self.logdir = logdir
        self.written = 0  # iterations already written
        self._writer = None
        self._t0 = _epoch(started_at)

    def write(self, steps: list[dict[str, Any]], final: bool) -> int:
        """Write the iterations not written yet; before the end, the last one is held back (more boundaries
        may still join it). Returns how many were written now."""
        upto = len(steps) if final else len(steps) - 1
        todo = steps[self.written:upto]
        if todo:
            if self._writer is None:
                from tensorboard.summary import Writer
                self._writer = Writer(self.logdir)
            clock = self._t0 + sum(s["wall_time_s"] for s in steps[:self.written])
            for s in todo:
                clock += s["wall_time_s"]  # the step's end as wall time: TensorBoard's "relative" axis is run time
                for name, get in SCALARS.items():
                    v = get(s)
                    if v is not None:
                        self._writer.add_scalar(PREFIX + name, float(v), int(s["index"]), wall_time=clock)
            self.written = upto
            self._writer.flush()
        if final and self._writer is not None:
            self._writer.close()
            self._writer = None
        return len(todo)

    def to_json(self) -> dict[str, Any]:
        return {"logdir": self.logdir, "tags": TAGS}


def _epoch(iso: str | None) -> float:
    try:
        return _dt.datetime.fromisoformat(iso).timestamp() if iso else _dt.datetime.now().timestamp()
    except ValueError:
        return _dt.datetime.now().timestamp()
