"""The step boundary: every `torch_xla.sync()` / `xm.mark_step()` ends in `torch_xla._XLAC._xla_step_marker`;
`Marker` wraps that one binding, tells the user's boundaries from the syncs torch_xla.compile and the openxla
bridge make for themselves, and times the sync. `Recorder` turns two counter snapshots into a step's record, and
`TimeParts` splits its time into launch, device wait and host CPU (breakdown.py)."""
from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable

import torch

from ...model.faults import FAULTS, check
from ...frames import user_frame
from ...model.records import Event, Location, StepRecord, Transfers
from ..sampler import FRAMES
from ...model.training_thread import TRAINING
from ._private import X
from .counters import Snapshot, counter, eager_mode, launches, metric, since
from .training_calls import TrainingCalls, not_traced

_CALLERS: dict[int, tuple[str, Any]] = {}  # id(code) -> (its kind, the code, kept alive so the id stays its own)
_COMPILE_FRAMES = ("_compile", "_clear_pending_ops_before_compile")


def caller_kind(code) -> str:
    """What the code that called torch_xla.sync() is: torch_xla.compile's `_compile` or
    `_clear_pending_ops_before_compile`, "dynamo" (the openxla bridge), or "lazy" (anyone else). Once per code."""
    hit = _CALLERS.get(id(code))
    if hit is None:
        path = code.co_filename.replace(os.sep, "/")
        if code.co_name in _COMPILE_FRAMES and path.endswith("torch_xla/torch_xla.py"):
            what = code.co_name
        else:
            what = "dynamo" if "/torch_xla/_dynamo/" in path else "lazy"
        hit = _CALLERS[id(code)] = (what, code)
    return hit[0]


def sync_caller(frame) -> tuple[str, bool]:
    """Who called torch_xla.sync() (`frame` is the marker's caller: sync itself, or another wrapper of the binding):
    torch_xla.compile / torch_xla.step (its `_compile` region), torch.compile's openxla bridge, or anyone else; and
    whether eager mode was on in the stretch of the program this sync ends. `_compile` turns eager mode off for its
    region and keeps the user's setting in a local: its first sync (clearing what ran before the region) ends a
    stretch in the user's mode, its last sync ends the region, traced lazily."""
    caller = frame.f_back if frame is not None and frame.f_code.co_name == "sync" else None
    if caller is None:
        return "lazy", eager_mode()
    what = caller_kind(caller.f_code)
    if what in _COMPILE_FRAMES:
        region = caller.f_back if what == "_clear_pending_ops_before_compile" else None
        eager = bool(region.f_locals.get("saved_eager_mode_status")) if region is not None else False
        return "torch_xla.compile", eager
    return what, eager_mode()


@dataclass(slots=True)
class Sync:
    """One user boundary's sync, as the marker measured it (slots: one is made per boundary)."""

    frame: Any  # the marker's caller (live holders are searched from here)
    site: Location | None
    eager: bool
    grad: bool
    in_sync: float  # wall seconds in the real marker
    cpu_in_sync: float  # the main thread's CPU seconds in it
    cpu_now: float
    uncached0: int  # UncachedCompile before the sync
    launches0: int
    not_early: int  # launches since the last boundary that ran no pending lazy graph early
    span: tuple[float, float] | None = None  # perf_counter around the real marker (device_time.py: the busy time in it)


