"""JAX's device time: the main thread's waits in `block_until_ready` (every step: `DeviceWait`, the breakdown's
`device` part), and on sampled steps when each jitted call's outputs become ready, seen from a daemon thread
(`ReadyWatch`, `steps[].device_time_s`). Pure bookkeeping: no JAX import.

A jitted call returns before the device ran it, so the time in it is dispatch. On sampled steady steps (two
consecutive steps every EVERY boundaries: the first tells where the device finished the step before the second),
each top-level jitted call's dispatch start and one of its output arrays are handed to a daemon thread that waits
for the array (`block_until_ready`, the GIL released while it waits): the main thread never syncs, nothing is run
or compiled. The outputs of one execution become ready together, so one array per call tells when the device
finished the call; a device runs the calls in dispatch order, so the measured step's device time is

    sum over its calls of  ready_i - max(dispatch_start_i, ready_(i-1))    (ready_(-1): the step before's end)

the time from when each call could start (dispatched, and the call before done) to its end: the device's busy
time, and at most the dispatch time more per call (the device starts a call somewhere inside its dispatch).

Limits: the ready time is read when the thread gets the GIL back - exact to microseconds where the main thread
waits (a read, `block_until_ready`: GIL released, and its end bounds the ready time of the calls whose outputs it
waited for), up to the interpreter's switch interval (5 ms) late where it runs Python then. Where the next call's
output is already ready when the thread sees a call's end, the two are not told apart: that end is unknown (inside
the step the call's span merges into the next one's). The array watched is a 0-d output (a loss, a metric:
rarely donated), else the last: an array donated before the thread began waiting on it is deleted (unknown too).
The step's time is None where the step before's end or its last call's end is unknown, for a step that compiled
or ran outside the training phase.
Donation is unaffected: a wait in progress holds no buffer (tests/test_breakdown.py checks a donated loop).
"""
from __future__ import annotations

import queue
import threading
import time
from collections import deque
from typing import Any, Callable

from ...model.records import StepRecord
from .ledger import SKIP, Ledger, Scope

EVERY = 32  # boundaries between samples: steps EVERY-2 and EVERY-1 of every EVERY (the first at steps 30, 31)
_JOIN_S = 10.0  # at the session's stop (a Ctrl-C too): the longest wait for the sampled steps' outputs


