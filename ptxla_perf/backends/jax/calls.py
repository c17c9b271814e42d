"""A top-level call of a wrapped jitted function: counted as an execution, maybe a step boundary, checked for
implicit transfers, its compiles explained and costed. A call made while tracing another is not a launch.

Implicit host->device transfers: the call runs under the transfer guard set to "disallow" (host_to_device and
device_to_device) - about 2-5 us, whatever the size of the argument tree. When the guard trips, nothing has run
yet: the arguments are flattened to find the NumPy arrays / Python lists / uncommitted arrays, the user's line is
recorded, and the call is repeated unguarded. From then on that function is checked by flattening its arguments
instead (no exception per call). Without the guard's private API every call is checked by flattening."""
from __future__ import annotations

import sys
import time

from . import _private as P
from .compiles import Compiles
from .cost import Costs
from .jitted import JitInfo
from .ledger import Ledger, Scope
from .memory import Memory
from .ready import ReadyWatch
from .steps import Steps
from .transfers import Transfers, array_leaves
from ...faults import FAULTS, check, guarded

_GUARD_TRIP = ("Disallowed host-to-device transfer", "Disallowed device-to-device transfer")


class Calls:
    """The jitted-call path; it owns nothing but the order in which the parts see a call."""

    def __init__(self, ledger: Ledger, scope: Scope, steps: Steps, transfers: Transfers, compiles: Compiles,
                 costs: Costs, memory: Memory, ready: ReadyWatch, caps: P.Capabilities):
        self._ledger = ledger
        self._scope = scope
        self._steps = steps
        self._transfers = transfers
        self._compiles = compiles
        self._costs = costs
        self._memory = memory
        self._ready = ready
        self._guard = caps.transfer_guard

    def call(self, fn: JitInfo, args: tuple, kwargs: dict):
        scope, led = self._scope, self._ledger
        if scope.depth:  # called while tracing another jitted function: not a launch
            return fn.jit(*args, **kwargs)
        frame = sys._getframe(2)  # the caller of the wrapper (jitted.Jitted.__call__)
        try:  # our code (faults.py): a failure is recorded, the user's call goes on; a stop (BaseException) goes on
            check("jax.call")
            self._steps.before_call(fn, frame, args, kwargs)
            if fn.outs is not None:
                self._memory.check_donation(fn, args, kwargs, frame)
        except Exception as exc:
            FAULTS.record("jax.call", exc)
        led.execs += 1
        compiles, compile_time = led.compiles, led.compile_time
        c0 = led.cpu()
        t0 = time.perf_counter()
        scope.depth += 1
        scope.tracing = fn.key
        try:
            out = self._run(fn, args, kwargs, frame)
        finally:
            scope.depth -= 1
            scope.tracing = None
            led.launch += max(time.perf_counter() - t0 - (led.compile_time - compile_time), 0.0)
            led.call_cpu += led.cpu() - c0
        guarded("jax.call_end", self._after, fn, args, kwargs, frame, out, t0, compiles, compile_time)
        return out

    def _after(self, fn: JitInfo, args: tuple, kwargs: dict, frame, out, t0: float, compiles: int,
               compile_time: float) -> None:
        """After the user's call returned: its device time, its compile's explanation and cost, the step."""
        led = self._ledger
        if self._ready.calls is not None and not self._steps.in_other:
            self._ready.call(t0, array_leaves(out))  # a sampled step (ready.py): its device time
        if led.compiles != compiles:
            self._compiles.explain(fn, args, kwargs, frame, led.compiles - compiles, led.compile_time - compile_time)
            self._costs.cost_compiled(fn, args, kwargs)
            self._memory.watch_outputs(fn, out)
        led.add_cost(fn.cost if len(fn.costs) < 2 else self._costs.call_cost(fn, args, kwargs))
        self._steps.after_call(fn, out)

    def _run(self, fn: JitInfo, args: tuple, kwargs: dict, frame):
        tls = P.GUARD_TLS() if self._guard and fn.mode == "guard" else None
        glob = P.GLOBAL_GUARD
        if tls is None or tls.host_to_device is not None or tls.device_to_device is not None \
                or glob.host_to_device is not None or glob.device_to_device is not None:
            self._transfers.scan(fn, args, kwargs, frame)  # flattening (or the user set a guard of their own)
            return fn.jit(*args, **kwargs)
        # disallow implicit transfers for this call only (setting the C++ thread-local state directly costs
        # ~0.1 us; jax's context managers ~5 us each)
        tls.host_to_device = tls.device_to_device = P.DISALLOW
        try:
            return fn.jit(*args, **kwargs)
        except Exception as exc:
            tls.host_to_device = tls.device_to_device = None
            msg = str(exc)[:300]
            if not any(t in msg for t in _GUARD_TRIP):
                raise
            if "device-to-device" in msg:
                fn.d2d = True
            if self._transfers.scan(fn, args, kwargs, frame):
                fn.mode = "flatten"
            else:  # scalars only, or a constant made while tracing: not worth a finding
                fn.no_host_trips += 1
                if fn.no_host_trips >= 2:
                    fn.mode = "flatten"
            return fn.jit(*args, **kwargs)
        finally:
            tls.host_to_device = tls.device_to_device = None