class Marker:
    """The wrapper of `_xla_step_marker`. `before(site)` runs ahead of the real sync (graph capture needs the pending
    graph), `after(sync, prepared)` after it, and returns the boundary's record, whose own time is set here."""

    def __init__(self, training: TrainingCalls, before: Callable, after: Callable[..., StepRecord]):
        self.training = training
        self._before, self._after = before, after
        self.callers: set[str] = set()  # who cut the graphs: "lazy" | "torch_xla.compile" | "dynamo" (| "eager")
        self.real: Callable | None = None
        self.snap: Callable[[], Snapshot] | None = None  # the last boundary's snapshot (Recorder.snap)
        self._in_marker = False
        self._real_state, self._real_out = 0, None  # the real sync: 0 not called, 1 raised, 2 returned
        self.dynamo_graphs = 0  # torch.compile graphs run since the last boundary (loop_boundary)
        # the periodic boundary (count_graph): the first compiled graph since the last boundary, the optimizer
        # steps counted at that boundary, and what turns the rule off for the run (a loop that syncs after its
        # compiled graphs; a DataLoader's next() that ended a batch: loop_boundary)
        self.first_graph: Any = None
        self.opt_mark = 0
        self.syncs_after_graphs = False
        self.loader_cut = False
        self.not_early = 0  # graph launches since the last boundary that ran no pending lazy graph early
        self.eager_outside: tuple[int, float] | None = None  # eager mode: (ops, seconds) before the compiled step
        self.left_at = 0.0  # when the last boundary's own work ended
        self.gate_wait = 0.0  # the last real sync's wait for a sample under way (sampler.FrameGate)

    def install(self, snap: Callable[[], Snapshot]) -> None:
        self.snap = snap
        self.real = X._xla_step_marker
        not_traced(Marker.wrapper, Marker._sync, Marker._step, Marker._call_real, Marker.loop_boundary,
                   Marker.count_graph)
        X._xla_step_marker = self.wrapper

    def uninstall(self) -> None:
        if self.real is not None:
            X._xla_step_marker = self.real
            self.real = None

    def count_graph(self, graph: Any = None, frame=None) -> None:
        """torch.compile is about to run one of its graphs (`graph`: the openxla bridge's hash of it) outside any
        sync: not a pending graph run early. In a loop that never syncs and pulls no batch from a DataLoader (a
        plain list or generator of batches), the compiled step's graphs run in the same order at every iteration:
        when the first graph since the last boundary is about to run again after an optimizer step, the iteration
        before ended here (a periodic boundary, which syncs nothing). Graph breaks inside the compiled function
        only add graphs to the sequence; a compiled model called more than once per iteration (micro-batches,
        a compiled block per layer) repeats its graph with no optimizer step between, and is no boundary."""
        if (graph is not None and self.dynamo_graphs and graph == self.first_graph and not self._in_marker
                and not self.syncs_after_graphs and not self.loader_cut
                and self.training.optimizer_steps != self.opt_mark):
            self._step(frame, False, time.perf_counter(), None, None)
        if not self.dynamo_graphs:
            self.first_graph = graph
        self.not_early += 1
        self.dynamo_graphs += 1

    def wrapper(self, *args, **kwargs):
        """The user's sync. Our code around it may fail (faults.py): the real sync still runs exactly once and its
        result is returned; the sync's own exception goes on unchanged."""
        if self._in_marker:  # re-entrant (a callback that syncs): not another step
            return self.real(*args, **kwargs)
        self._real_state = 0
        try:
            check("torch_xla.sync")
            return self._sync(sys._getframe(1), args, kwargs)
        except Exception as exc:
            if self._real_state == 1:
                raise  # the sync itself raised: the user's error, as in the plain run
            FAULTS.record("torch_xla.sync", exc)
            return self._real_out if self._real_state == 2 else self.real(*args, **kwargs)
        finally:
            self._real_out = None

    def _call_real(self, args: tuple, kwargs: dict):
        # the sync takes every live XLA tensor with pending IR as an output: while it runs, the stack sampler holds
        # no frame (one it held would keep a returned call's tensors alive: an extra output, another graph). Waits
        # for a sample under way (tens of microseconds), never for another thread's sync (sampler.FrameGate)
        t = time.perf_counter()
        counted = FRAMES.sync_begins()
        self.gate_wait = time.perf_counter() - t  # ours, not the sync's: _step moves it to our own time
        try:
            self._real_state = 1
            out = self.real(*args, **kwargs)
            self._real_state, self._real_out = 2, out
            return out
        finally:
            if counted:
                FRAMES.sync_ends()

    def _sync(self, frame, args: tuple, kwargs: dict):
        t0 = time.perf_counter()  # own time: from here, less the real marker call
        caller, eager = sync_caller(frame)
        self.callers.add(caller)
        if eager:
            self.callers.add("eager")  # eager mode was on for a stretch (a recipe may turn it off at the end)
        if caller == "dynamo":  # the openxla bridge syncs while it compiles a graph: not the user's step boundary
            launches0 = launches()
            result = self._call_real(args, kwargs)
            self.not_early += since(launches(), launches0)
            return result
        if caller == "torch_xla.compile" and eager:
            # torch_xla.compile's first sync, in eager mode: there is no pending graph to clear, and what launched
            # since the last boundary were eager ops, one by one by design. The region's last sync is the boundary.
            t = time.perf_counter()
            result = self._call_real(args, kwargs)
            snap = self.snap()
            eager_ops = since(launches(), snap.launches)
            self.not_early = max(self.not_early, eager_ops)
            # the loop outside the compiled step (eager_ops rule), from when the last boundary's own work ended
            self.eager_outside = (eager_ops, t - max(snap.t, self.left_at))
            return result
        return self._step(frame, eager, t0, args, kwargs)

    def _step(self, frame, eager: bool, t0: float, args: tuple | None, kwargs: dict | None):
        """One step boundary: our work before, the real sync (`args` None: a loop boundary, which syncs nothing),
        our work after. (Plain arguments, no closure: dynamo skips this code object, not_traced.)"""
        self._in_marker = True
        try:
            site, _ = user_frame(frame)
            prepared = self._before(site)
            grad = torch.is_grad_enabled()
            uncached0 = counter("UncachedCompile")
            launches0 = uncached0 + counter("CachedCompile")
            if not TRAINING.settled:  # the first boundary: the thread that syncs trains (training_thread.py)
                TRAINING.settle()
            c1 = self.training.cpu()
            t1 = time.perf_counter()
            result = self._call_real(args, kwargs) if args is not None else None
            t2 = time.perf_counter()
            if args is not None:
                t1 = min(t1 + self.gate_wait, t2)  # a wait for the sampler's sample (FrameGate): our own time
            c2 = self.training.cpu() if args is not None else c1
            if args is not None and self.dynamo_graphs:  # the loop syncs after its compiled graphs: its syncs
                self.syncs_after_graphs = True  # are its steps (count_graph's periodic rule is off from here)
            not_early, self.not_early, self.dynamo_graphs = self.not_early, 0, 0
            self.first_graph, self.opt_mark = None, self.training.optimizer_steps
            rec = self._after(Sync(frame, site, eager, grad, t2 - t1, c2 - c1, c2, uncached0, launches0, not_early,
                                   (t1, t2) if args is not None else None), prepared)
            self.left_at = time.perf_counter()
            rec.own_time_us = ((t1 - t0) + (self.left_at - t2)) * 1e6
            return result
        finally:
            self._in_marker = False

    def loop_boundary(self, frame) -> None:
        """A loop that never syncs (torch.compile's training step, called once per batch: dynamo's graphs run
        outside any sync): the DataLoader's next() after a batch whose compiled graphs ran with no sync since is
        that batch's step boundary. A loop that syncs resets the count at its sync, and gets no second boundary."""
        if self.dynamo_graphs and not self._in_marker:
            self.loader_cut = True  # the loader's batches are the steps (count_graph's periodic rule is off)
            self._step(frame, False, time.perf_counter(), None, None)

    def take_eager_outside(self, rec: StepRecord) -> None:
        if self.eager_outside is not None:
            (rec.eager_launches, rec.eager_time_s), self.eager_outside = self.eager_outside, None