class ReadyWatch:
    """Collects the sampled steps' calls on the main thread (nothing on other steps) and resolves them on a daemon
    thread, which sets `device_time_s` on the measured step's record. Each call goes to the thread as it returns,
    so that the thread waits on its output while the device runs it."""

    def __init__(self, block: Callable[[Any], Any]):
        self._block = block  # the real ArrayImpl.block_until_ready (the adapter's wrapper times the user's waits)
        self.calls: list | None = None  # per call of the step being sampled: [dispatch start, ready bound], or None
        self._role = ""
        self._leaves: dict[int, list] = {}  # id(output array) -> its call's entry, on the sampled step only
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._end: float | None = None  # the device's end of the step before the measured one (thread only)

    def arm(self, n: int) -> None:
        """Boundary `n` begins a step: sample it if it is one of a pair."""
        k = n % EVERY
        if k >= EVERY - 2:
            self.calls, self._role = [], "lead" if k == EVERY - 2 else "measure"
        else:
            self.calls = None

    def call(self, t0: float, arrays: list) -> None:
        """A top-level jitted call of the sampled step returned (`t0`: its dispatch start; `arrays`: its output
        arrays): the thread starts waiting on a scalar among them (a loss, a metric: rarely donated), else the
        last. ~0.1 us per output (a tree of 300 arrays: ~30 us), on sampled steps only."""
        entry = [t0, None]
        self.calls.append(entry)
        self._leaves.update(dict.fromkeys(map(id, arrays), entry))
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="ptxla_perf-jax-ready", daemon=True)
            self._thread.start()
        self._queue.put(("call", entry, next((a for a in arrays if not a.shape), arrays[-1]) if arrays else None))

    def waited(self, x: Any, leaves: Callable[[Any], list], t: float) -> None:
        """The main thread waited for `x` (block_until_ready, a read) until `t`: the calls that made it were
        done by then (the thread, woken by the same readiness, may get the GIL back later than that). By id: an
        output freed and its id reused within the step is a later call's output, ready after it anyway."""
        for a in leaves(x):
            entry = self._leaves.get(id(a))
            if entry is not None:
                entry[1] = t if entry[1] is None else min(entry[1], t)

    def step_end(self, rec: StepRecord, ok: bool) -> None:
        """The sampled step's record (a step that compiled or was not a training step: `ok` False, no time)."""
        calls, self.calls = self.calls, None
        if calls is None:
            return
        self._leaves = {}
        if self._thread is not None:
            self._queue.put(("end", self._role if ok and calls else "skip", rec))

    def stop(self) -> None:
        """Resolve what was handed over (the report reads the times), then end the thread."""
        self.calls, self._leaves = None, {}
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join(_JOIN_S)
            self._thread = None

    def _ready(self, arr: Any) -> float | None:
        if arr is None:
            return None
        try:
            self._block(arr)
        except Exception:  # deleted (donated before the wait began): unknown
            return None
        return time.perf_counter()

    def _next_ready(self, todo: deque) -> bool:
        """Whether the next call handed over is already done: then the thread, getting the GIL back late, saw both
        ends at once and cannot tell them apart."""
        while True:
            try:
                todo.append(self._queue.get_nowait())
            except queue.Empty:
                break
        arr = next((it[2] for it in todo if it is not None and it[0] == "call"), None)
        try:
            return arr is not None and arr.is_ready()
        except Exception:
            return False

    def _run(self) -> None:
        todo: deque = deque()
        done: list[tuple] = []  # (entry, when the thread saw its output ready or None) of the step so far
        while True:
            item = todo.popleft() if todo else self._queue.get()
            if item is None:
                return
            if item[0] == "call":
                entry, seen = item[1], self._ready(item[2])
                item = None  # the array is the program's: no reference kept past the wait
                if seen is not None and self._next_ready(todo):
                    seen = None
                done.append((entry, seen))
                continue
            _, role, rec = item  # the step ended: the main thread's waits in it have bounded its calls' ends
            spans = [(entry[0], _earliest(seen, entry[1])) for entry, seen in done]
            done = []
            if role == "lead":
                self._end = spans[-1][1] if spans else None
                continue
            prev, self._end = self._end, None
            if role == "measure" and prev is not None and spans and spans[-1][1] is not None:
                rec.device_time_s = _busy(spans, prev)


def _earliest(*times: float | None) -> float | None:
    known = [t for t in times if t is not None]
    return min(known) if known else None


def _busy(spans: list[tuple], prev: float) -> float:
    """The device's busy time over calls run in order: each call from its dispatch start (or the end of the one
    before, if later) to its end; a call whose end is unknown (seen late, donated before the wait) is merged into
    the next one's span."""
    busy, start = 0.0, None
    for t0, end in spans:
        start = max(t0, prev) if start is None else start
        if end is None:
            continue
        busy += max(end - start, 0.0)
        prev, start = max(prev, end), None
    return busy


class DeviceWait:
    """The main thread's time in `block_until_ready` (the breakdown's `device` part), as the timed wrapper's
    parts (hooks.timed): not counted inside a jitted call, inside another timed wait, or on another thread."""

    def __init__(self, ledger: Ledger, scope: Scope, ready: ReadyWatch, leaves: Callable[[Any], list]):
        self._ledger = ledger
        self._scope = scope
        self._ready = ready
        self._leaves = leaves
        self._main = threading.get_ident()

    def begin(self, x: Any, frame) -> Any:
        scope = self._scope
        if scope.blocking or scope.depth or threading.get_ident() != self._main:
            return SKIP
        scope.blocking = True
        return True

    def finish(self, token: Any, seconds: float) -> None:
        self._ledger.blocked += seconds
        self._scope.blocking = False

    def done(self, token: Any, x: Any, out: Any, t1: float) -> None:
        if self._ready.calls is not None:  # a sampled step: x's calls were done by t1
            self._ready.waited(x, self._leaves, t1)
