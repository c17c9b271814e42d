"""Step boundaries. `jax.profiler.StepTraceAnnotation` exits are boundaries when the code uses them; otherwise the
step function is the jitted function called again from the same line that computes gradients (a backward pass
traced in it; with none: the one called most whose arrays change between calls), not a generation or evaluation
step called first; each of its calls starts a step. The loop that trains is the loop that counts: when the step
function trains in a loop on another line (called there again, computing gradients, on what the calls since
returned: a warm-up loop, then the timed loop), its line moves there; a call from elsewhere that does not
(an evaluation on the test set) is evaluation. Until it is known, each top-level call keeps a segment
(counters, events), and the steps are cut from them once it is."""
from __future__ import annotations

import sys
import weakref
from operator import is_
from collections import Counter
from typing import Any, Callable

import jax
import numpy as np

from ...frames import USER, classify, user_frame
from ...model.records import EMPTY, Location, Shared, StepRecord
from . import _private as P
from .jitted import JitInfo
from .ledger import Counts, Ledger, Scope, record

_READER_FALLBACK = 1000  # calls from one line of a function that computes no gradients (no training step seen):
#                          then the loop is not training (inference, a benchmark): its repeated function is the
#                          step. Long enough that an evaluation loop run before training is not taken for it
_MAX_UNDECIDED = 4096  # top-level calls kept while no step function is known
_UNFED = 16  # calls from one line of a function that computes gradients, never fed what the calls before it
#              returned: the step all the same (its state kept where we do not see it)
_MAX_FED = 1024  # outputs kept while a run of the step function on another line is watched


class Candidates:
    """Step inference until the step function is known: one segment per top-level jitted call (Counts at its
    start, the events before it, the function's identity, its line), and per (identity, file, line) its calls."""

    def __init__(self):
        self.forget()

    def forget(self) -> None:
        self.pre: list[tuple] = []
        self.calls: dict[tuple, list[int]] = {}
        self.ins: dict[tuple, list] = {}  # its inputs at its last call (id, weakref, bytes)
        self.end: dict[tuple, tuple] = {}  # (call index, Counts, events so far) when its last call returned
        self.order: list[tuple] = []  # keys in the order they were called a second time (the fallback)
        self.fns: dict[tuple, JitInfo] = {}
        self.changed: set = set()  # keys whose arrays changed between two calls (state carried by the loop)
        self.outs: dict[int, list] = {}  # call index -> weak refs to what it returned
        self.current: tuple | None = None

    def add(self, key: tuple, fn: JitInfo, start: Counts, events: list, site, args: tuple, kwargs: dict
            ) -> list[int]:
        """A top-level call begins a segment; returns the indices of the calls of its key so far."""
        index = len(self.pre)
        self.pre.append((start, events, fn.key, site))
        self.current = key
        calls = self.calls.setdefault(key, [])
        calls.append(index)
        self.fns.setdefault(key, fn)
        previous, now = self.ins.get(key), _fingerprint(args, kwargs)
        self.ins[key] = now
        if len(calls) == 2:
            self.order.append(key)
        if len(calls) >= 2 and _changed(previous, now):
            self.changed.add(key)
        return calls

    def fed(self, key: tuple, args: tuple, kwargs: dict) -> bool:
        """The key's call now takes an array that a call since its previous one returned (the state the loop
        carries: a training loop's, not an evaluation's over fixed parameters)."""
        calls = self.calls[key]
        outs = [self.outs[i] for i in range(calls[-2], calls[-1]) if i in self.outs]
        if not outs:  # nothing was kept (our after-call stage failed): not a reason to wait
            return True
        return _fed([r for refs in outs for r in refs], args, kwargs)

    def fallback(self, grad_fns: set = frozenset()) -> tuple:
        """Of the keys called again from one line: those of functions that compute gradients if any, else
        those whose arrays changed between calls (the state the loop carries) if any; the one called most (the
        main loop, not the warm-up before it), the first called again among equals."""
        keys = ([k for k in self.order if k[0] in grad_fns] or [k for k in self.order if k in self.changed]
                or self.order)
        return max(keys, key=lambda k: len(self.calls[k]))


