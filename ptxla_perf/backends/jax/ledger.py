"""The running counters and the events of the step in progress: what every part adds to, and how a step's record is
cut from two snapshots of them. Pure bookkeeping: no JAX import."""
from __future__ import annotations

import time
from dataclasses import replace
from typing import Any, NamedTuple

from ...model.records import EMPTY, Event, Location, StepRecord, Transfers
from ...model.training_thread import TRAINING

MAX_EVENTS_PER_STEP = 16
SKIP = object()  # a timed wrapper's begin(): not ours, run the real function untimed (hooks.timed)
_new = tuple.__new__
_TRANSFERS: dict[tuple, Transfers] = {}  # (count, bytes) -> the Transfers every record with those figures shares


class Counts(NamedTuple):
    """The running counters at one moment; a step's figures are the difference of two."""

    compiles: int
    compile_time: float
    cached: int
    execs: int
    d2h: int
    d2h_bytes: int
    h2d: int
    h2d_bytes: int
    t: float  # time.perf_counter()
    d2h_time: float
    flops: float
    bytes: float
    trans: float
    uncosted: int  # calls whose program cost is not known
    launch: float  # the calling thread's CPU time inside top-level jitted calls, net of their compile time
    queue: float  # the rest of their wall time where the thread blocked: the device (a full queue, a copy)
    own: float  # ptxla_perf's own time around the calls (the step boundary's bookkeeping: the `profiler` part)
    cpu: float  # the training thread's CPU clock (training_thread.py)
    call_cpu: float  # ...of it inside top-level jitted calls
    blocked: float  # the training thread's time in block_until_ready (waiting for the device: breakdown.py `device`)
    thread: int | None  # which thread `cpu` is the clock of (training_thread.py)


class Scope:
    """Where the main thread is, read by every hook: inside a wrapped jitted call (its tracing and dispatch:
    `depth`), which top-level function that is (`tracing`), inside our own compile for a cost (`costing`), inside
    numpy's read of an array (`in_np`), inside a timed block_until_ready (`blocking`)."""

    __slots__ = ("depth", "tracing", "costing", "in_np", "blocking")

    def __init__(self):
        self.depth = 0
        self.tracing: Any = None
        self.costing = False
        self.in_np = False
        self.blocking = False


class Ledger:
    """Cumulative counters (each part adds to its own ones) and the events since the last record."""

    def __init__(self, lines: bool):
        self.lines = lines  # attribution on: events carry the user's line
        self.compiles = 0
        self.compile_time = 0.0
        self.cached = 0
        self.execs = 0
        self.d2h = 0
        self.d2h_bytes = 0
        self.h2d = 0
        self.h2d_bytes = 0
        self.d2h_time = 0.0
        self.flops = self.bytes = self.trans = 0.0  # the cost of the programs the top-level calls ran (roofline)
        self.uncosted = 0
        self.launch = 0.0
        self.queue = 0.0
        self.own = 0.0
        self.call_cpu = 0.0
        self.blocked = 0.0
        self.cpu = TRAINING.cpu  # the training thread's CPU clock (training_thread.py)
        self.events: list[Event] = []

    def snapshot(self) -> Counts:
        """The counters now (twice per step)."""
        return self.snapshot_at(time.perf_counter(), self.cpu())

    def snapshot_at(self, t: float, cpu: float) -> Counts:
        """The counters now, with clocks the caller just read on the training thread (a jitted call's end: no
        second reading of each). tuple.__new__ skips the named tuple's Python-level __new__."""
        return _new(Counts, (self.compiles, self.compile_time, self.cached, self.execs, self.d2h, self.d2h_bytes,
                             self.h2d, self.h2d_bytes, t, self.d2h_time, self.flops, self.bytes,
                             self.trans, self.uncosted, self.launch, self.queue, self.own, cpu,
                             self.call_cpu, self.blocked, TRAINING.ident))

    def event(self, kind: str, loc: Location | None, detail: Any) -> None:
        """One event per line and kind per step (repeats add up in its `transfers`), at most 16 a step. `detail`:
        the kind's typed evidence (records.EVIDENCE)."""
        self.add(Event(kind, loc, detail))

    def add(self, event: Event) -> None:
        """`event` as event() takes it. Never changed in place: a steady loop's records share one (transfers.py),
        so a repeat at the same line makes a new one that adds up both."""
        events = self.events
        if len(events) >= MAX_EVENTS_PER_STEP and sum(e.kind != "compile" for e in events) >= MAX_EVENTS_PER_STEP:
            return
        kind, loc = event.kind, event.location
        for i, e in enumerate(events):
            if e.kind == kind and e.location == loc and kind != "compile":
                detail, more = e.detail, event.detail
                changes = {"transfers": detail.transfers + more.transfers}
                seconds = getattr(more, "seconds", None)
                if seconds is not None and getattr(detail, "seconds", None) is not None:
                    changes["seconds"] = detail.seconds + seconds  # eager uploads: their time adds up too
                events[i] = Event(kind, loc, replace(detail, **changes))
                return
        events.append(event)

    def take(self, n: int | None = None) -> list[Event]:
        """The events so far (or the first `n`), removed; the rest stay. No events: the list that all records
        without any share (records.EMPTY: a step on device-resident data keeps no list of its own)."""
        events = self.events
        if not events:
            return EMPTY  # (the ledger keeps its empty list)
        if n is None or n >= len(events):  # all of them (every step): the list itself, a new one for the next
            self.events = []
            return events
        out, self.events = events[:n], events[n:]
        return out or EMPTY

    def add_cost(self, cost: Any) -> None:
        """The program a top-level call ran: its cost (hlo_cost.GraphCost), or None when unknown."""
        if cost is not None and cost.flops is not None:
            self.flops += cost.flops
            self.bytes += cost.bytes_accessed or 0.0
            self.trans += cost.transcendentals or 0.0
        else:
            self.uncosted += 1


