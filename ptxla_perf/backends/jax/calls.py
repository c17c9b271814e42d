"""A top-level call of a wrapped jitted function: counted as an execution, maybe a step boundary, checked for
implicit transfers, its compiles explained and costed. A call made while tracing another is not a launch.

Implicit host->device transfers are found by looking at the arguments before the call (transfers.scan), never by
a transfer guard around it: JAX marks a signature whose first call raised inside its C++ dispatch path
(`fall_back_to_python`), and every later call of it then takes the Python path (x5-10 per call on a small step).
The call itself is the user's, untouched."""
from __future__ import annotations

import sys
import time
from threading import get_ident

from .compiles import Compiles
from .cost import Costs
from .jitted import JitInfo
from .ledger import Ledger, Scope
from .memory import Memory
from .ready import ReadyWatch
from .steps import Steps
from .transfers import Transfers, array_leaves
from ...model import faults
from ...model.faults import FAULTS, check
from ...model.training_thread import TRAINING, switches


QUEUE_MIN_S = 20e-6  # a call's wall time beyond its CPU time below this is not asked about (no syscall)


class Calls:
    """The jitted-call path; it owns nothing but the order in which the parts see a call."""

    def __init__(self, ledger: Ledger, scope: Scope, steps: Steps, transfers: Transfers, compiles: Compiles,
                 costs: Costs, memory: Memory, ready: ReadyWatch):
        self._ledger = ledger
        self._scope = scope
        self._steps = steps
        self._transfers = transfers
        self._compiles = compiles
        self._costs = costs
        self._memory = memory
        self._ready = ready
        self.stopped = False  # the session ended (or was discarded): a function it wrapped is the plain one again

    def call(self, fn: JitInfo, args: tuple, kwargs: dict):
        scope, led = self._scope, self._ledger
        if scope.depth or self.stopped:  # called while tracing another jitted function: not a launch
            return fn.jit(*args, **kwargs)
        o0 = time.perf_counter()
        frame = sys._getframe(2)  # the caller of the wrapper (jitted.Jitted.__call__)
        try:  # our code (faults.py): a failure is recorded, the user's call goes on; a stop (BaseException) goes on
            if faults._INJECT:
                check("jax.call")
            self._steps.before_call(fn, frame, args, kwargs)
            if fn.outs is not None:
                self._memory.check_donation(fn, args, kwargs, frame)
            self._transfers.scan(fn, args, kwargs, frame)  # implicit host->device copies among the arguments
        except Exception as exc:
            FAULTS.record("jax.call", exc)
        led.execs += 1
        compiles, compile_time = led.compiles, led.compile_time
        v0, c0 = switches(), time.thread_time()
        t0 = time.perf_counter()
        led.own += t0 - o0  # ours: the boundary (steps.before_call), the donation check, the argument scan
        scope.depth += 1
        scope.tracing = fn.key
        try:
            out = fn.jit(*args, **kwargs)
        finally:
            scope.depth -= 1
            scope.tracing = None
            # launch: the thread's CPU time in the call (tracing, dispatch), net of compile; where the thread
            # blocked in it, the rest of its wall time waited for the device (a full queue of in-flight
            # executions, a synchronous copy); where it never blocked, the rest waited for a CPU (a loaded host:
            # the breakdown's `other`)
            t1, c1 = time.perf_counter(), time.thread_time()
            cpu = c1 - c0
            compiled = led.compile_time - compile_time
            launch = max(cpu - compiled, 0.0)
            led.launch += launch
            rest = t1 - t0 - compiled - launch
            if rest > QUEUE_MIN_S and (v0 < 0 or switches() != v0):
                led.queue += rest
            led.call_cpu += cpu
        try:  # faults.guarded, inlined (every call)
            if faults._INJECT:
                check("jax.call_end")
            # the call's end, as the step's end where this thread trains (its own clock: TRAINING.cpu's reading)
            self._after(fn, args, kwargs, frame, out, t0, compiles, compile_time,
                        (t1, c1) if get_ident() == TRAINING.ident else None)
        except Exception as exc:
            FAULTS.record("jax.call_end", exc)
        led.own += time.perf_counter() - t1
        return out

    def _after(self, fn: JitInfo, args: tuple, kwargs: dict, frame, out, t0: float, compiles: int,
               compile_time: float, end: tuple | None) -> None:
        """After the user's call returned: its device time, its compile's explanation and cost, the step."""
        led = self._ledger
        if self._ready.calls is not None and not self._steps.in_other:
            self._ready.call(t0, array_leaves(out))  # a sampled step (ready.py): its device time
        if led.compiles != compiles:
            self._compiles.explain(fn, args, kwargs, frame, led.compiles - compiles, led.compile_time - compile_time)
            self._costs.cost_compiled(fn, args, kwargs)
            self._memory.watch_outputs(fn, out)
        led.add_cost(fn.cost if len(fn.costs) < 2 else self._costs.call_cost(fn, args, kwargs))
        self._steps.after_call(fn, out, end)
