"""The device's busy time per step boundary, from torch_xla's execution metrics (read in batches, never a sync)."""
from __future__ import annotations

import time
from collections import deque

from ...model.records import StepRecord
from ._private import X
from .counters import metric


class DeviceTimes:
    """The device's busy time per boundary from torch_xla's execution metrics. `ExecuteTime` (and
    `ExecuteReplicatedTime` under SPMD) times each graph from its launch to the moment the device finished it (the
    PJRT future's ready callback); each sample is stamped with the wall clock (seconds) when it was recorded, its
    value in nanoseconds. Reading the metric copies its last 1024 samples (~50 us; ~150 us with our scan), so it is
    read every EVERY boundaries or MAX_GRAPHS graphs (and before a report), never per boundary. The device runs the
    graphs one after the other, in launch order: the new samples, by start time, are the boundaries' launches
    (`executions`) in order - boundary k's device time is the busy time of the graphs launched in its step. A
    sample's span also holds the time its graph waited in the queue behind the graphs launched before it (the sync
    returns before the device finishes: the host runs ahead), so a graph's busy time starts when the one before it
    ended: end_i - max(start_i, end_(i-1)) (the previous end kept across reads; the sum is the union of the spans).
    A blocked sync waits for the graphs still pending when it began (the step before's, earlier steps' whose syncs
    returned before their graphs ran, and on the CPU often the one it launches itself), so the sync part of its
    `device_wait_s` is capped at the device's busy time inside the sync's own span (the rest of a blocked sync is
    the CPU busy elsewhere: `other`); where the sync's span is not known, at the step before's busy time.
    Boundaries whose graphs have not finished wait for a later read (the last report's read polls the metric a
    little for them, never a sync); where samples are missing (more graphs between reads than the metric keeps,
    graphs torch.compile ran outside any sync) the time stays unknown."""

    EVERY = 256  # boundaries between reads...
    MAX_GRAPHS = 384  # ...or fewer, once this many graphs are pending (the metric keeps 1024 samples)
    METRICS = ("ExecuteTime", "ExecuteReplicatedTime")

    def __init__(self):
        self.pending: list[StepRecord] = []
        self.syncs: list[tuple[tuple | None, float]] = []  # per pending boundary: its sync's span, explicit waits
        self.recent: deque = deque(maxlen=64)  # (launch, end, busy) of the last graphs given to boundaries
        self.offset = time.time() - time.perf_counter()  # the samples' wall clock -> perf_counter
        self.since = time.perf_counter()  # graphs that started before the session are not its steps'
        self.done: dict[tuple, None] = {}  # samples already given to a boundary, oldest first (bounded)
        self.consumed = {m: metric(m)[0] for m in self.METRICS}  # samples counted so far, per metric
        self.prev_busy: float | None = None  # device time of the boundary before the first pending one
        self.unordered = False  # graphs ran outside the syncs (torch.compile): no order to go by
        self.graphs = 0  # graphs launched by the pending boundaries
        self.prev_end: float | None = None  # when the device finished the last graph given to a boundary
        self.busy_s, self.timed_graphs = 0.0, 0  # busy time given so far, over how many graphs
        self.due = (self.EVERY, self.MAX_GRAPHS)  # the next read: once this many boundaries or graphs are pending

    WAIT_S = 2.0  # the last read polls this long at most for graphs still running when the program ended

    def add(self, rec: StepRecord, span: tuple[float, float] | None = None, explicit_wait: float = 0.0) -> None:
        """`span`: when its sync began and returned (perf_counter); `explicit_wait`: the part of its device wait
        spent in xm.wait_device_ops() (not capped: it waits until the device is idle)."""
        self.pending.append(rec)
        self.syncs.append((span, explicit_wait))
        self.graphs += rec.executions
        if len(self.pending) >= self.due[0] or self.graphs >= self.due[1]:
            self.read(final=False)

    def finish(self) -> None:
        """The last read: the graphs the program launched last may still run (its syncs returned before the device
        finished) - poll the metric (no sync, no device work) until they are in, or for what they should take at
        the busy time per graph seen so far (1.5x, + 50 ms; WAIT_S at most, and where none finished yet: a graph no
        sample comes for costs no more)."""
        self.read(final=False)
        wait = min(self.WAIT_S, 0.05 + 1.5 * self.busy_s / self.timed_graphs * self.graphs) if self.timed_graphs \
            else self.WAIT_S  # (none finished yet: the most)
        deadline = time.perf_counter() + wait
        while self.pending and not self.unordered and time.perf_counter() < deadline:
            time.sleep(0.01)
            self.read(final=False)
        self.read()

    def read(self, final: bool = True) -> None:
        """Give the pending boundaries, in order, the busy time of their graphs; a boundary whose graphs have not
        all finished stays pending with those after it (`final`: their time is unknown)."""
        if not self.pending:
            return
        fresh: list[tuple[float, float, tuple]] = []
        lost = False
        done, consumed, offset, since = self.done, self.consumed, self.offset, self.since
        for name in self.METRICS:
            data = X._xla_metric_data(name)
            if not data:
                continue
            count, samples = data[0], data[2]
            new = []
            for ts, value in reversed(samples):
                key = (ts, value, name)
                start = ts - offset - value / 1e9
                if key in done or start < since:
                    break
                new.append((start, value / 1e9, key))
            lost = lost or count - self.consumed[name] > len(new)
            fresh += new
        fresh.sort()
        taken = 0
        resolved = 0
        for rec, (in_sync, explicit) in zip(self.pending, self.syncs):
            n = rec.executions
            if not (lost or self.unordered) and taken + n > len(fresh) and not final:
                break  # still running (or not yet recorded): the next read
            own: list[tuple[float, float, float]] = []
            if lost or self.unordered or taken + n > len(fresh):
                rec.device_time_s = None
            else:  # each graph busy from its launch, or from when the one before it finished (queued behind it)
                busy, prev_end = 0.0, self.prev_end
                for i in range(taken, taken + n):
                    begin, span, key = fresh[i]
                    end = begin + span
                    run = max(end - (begin if prev_end is None else max(begin, prev_end)), 0.0)
                    own.append((begin, end, run))
                    busy += run
                    prev_end = end if prev_end is None else max(prev_end, end)
                    done[key] = None
                    consumed[key[2]] += 1
                self.prev_end, rec.device_time_s = prev_end, busy
                taken += n
                self.busy_s, self.timed_graphs = self.busy_s + busy, self.timed_graphs + n
            if rec.device_wait_s is not None:
                rec.device_wait_s = self._capped(rec, in_sync, explicit, own)
            self.recent.extend(own)
            while in_sync is not None and self.recent and self.recent[0][1] <= in_sync[0]:
                self.recent.popleft()  # later syncs begin after this one: a graph that ended before it never counts
            if rec.device_time_s is None:
                self.recent.clear()  # graphs without times: what was pending is unknown
            self.prev_busy = rec.device_time_s
            resolved += 1
        if lost:  # start again from what the metric holds now
            for name in self.METRICS:
                self.consumed[name] = metric(name)[0]
            for _, _, key in fresh:
                self.done[key] = None
            self.prev_end = None
            self.recent.clear()
        if len(self.done) > 8192:  # keep the newest 4096, at once: popping a dict's oldest key one by one rescans
            self.done = dict.fromkeys(list(self.done)[-4096:])  # its emptied front (~150 us per read measured)
        self.pending, self.syncs = self.pending[resolved:], self.syncs[resolved:]
        self.graphs = sum(r.executions for r in self.pending)
        # those still running count towards the next read, not every boundary's (a host far ahead of the device)
        self.due = (len(self.pending) + self.EVERY, self.graphs + self.MAX_GRAPHS)

    def _capped(self, rec: StepRecord, span: tuple[float, float] | None, explicit: float, own: list) -> float:
        """The boundary's device wait: its sync's part at most the device's busy time inside the sync's span (the
        graphs it waited for: the step before's, earlier ones still queued, its own if the sync blocks on it); its
        explicit waits as measured."""
        wait = rec.device_wait_s
        if span is None or rec.device_time_s is None:  # no times to go by: the step before's busy time
            return min(wait, self.prev_busy) if self.prev_busy is not None else wait
        explicit = min(max(explicit, 0.0), wait)
        began, ended = span
        busy = sum(max(min(end, ended) - max(end - run, began), 0.0) for _, end, run in (*self.recent, *own))
        return min(wait - explicit, busy) + explicit

_DeviceTimes = DeviceTimes  # the name tests and older code use