class Steps:
    """Owns the step state: how steps are found, the mark of the step in progress, and the evaluation intervals
    between steps. `emit` hands each record to the session."""

    def __init__(self, ledger: Ledger, scope: Scope, notes: list[str],
                 on_record: Callable[[StepRecord, int, Any, bool], None]):
        self._ledger = ledger
        self._scope = scope
        self._notes = notes
        self._on_record = on_record  # (record, its boundary's number, the frame that saw it, whether its boundary
        #                              is now): adapter.py
        self.detection = "no step found yet"
        self.count = 0  # boundaries so far
        self._annotated = False
        self._step_fn: JitInfo | None = None
        self._step_key: tuple | None = None
        self._cand = Candidates()
        self._grad_fns: set = set()  # identities of functions that traced a backward pass (compute gradients)
        self._grad_calls: set = set()  # (identity, static arguments) of the programs traced with one
        self._calling: tuple | None = None  # (fn, args, kwargs) of the top-level call in progress
        self._moved = False  # the step function's line moved (steps.py docstring); said once in `detection`
        self._run: tuple | None = None  # (file, line) of a training call of the step function from another
        #                                 line, and weak refs to what the top-level calls since it returned
        self._members: set = set()  # other functions called once or twice in each iteration: phases of it
        self._mark: Counts | None = None  # counters at the last boundary; None before the first step
        self._mark_site: Location | None = None
        self._site_cache: tuple = (None, None)
        self.in_other = False  # between steps, other jitted functions ran (evaluation): an eval interval is open
        self._ann_depth = 0
        self._step_open = False  # a step began (its function was called) and its record is not emitted yet
        self._last_call_end: tuple | None = None  # (snapshot, events so far) when the step function last returned
        self._last_reads: list = []  # the lines that read to the host in the last emitted step
        self._last_events: list = EMPTY  # its events (records.Shared): the next step's when they are the same

    # --- records ------------------------------------------------------------------------------------------
    def emit(self, site: Location | None, phase: str | None = "train", now: Counts | None = None,
             current: bool = True) -> None:
        """The record of the step that ended at `now` (default: this moment). `current`: its boundary is this
        moment, so what the program holds now is what it held there (the live-array sample); False for a record
        cut later (a backlog cut once the step function is known, the last step ended at the session's end)."""
        led = self._ledger
        prev, now = self._mark, now or led.snapshot()
        self._mark = now
        events, last = led.take(), self._last_events
        if events is not EMPTY:
            if len(events) == len(last) and all(map(is_, events, last)):
                events = last  # the very events of the step before (a steady loop's batch): its list, shared
            else:
                self._last_events = events = Shared(events)
                self._last_reads = [e.location for e in events if e.kind == "device_to_host_sync"]
        elif last:
            self._last_events, self._last_reads = EMPTY, []
        rec = record(prev, now, events, site or self._mark_site, phase)
        self._mark_site = site
        n, self.count = self.count, self.count + 1
        self._on_record(rec, n, sys._getframe(1), current)

    def _open_other(self) -> None:
        """Another jitted function ran at top level between steps (evaluation, metrics): the training step ends
        here and an evaluation interval begins; it ends where the next step begins."""
        self.emit(self._mark_site, "train")
        self.in_other = True
        self._step_open = False

    def _close_other(self) -> None:
        self.emit(self._mark_site, "eval")
        self.in_other = False

    # --- hooks' entry points --------------------------------------------------------------------------------
    def backward_pass(self) -> None:
        """A backward pass is being traced: inside a top-level jitted call, that function computes gradients."""
        if self._scope.depth and self._scope.tracing is not None:
            self._grad_fns.add(self._scope.tracing)
            calling = self._calling
            if calling is not None and calling[0].key == self._scope.tracing:
                self._grad_calls.add((calling[0].key, _statics(*calling)))

    def annotation_enter(self) -> None:
        if self._scope.depth:
            return
        if not self._annotated:
            self._annotation_start()
        self._ann_depth += 1
        if self.in_other:  # an evaluation interval ends where the next annotated step begins
            self._close_other()

    def annotation_exit(self, frame, ok: bool) -> None:
        if self._scope.depth:
            return
        self._ann_depth = max(0, self._ann_depth - 1)
        if ok and self._annotated:  # a block that raised is not a finished step
            self.emit(user_frame(frame)[0])

    def _annotation_start(self) -> None:
        self._annotated = True
        self.detection = "jax.profiler.StepTraceAnnotation: each annotated block is one step"
        if self._mark is not None and self._step_fn is not None:
            self._notes.append("steps were inferred from a jitted function until the first "
                               "StepTraceAnnotation; annotations are used from then on")
        self._step_fn = None
        self._cand.forget()
        if self._mark is None:  # step 0 starts where the first annotated block does
            self._mark = self._ledger.snapshot()
            self._ledger.take()  # what happened before the first step is not a step's

    def before_call(self, fn: JitInfo, frame, args: tuple, kwargs: dict) -> None:
        """A top-level jitted call is about to run."""
        self._calling = (fn, args, kwargs)  # what a backward pass traced inside it belongs to (cleared after it)
        if fn.library and classify(frame.f_code.co_filename) != USER:
            pass  # called by a library on the user's behalf: part of whatever the user's loop is doing
        elif self._step_fn is not None and not self._annotated:
            self._known_step(fn, frame, args, kwargs)  # (_maybe_step's first case: every call once it is known)
        elif not self._annotated:
            self._maybe_step(fn, frame, args, kwargs)
        elif not self._ann_depth and not self.in_other and self._mark is not None:
            self.in_other = True  # a jitted call between annotated steps: evaluation until the next step

    def after_call(self, fn: JitInfo, out: Any = None, end: tuple | None = None) -> None:
        """It returned: where the step (or the candidate's segment) would end if no further call came. `end`: the
        call's end as the caller read it on the training thread (perf_counter, thread_time), else read here."""
        cand, self._calling = self._cand, None
        if self._run is not None and len(self._run[1]) < _MAX_FED:
            self._run[1].extend(_refs(out))
        if (fn is self._step_fn or fn.same_function(self._step_fn)) and not self.in_other:
            led = self._ledger
            self._last_call_end = (led.snapshot() if end is None else led.snapshot_at(*end), len(led.events))
        elif self._step_fn is None and cand.current is not None and cand.pre:
            led = self._ledger
            cand.end[cand.current] = (len(cand.pre) - 1, led.snapshot() if end is None else led.snapshot_at(*end),
                                      len(led.events))
            cand.outs[len(cand.pre) - 1] = _refs(out)

    # --- inferred steps ---------------------------------------------------------------------------------------
    def _maybe_step(self, fn: JitInfo, frame, args: tuple, kwargs: dict) -> None:
        """A top-level call of a jitted function: maybe a step boundary (inferred steps)."""
        if self._step_fn is not None:
            self._known_step(fn, frame, args, kwargs)
            return
        # no step function yet: each top-level call starts a segment (the counters at its start, the events
        # since the previous one), so that the steps can be cut once the step function is known
        cand = self._cand
        site = user_frame(frame)[0]
        key = (fn.key, site.file, site.line) if site else (fn.key, "?", 0)
        if len(cand.pre) >= _MAX_UNDECIDED:
            if cand.order:  # a long loop of calls that never changed their inputs: it is the loop
                best = cand.fallback(self._grad_fns)
                why = "it computes gradients" if best[0] in self._grad_fns else "no jitted function computes gradients"
                self._decide(best, f"called repeatedly from one line; {why}")
                return self._maybe_step(fn, frame, args, kwargs)
            cand.forget()
        calls = cand.add(key, fn, self._ledger.snapshot(), self._ledger.take(), site, args, kwargs)
        if len(calls) < 2:
            return
        if fn.key in self._grad_fns:
            if len(calls) >= _UNFED or cand.fed(key, args, kwargs):  # else maybe an evaluation loop (one
                # that computes gradients too) over fixed parameters before the training loop's second call
                self._decide(key, "called again from one line and computes gradients (a backward pass is traced "
                                  "in it)", fn, at_call=True)
        elif len(calls) >= _READER_FALLBACK:
            best = cand.fallback()
            self._decide(best, f"called {len(calls)} times from one line and no jitted function computes gradients",
                         at_call=best == key)

    def _known_step(self, fn: JitInfo, frame, args: tuple, kwargs: dict) -> None:
        """The step function is known: its call from its line starts a step; when it trains in a loop on another
        line, its line moves there; other calls open evaluation."""
        if fn is not self._step_fn and not fn.same_function(self._step_fn):
            if not self.in_other and fn.key in self._members:
                return  # a phase of the iteration: its second jitted call (grads, then the update)
            if fn.key in self._grad_fns and self._step_fn.key not in self._grad_fns:
                self._to_training(fn, frame)  # training after a loop of a function that computes none
            elif not self.in_other and self._step_open:
                self._open_other()
                return
            else:
                return
        key = (frame.f_code, frame.f_lineno)
        if key == self._site_cache[0]:
            site = self._site_cache[1]
        else:
            site = user_frame(frame)[0]
            if classify(frame.f_code.co_filename) == USER:  # called straight from user code: cacheable
                self._site_cache = (key, site)
        if site is not None and (site.file, site.line) != self._step_key:
            if not self._loop_moved(fn, site, args, kwargs):
                if not self.in_other and self._step_open:
                    self._open_other()  # the step function called from elsewhere (evaluation)
                return
            self._move(site)  # a training loop on another line: the loop that trains now (after a warm-up)
            if self.in_other:  # the run's first call opened an evaluation interval: it was a training step
                self.in_other, self._step_open = False, True
        elif self._run is not None:
            self._run = None  # its own line came back: a run of calls elsewhere is over
        if self.in_other:
            self._close_other()
        elif self._step_open:
            self.emit(site)
        self._step_open = True

    def _loop_moved(self, fn: JitInfo, site: Location, args: tuple, kwargs: dict) -> bool:
        """A call of the step function from another line: the training loop runs there now when this call
        computes gradients and takes what the calls since this line's previous call returned (the state the
        loop carries; its own line not called in between). One call per epoch on the test set (Flax's
        `apply_model`, which computes gradients too), or an evaluation loop over fixed parameters, is not."""
        if not self._trains(fn, args, kwargs):
            return False
        here, run = (site.file, site.line), self._run
        if run is not None and run[0] == here and _fed(run[1], args, kwargs):
            self._run = None
            return True
        self._run = (here, [])  # after_call keeps what the calls until its next call return
        return False

    def _trains(self, fn: JitInfo, args: tuple, kwargs: dict) -> bool:
        """This call's program computes gradients (traced with a backward pass, its static arguments as now)."""
        return bool(self._grad_calls) and (fn.key, _statics(fn, args, kwargs)) in self._grad_calls

    def _move(self, site: Location) -> None:
        """The step function trains in a loop on another line now (a warm-up loop, then the timed loop; a
        second training loop): its calls there are the steps from here. The calls before stay steps: they
        trained (dropping the warm-up's would hide iterations that updated the state; torch_xla counts every
        iteration the same way), and the ones that compiled are warm-up steps, out of the steady statistics."""
        self._step_key = (site.file, site.line)
        if not self._moved:
            self._moved = True
            self.detection += f"; the training loop moved to {site.short()} (its calls there are steps too)"

    def _to_training(self, fn: JitInfo, frame) -> None:
        """The step function was decided without gradients (a long evaluation or inference loop) and a function
        that computes them is called again at top level: training began; its calls are the steps from here."""
        site = user_frame(frame)[0]
        old = self._step_fn.name if self._step_fn is not None else "?"
        self._notes.append(f"the {self.count} steps before training began are calls of {old}, which computes no "
                           f"gradients; from there on the steps are calls of {fn.name}, which does")
        self._step_fn, self._step_key, self._members = fn, (site.file, site.line) if site else ("?", 0), set()
        if self.in_other:  # its first call opened an evaluation interval: that call was the first training step
            self.in_other, self._step_open = False, True
        self.detection = (f"inferred: the jitted function {fn.name} at {site.short() if site else '?'}, called "
                          "again and computes gradients (after a loop of one that computes none); each call "
                          "starts a step")

    def _decide(self, key: tuple, why: str, fn: JitInfo | None = None, end: tuple | None = None,
                at_call: bool = False) -> None:
        """`key`'s function is the step function: each of its calls from its line so far starts a step; the
        records of those steps are cut from the segments kept since the session started. Other functions called
        once or twice between its last two calls are phases of the iteration (a second jitted call per step),
        not evaluation. `end`: (call index, Counts, events) where its last call returned (at the end of the
        run: the last step ends there). `at_call`: its last call is the one being made (its step ends now)."""
        cand, led = self._cand, self._ledger
        calls, pre, current = cand.calls[key], cand.pre, led.take()
        site = pre[calls[-1]][3]
        fn = fn or cand.fns.get(key)
        self._step_fn, self._step_key = fn, key[1:]
        name = fn.name if fn is not None else "?"
        self.detection = (f"inferred: the jitted function {name} at {site.short() if site else '?'}, "
                          f"{why}; each call starts a step")
        if len(calls) >= 2:
            between = Counter(p[2] for p in pre[calls[-2] + 1:calls[-1]])
            self._members = {ident for ident, k in between.items() if k <= 2 and ident != key[0]}
        self._mark, self._mark_site = pre[calls[0]][0], site
        for a, b in zip(calls, calls[1:]):
            led.events = [e for p in pre[a + 1:b + 1] for e in p[1]]
            # only the step that ends at the call being made now ends now (the steps before it ended earlier)
            self.emit(site, now=pre[b][0], current=at_call and b == calls[-1])
        if end is not None:
            last, snap, n_events = end
            rest = [p[1] for p in pre[last + 1:]] + [current]
            led.events = rest[0][:n_events]
            self.emit(site, now=snap, current=False)
            led.events = rest[0][n_events:] + [e for evs in rest[1:] for e in evs]
            self._step_open = False
        else:
            led.events = []
            self._step_open = True
        cand.forget()

    # --- the end of the session -------------------------------------------------------------------------------
    def finish(self) -> None:
        """The last steps: decide from what was seen if nothing was decided, and end the open step."""
        cand = self._cand
        if self._step_fn is None and not self._annotated and cand.order:
            # no jitted function computed gradients (an inference loop, training outside jitted code): the one
            # called most from one line with new arrays each call (else the one called most) is the step; one
            # that computes gradients but was never fed its previous results: the one called most
            key = cand.fallback(self._grad_fns)
            self._decide(key, "called again from one line and computes gradients" if key[0] in self._grad_fns
                         else "called again from one line (no jitted function computes gradients)",
                         end=cand.end.get(key))
        if self._mark is None:
            return
        if self._step_fn is not None and self._step_open and self._last_call_end is not None:
            # inferred steps: a record is emitted when the next call begins; the last call's step ends where
            # that call returned, and what came after it (a final read, an evaluation) is trailing work
            end, n_events = self._last_call_end
            later = self._ledger.events[n_events:]
            end, n_events = self._loop_read_after(end, n_events, later)
            later = self._ledger.events[n_events:]
            self._ledger.events = self._ledger.events[:n_events]
            # the session ends after the program's loop (often after its function returned and dropped what it
            # held): a live count now is not this step's
            self.emit(None, phase="train", now=end, current=False)
            self._ledger.events = later
        elif self._step_fn is not None and self._step_open and self.in_other:
            self.emit(None, phase="eval", current=False)

    def _loop_read_after(self, end: Counts, n_events: int, later: list) -> tuple:
        """The loop's own read after the last call (the same line read in the step before, nothing run since)
        belongs to that last step, as it does under torch_xla: an every-step read reads "steps 0-29" on both
        backends. Its step ends where the read returned: the call's end plus the read's wait."""
        now = self._ledger.snapshot()
        if (not later or now.execs != end.execs or now.compiles != end.compiles
                or any(e.kind != "device_to_host_sync" or e.location not in self._last_reads for e in later)):
            return end, n_events
        wait = now.d2h_time - end.d2h_time
        return now._replace(t=end.t + wait, cpu=end.cpu, call_cpu=end.call_cpu, blocked=end.blocked), len(
            self._ledger.events)

    def tail(self) -> StepRecord | None:
        """What happened after the last boundary, when anything did (not a step)."""
        if self._mark is None:
            return None
        now = self._ledger.snapshot()
        rec = record(self._mark, now, self._ledger.take(), self._mark_site, None)
        self._mark = now
        busy = rec.compiles or rec.device_to_host.count or rec.executions or rec.host_to_device.count
        return rec if busy else None