class Recorder:
    """Counter snapshots -> one StepRecord per boundary. Owns the last snapshot, the compile-time total, the latest
    record (its closures' reads come after it) and the events waiting for the next record."""

    def __init__(self, training: TrainingCalls):
        self.training = training
        self.snap: Snapshot | None = None
        self.last: StepRecord | None = None
        self.events: list[Event] = []  # made since the last boundary (attribution): the next record's
        self._compile_total = 0.0
        self._data_site_sent = False  # the loader line, sent once as a data_wait event

    def start(self) -> Snapshot:
        self.snap = Snapshot(None, self.training)
        self._compile_total = metric("CompileTime")[1] / 1e9
        return self.snap

    def events_sink(self, event: Event) -> None:
        self.events.append(event)

    def now(self) -> Snapshot:
        return Snapshot(self.snap, self.training)

    def record(self, index: int, site: Location | None, now: Snapshot) -> StepRecord:
        prev = self.snap
        self.snap = now
        compiles = since(now.uncached, prev.uncached)
        cached = since(now.cached, prev.cached)
        closure = now.closure_d2h - prev.closure_d2h  # reads in the previous boundary's closures: that step's
        if closure and self.last is not None:
            self.last.closure_reads += closure
        # one constructor call with every field it can take (each boundary makes one)
        rec = StepRecord(
            index=index, wall_time_s=now.t - prev.t, site=site, compiles=compiles, cached_compiles=cached,
            executions=compiles + cached, compile_time_s=self._compile_time_delta() if compiles else 0.0,
            device_to_host=Transfers(max(0, now.d2h - prev.d2h - closure), int(now.d2h_bytes - prev.d2h_bytes)),
            device_to_host_time_s=(now.d2h_ns - prev.d2h_ns) / 1e9 if now.d2h != prev.d2h else 0.0,
            backward_calls=now.backward - prev.backward, optimizer_steps=now.opt - prev.opt,
            host_to_device=Transfers(since(now.h2d, prev.h2d), None),
            live=(now.live, None) if index >= 0 else None)
        if self.training.data_seen:  # the loop pulls from a loader: its wait for each batch (session.data_wait()
            rec.data_wait_s = now.data_wait - prev.data_wait  # overrides where the program times it itself)
            if not self._data_site_sent and self.training.data_site is not None:
                self._data_site_sent = True
                self.events.append(Event("data_wait", self.training.data_site, {"call": self.training.data_call}))
        if now.fallbacks is not prev.fallbacks:  # the same dict: no counter was read again (no host transfer)
            for name, value in now.fallbacks.items():
                if value != prev.fallbacks.get(name, 0) and since(value, prev.fallbacks.get(name, 0)):
                    rec.fallback_ops[name] = since(value, prev.fallbacks.get(name, 0))
        if self.events:
            rec.events, self.events = self.events, []
        if index >= 0:
            self.last = rec
        return rec

    def _compile_time_delta(self) -> float:
        total = metric("CompileTime")[1] / 1e9
        delta, self._compile_total = total - self._compile_total, total
        return max(delta, 0.0)


