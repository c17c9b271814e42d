"""Per-step records as TensorBoard scalars, in the run's TensorBoard log directory (the one captures go to), so
`tensorboard --logdir DIR` shows Scalars and Profile of the same run side by side (docs/html.md#tensorboard-scalars).

Nothing is written per step: the session already keeps every record. At the periodic report flush and at the end
it hands the iterations not written yet to a background thread, which encodes them with TensorBoard's own writer
(`tensorboard.summary.Writer`: framework-neutral, no torch or TensorFlow import; not a hand-made encoder).
Encoding costs ~50-90 µs a scalar, so a flush of a few thousand steps would otherwise stall the training loop."""
from __future__ import annotations

import datetime as _dt
import queue
import threading
from typing import Any, Callable, Sequence

from ..analysis.breakdown import COMPONENTS
from ..analysis.iterations import weight
from ..model.summary import StepRow

PREFIX = "ptxla_perf/"
# tag -> (value of an iteration's row, or None when the tag does not apply to it); step = the row's index, the same
# index as the report's steps[] and the HTML page's timeline. `step_time_ms` is the summary's step time (net of
# compile, values.StepRow.step_time_s); `wall_time_ms` the iteration's raw wall time, compile included.
SCALARS: dict[str, Callable[[StepRow], float | None]] = {
    "step_time_ms": lambda r: r.step_time_s * 1e3 if r.train else None,
    "eval_step_time_ms": lambda r: None if r.train else r.wall_time_s * 1e3,
    "wall_time_ms": lambda r: r.wall_time_s * 1e3 if r.train else None,
    "compiles": lambda r: r.compiles,
    "executions": lambda r: r.executions,
    "device_to_host": lambda r: r.host_reads,  # host reads, net of CPU-fallback copies (as the summary counts them)
    "host_to_device": lambda r: r.host_to_device,
    "live_arrays": lambda r: r.live_arrays,  # live device tensors/arrays where sampled (memory.py)
    "live_mib": lambda r: r.live_bytes / 2**20 if r.live_bytes is not None else None,
    # where the step's time went (steps[].time_breakdown): one tag per component, in ms
    **{f"time_{c}_ms": (lambda r, c=c: None if r.time_breakdown is None else r.time_breakdown[c] * 1e3)
       for c in COMPONENTS},
}
TAGS = [PREFIX + k for k in SCALARS]


class ScalarLog:
    """Writes a report's `steps` as scalars, each iteration once, across periodic flushes and the final write."""

    def __init__(self, logdir: str, started_at: str | None = None):
        self.logdir = logdir
        self.written = 0  # the first iteration index not handed to the writer yet
        self._clock = _epoch(started_at)  # wall time at the end of the last iteration handed over
        self._queue: queue.Queue = queue.Queue()
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    def write(self, steps: Sequence[StepRow | dict[str, Any]], final: bool) -> int:
        """Hand over the iterations not written yet (StepRows, or a report's steps[] records); before the end, the last one is held back (more boundaries
        may still join it). `final` waits until everything is on disk and closes the file. Returns how many
        iterations were handed over now."""
        self._raise()
        upto = len(steps) if final else len(steps) - 1
        # by iteration index, not position: a long run's older records are folded and merge (fold.py); a folded
        # record is one point, at its first iteration, of its means
        todo = [s for s in steps[:max(upto, 0)] if _index(s) >= self.written]
        if todo:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="ptxla_perf-scalars", daemon=True)
                self._thread.start()
            self._queue.put((todo, self._clock))
            self._clock += sum(_wall(s) * _repeat(s) for s in todo)
            self.written = _index(todo[-1]) + _repeat(todo[-1])
        if final and self._thread is not None:
            self._queue.put(None)
            self._thread.join()
            self._thread = None
            self._raise()
        return len(todo)

    def to_json(self) -> dict[str, Any]:
        return {"logdir": self.logdir, "tags": TAGS}

    def _run(self) -> None:
        writer = None
        try:
            while (item := self._queue.get()) is not None:
                todo, clock = item
                if writer is None:
                    try:
                        from tensorboard.summary import Writer
                    except ModuleNotFoundError as exc:  # an optional part: say how to get it
                        raise ModuleNotFoundError(f"{exc} (pip install 'ptxla_perf[tensorboard]')") from exc
                    writer = Writer(self.logdir)
                for s in todo:
                    row = s if isinstance(s, StepRow) else StepRow.from_json(s)
                    clock += row.wall_time_s * weight(row)  # the step's end as wall time: "relative" in TensorBoard is run time
                    for name, get in SCALARS.items():
                        v = get(row)
                        if v is not None:
                            writer.add_scalar(PREFIX + name, float(v), row.index, wall_time=clock)
                writer.flush()
        except BaseException as exc:  # noqa: BLE001 - said by the session at the next write
            self._error = exc
            while self._queue.get() is not None:  # drain, so that the final write's join returns
                pass
        finally:
            if writer is not None:
                try:
                    writer.close()
                except Exception:  # noqa: BLE001
                    pass

    def _raise(self) -> None:
        if self._error is not None:
            exc, self._error = self._error, None
            raise RuntimeError(f"{type(exc).__name__}: {exc}") from exc


def _index(s: StepRow | dict[str, Any]) -> int:
    return s.index if isinstance(s, StepRow) else int(s.get("index") or 0)


def _repeat(s: StepRow | dict[str, Any]) -> int:
    return weight(s) if isinstance(s, StepRow) else int(s.get("repeat") or 1)


def _wall(s: StepRow | dict[str, Any]) -> float:
    return s.wall_time_s if isinstance(s, StepRow) else s["wall_time_s"]


def _epoch(iso: str | None) -> float:
    try:
        return _dt.datetime.fromisoformat(iso).timestamp() if iso else _dt.datetime.now().timestamp()
    except ValueError:
        return _dt.datetime.now().timestamp()