def _statics(fn: JitInfo, args: tuple, kwargs: dict) -> tuple:
    """A call's static arguments, by parameter: what tells `step(..., train=True)` from `step(..., train=False)`,
    one jitted function and two programs. Unhashable: unknown."""
    nums, names = fn.static
    if not nums and not names:
        return ()
    names_of, pos = fn.varnames, {n: i for i, n in enumerate(fn.varnames)}
    found: dict = {}
    for i in nums:
        name = names_of[i] if i < len(names_of) else i
        found[name] = args[i] if i < len(args) else kwargs.get(name)
    for n in names:
        i = pos.get(n, len(args))
        found[n] = kwargs[n] if n in kwargs else args[i] if i < len(args) else None
    out = tuple(sorted(found.items(), key=lambda kv: str(kv[0])))
    try:
        hash(out)
    except TypeError:
        return (None,)
    return out


def _refs(out: Any) -> list:
    """Weak references to a call's output arrays."""
    refs = []
    for x in jax.tree_util.tree_leaves(out):
        if type(x) is P.ArrayImpl:
            try:
                refs.append(weakref.ref(x))
            except TypeError:
                pass
    return refs


def _fed(refs: list, args: tuple, kwargs: dict) -> bool:
    """Whether a call takes any of those arrays (still alive: a freed one's id reused is not the same)."""
    alive = {id(x) for x in (r() for r in refs) if x is not None}
    return bool(alive) and any(id(x) in alive for x in jax.tree_util.tree_leaves((args, kwargs)))


def _fingerprint(args: tuple, kwargs: dict) -> list:
    """The arrays a call gets, by identity (weakly held) and size."""
    out = []
    for x in jax.tree_util.tree_leaves((args, kwargs)):
        if type(x) is P.ArrayImpl or type(x) is np.ndarray:
            try:
                out.append((id(x), weakref.ref(x), int(x.nbytes)))
            except TypeError:
                pass
    return out


def _changed(previous: list | None, now: list) -> bool:
    """A training step gets new arrays each call: the parameters and optimizer state its previous call (or the
    loop's other jitted calls) returned, and a new batch. A function called again with the same arrays for most
    of its inputs (a generation step or an evaluation over fixed parameters) is not the training step. The same
    array = the same live object (weakly held: a freed array's id reused by a new one is not the same)."""
    if previous is None or not now:
        return not now
    old = {i: r for i, r, _ in previous}
    same = [b for i, _, b in now if i in old and old[i]() is not None]
    total = sum(b for _, _, b in now)
    return len(same) * 2 < len(now) and sum(same) * 2 < max(total, 1)