def record(prev: Counts, now: Counts, events: list[Event], site: Location | None, phase: str | None) -> StepRecord:
    """The step between two snapshots. What a steady step's record holds is shared with the others where equal
    (its transfer counts, its empty lists: records.Shared): fewer objects kept per step, fewer full collections."""
    execs = now.execs - prev.execs
    rec = StepRecord(index=0, wall_time_s=max(now.t - prev.t, 0.0), site=site,
                     compiles=now.compiles - prev.compiles,
                     compile_time_s=max(now.compile_time - prev.compile_time, 0.0),
                     cached_compiles=now.cached - prev.cached, executions=execs,
                     device_to_host=_transfers(now.d2h - prev.d2h, now.d2h_bytes - prev.d2h_bytes),
                     host_to_device=_transfers(now.h2d - prev.h2d, now.h2d_bytes - prev.h2d_bytes),
                     events=events, phase=phase, graph_hashes=EMPTY, boundaries=EMPTY, hot_lines=EMPTY,
                     device_to_host_time_s=max(now.d2h_time - prev.d2h_time, 0.0),
                     launch_time_s=max(now.launch - prev.launch, 0.0),
                     queue_wait_s=max(now.queue - prev.queue, 0.0),
                     own_time_us=max(now.own - prev.own, 0.0) * 1e6,
                     device_wait_s=max(now.blocked - prev.blocked, 0.0),
                     # settled on another thread since `prev` (the first boundary): that thread's CPU from its start
                     host_cpu_s=max((now.cpu - (prev.cpu if prev.thread == now.thread else 0.0)) -
                                    (now.call_cpu - prev.call_cpu), 0.0))
    if not execs or now.uncosted == prev.uncosted:  # every call's program cost known (or no call): the sum
        rec.flops, rec.bytes_accessed = now.flops - prev.flops, now.bytes - prev.bytes
        rec.transcendentals = now.trans - prev.trans
    return rec


def _transfers(count: int, nbytes: int) -> Transfers:
    """One Transfers per (count, bytes) for all records (never changed in place: fold.py changes its copies)."""
    t = _TRANSFERS.get((count, nbytes))
    if t is None:
        if len(_TRANSFERS) >= 1024:  # a run whose bytes vary every step: bounded
            _TRANSFERS.clear()
        t = _TRANSFERS[count, nbytes] = Transfers(count, nbytes)
    return t
