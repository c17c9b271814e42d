"""The session's step sinks: every output the step boundaries feed (the user's callbacks, the capture window, the
steps file, the progress line, the periodic report flush) is one object of one shape, `StepSink`. The session
holds them in one list (Session.sinks), calls them in the one boundary loop (boundary.py: each guarded as
`boundary.<name>`) and closes them in one place at the end (Session._close_sinks: in order, each guarded as
`finish.<name>`, after the adapter's last boundary), so one that fails drops only itself (faults.py).

The shape is that of jax._src.monitoring's listeners: the session knows the protocol, not the outputs."""
from __future__ import annotations

import time
from typing import Callable, Protocol

from ..model.records import StepRecord

FLUSH_SHARE = 0.02  # the most of the run's time the periodic flush may take


class StepSink(Protocol):
    """An output fed one boundary record at a time. `name` names its fault points (`boundary.<name>` for a failed
    `on_step`, `finish.<name>` for a failed `close`); `on_step` runs on the training thread at every boundary, so
    it does no more than its output needs; `close` runs once, after the run's last boundary."""

    name: str

    def on_step(self, rec: StepRecord) -> None: ...

    def close(self) -> None: ...


class Callback:
    """A user's `add_step_callback(fn, close)`: `fn` is the sink's `on_step` itself (no call of ours around it,
    per step); a failing `close` is said on the console, as it is the user's code, not ours."""

    name = "callback"

    def __init__(self, fn: Callable[[StepRecord], None], close: Callable[[], None] | None,
                 say: Callable[[str], None]):
        self.on_step = fn
        self._close = close
        self._say = say

    def close(self) -> None:
        if self._close is None:
            return
        try:
            self._close()
        except Exception as exc:  # noqa: BLE001 - the user's close: said, and the other sinks still close
            self._say(f"ptxla_perf: could not close a step callback: {exc}")


class Capture:
    """The session's capture window (capture_window.py): its step, and `end()`, which closes it (analysed or not).
    `end` is idempotent: finish also ends the window by hand before the sampler and the adapter stop (its analysis
    is an input of the report, and JAX's adapter.stop may still give a last boundary, which must not reach it)."""

    name = "capture"

    def __init__(self, on_step: Callable[[StepRecord], None], end: Callable[[], None]):
        self.on_step = on_step
        self.close = end


class Progress:
    """The console's progress line every `every_s` of step time (summed from the records: no clock call)."""

    name = "progress"

    def __init__(self, every_s: float, say: Callable[[str], None]):
        self.every_s = every_s
        self._say = say
        self._clock = self._last = 0.0
        self._compiles = 0

    def on_step(self, rec: StepRecord) -> None:
        self._compiles += rec.compiles
        self._clock += rec.wall_time_s
        if self._clock - self._last >= self.every_s:
            self._last = self._clock
            self._say(f"ptxla_perf: step {rec.index}, last {rec.wall_time_s * 1e3:.1f} ms, "
                      f"{self._compiles} compiles so far")

    def close(self) -> None:
        pass


class Flush:
    """The report of the steps so far (`write()`), every `every_s` of step time - or less often where writing it
    takes longer than FLUSH_SHARE of that time (a report is written in the training thread: never more than about
    2 % of the run goes to it). A hard kill (SIGKILL, OOM) still leaves the report of the steps so far; the final
    report is the session's own (finish)."""

    name = "flush"

    def __init__(self, every_s: float, write: Callable[[], None]):
        self.every_s = every_s
        self.gap = every_s  # longer where a flush takes long
        self._write = write
        self._clock = self._last = 0.0

    def on_step(self, rec: StepRecord) -> None:
        self._clock += rec.wall_time_s
        if self._clock - self._last >= self.gap:
            self._last = self._clock
            began = time.perf_counter()
            try:
                self._write()
            except Exception:  # noqa: BLE001 - a flush that failed: the next one, or the final report, goes out
                pass
            self.gap = max(self.every_s, (time.perf_counter() - began) / FLUSH_SHARE)

    def close(self) -> None:
        pass