class TimeParts:
    """Launch, device wait and host CPU of a boundary (breakdown.py). In the sync call, the main thread's CPU
    time is launching (tracing the pending graph's hash, lowering, launching) and the rest is blocked: waiting
    for the device to finish the previous graph (torch_xla holds the device lock until it has; at most that
    graph's execution time, device_time.py); a sync that compiled is launch net of its compile time. The time
    blocked in an explicit `xm.wait_device_ops()` since the previous sync is device wait too. Host: the main
    thread's CPU since the previous sync, outside this one, those waits and the loader's next()."""

    def __init__(self, training: TrainingCalls):
        self.training = training
        self._cpu_mark = 0.0  # the training thread's CPU clock after the previous boundary's sync
        self._thread = None  # ...and which thread that was (training_thread.py)
        self._data_cpu_mark = 0.0
        self._wait_mark = (0.0, 0.0)  # the device wait and its CPU time at the previous boundary
        self.explicit_wait = 0.0  # the last split's time in xm.wait_device_ops() (part of its device wait)

    def start(self) -> None:
        self._cpu_mark, self._thread = self.training.cpu(), TRAINING.ident

    def split(self, rec: StepRecord, sync: Sync, sync_compiles: int) -> None:
        in_sync = sync.in_sync
        cpu_in_sync = min(max(sync.cpu_in_sync, 0.0), in_sync)
        if sync_compiles and rec.compiles:
            compile_s = rec.compile_time_s * min(1.0, sync_compiles / rec.compiles)
            rec.launch_time_s, rec.device_wait_s = max(in_sync - compile_s, 0.0), 0.0
        else:
            rec.launch_time_s, rec.device_wait_s = cpu_in_sync, in_sync - cpu_in_sync
        data, device = self.training.data, self.training.device
        data_cpu = data.cpu - self._data_cpu_mark + device.cpu - self._wait_mark[1]
        self.explicit_wait = device.wait - self._wait_mark[0]
        rec.device_wait_s += self.explicit_wait
        self._data_cpu_mark, self._wait_mark = data.cpu, (device.wait, device.cpu)
        if self._thread != TRAINING.ident:  # settled on another thread since the mark: its CPU from its start
            self._cpu_mark, self._thread = 0.0, TRAINING.ident
        rec.host_cpu_s = max(sync.cpu_now - self._cpu_mark - cpu_in_sync - data_cpu, 0.0)
        self._cpu_mark = sync.cpu_now
