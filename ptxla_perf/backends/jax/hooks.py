"""Installing and removing the wrappers (all restored by `remove()`). Each wrapper only decides whether a call is
ours and hands it to the public method of the part that owns the state:
- `jax.jit`, `jax.pmap`, `jax.shard_map` (module attributes): functions jitted after the session starts (incl.
  `flax.nnx.jit`, which calls `jax.jit`) come back wrapped (jitted.py); their calls go to calls.py.
- `ArrayImpl._value` (float, int, bool, str/print, format, tolist, jax.device_get) and `numpy.asarray` /
  `numpy.array` (numpy reads CPU arrays through the buffer protocol and never calls back into Python; `.item()`
  goes through `np.asarray`): transfers.py. `transfer_guard` sees none of `float(x)`.
- `jnp.array` / `jnp.asarray` of host data outside any jitted call: eager uploads (transfers.py).
- `jax.block_until_ready` / `ArrayImpl.block_until_ready`: the main thread's device wait (ready.py).
- `StepTraceAnnotation.__enter__/__exit__` and JAX's reverse pass (a function that computes gradients): steps.py.
- `jax.monitoring` listeners: compiles.py.
A wrapper whose names are missing in this JAX version is not installed (_private.Capabilities)."""
from __future__ import annotations

import sys
import time
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from . import _private as P
from .calls import Calls
from .compiles import Compiles
from .jitted import Jitted
from .ledger import SKIP, Scope
from .ready import DeviceWait
from .steps import Steps
from .transfers import SCALARS, Transfers
from ...model.faults import guarded, shielded

_MISSING = object()


def timed(real: Callable[[Any], Any], part: Any) -> Callable[[Any], Any]:
    """`real(x)`, timed when `part.begin(x, frame)` says it is ours (anything but SKIP): `part.finish(token,
    seconds)` whatever happens, `part.done(token, x, out, end)` when it returned. The shape of both timed waits:
    a read (`_value`) and `block_until_ready`."""
    def wrapper(x):
        token = guarded("jax.wait", part.begin, x, sys._getframe(1), default=SKIP)
        if token is SKIP:
            return real(x)
        t0 = time.perf_counter()
        try:
            out = real(x)
        finally:
            t1 = time.perf_counter()
            guarded("jax.wait", part.finish, token, t1 - t0)
        guarded("jax.wait", part.done, token, x, out, t1)
        return out
    wrapper.__name__ = getattr(real, "__name__", "wrapper")
    wrapper.__doc__ = getattr(real, "__doc__", None)
    return wrapper


class _Forward:
    """A monitoring listener that can be turned off: where this JAX cannot unregister listeners, ours stay
    registered after the session and do nothing."""

    def __init__(self, target: Callable):
        self.target: Callable | None = target

    def __call__(self, *args, **kwargs):
        if self.target is not None:  # called by JAX itself (compiles): our failure must never reach it
            guarded("jax.monitoring", self.target, *args, **kwargs)


class Hooks:
    """Owns what was replaced, to put it back."""

    def __init__(self, caps: P.Capabilities, scope: Scope, calls: Calls, steps: Steps, transfers: Transfers,
                 wait: DeviceWait, compiles: Compiles, notes: list[str]):
        self._caps = caps
        self._scope = scope
        self._calls = calls
        self._steps = steps
        self._transfers = transfers
        self._wait = wait
        self._compiles = compiles
        self._notes = notes
        self._saved: list[tuple[Any, str, Any]] = []  # (owner, attribute, what it was: _MISSING if not its own)
        self._listeners: list[tuple[Callable | None, Any]] = []  # (unregister, the listener registered)

    def _patch(self, owner: Any, name: str, new: Any) -> None:
        self._saved.append((owner, name, vars(owner).get(name, _MISSING)))
        setattr(owner, name, new)

    def install(self) -> None:
        """Each group of wrappers its feature allows; one that fails to install is a note, never the run's end."""
        caps = self._caps
        for on, what, install in ((caps.device_wait, "device wait", self._install_wait),
                                  (True, "jitted calls", self._install_jit),
                                  (caps.gradients, "gradient detection", self._install_backward_pass),
                                  (True, "transfers", self._install_transfers),
                                  (caps.annotations, "StepTraceAnnotation steps", self._install_annotations),
                                  (caps.compile_events, "compiles", self._install_listeners)):
            if not on:
                continue
            try:
                install()
            except Exception as exc:  # a changed API this module's checks missed
                self._notes.append(f"not measured: {what} (its hook failed: {str(exc).splitlines()[0][:100]})")

    def _install_wait(self) -> None:
        self._patch(P.ArrayImpl, "block_until_ready", timed(P.ArrayImpl.__dict__["block_until_ready"], self._wait))
        self._patch(jax, "block_until_ready", timed(jax.block_until_ready, self._wait))

    def _install_jit(self) -> None:
        """jit, pmap and shard_map run compiled programs: each top-level call is an execution, maybe the step."""
        calls = self._calls
        real_jit, real_pmap = jax.jit, jax.pmap

        def jit(fun=None, /, **kwargs):
            if fun is None:
                return lambda f: jit(f, **kwargs)
            jitted = real_jit(fun, **kwargs)
            return guarded("jax.jit", Jitted, jitted, calls, fun, kwargs, default=jitted)

        def pmap(fun=None, *args, **kwargs):
            if fun is None:
                return lambda f: pmap(f, *args, **kwargs)
            # what JitInfo reads in jit's words: static arguments, and donation (missing_donation, memory.py)
            info = {"static_argnums": kwargs.get("static_broadcasted_argnums"),
                    "donate_argnums": kwargs.get("donate_argnums")}
            mapped = real_pmap(fun, *args, **kwargs)
            return guarded("jax.jit", Jitted, mapped, calls, fun, {k: v for k, v in info.items() if v is not None},
                           default=mapped)
        self._patch(jax, "jit", _like(jit, real_jit))
        self._patch(jax, "pmap", _like(pmap, real_pmap))
        if self._caps.shard_map:
            real_smap = jax.shard_map

            def shard_map(f=None, /, **kwargs):
                if f is None:
                    return lambda g: shard_map(g, **kwargs)
                mapped = real_smap(f, **kwargs)
                return guarded("jax.jit", Jitted, mapped, calls, f, {}, default=mapped)
            self._patch(jax, "shard_map", _like(shard_map, real_smap))

    def _install_backward_pass(self) -> None:
        """A backward pass traced inside a top-level jitted call: that function computes gradients (steps.py)."""
        real, steps = getattr(P.AD, P.GRAD_PASS), self._steps

        def backward_pass(*args, **kwargs):
            guarded("jax.backward_pass", steps.backward_pass)
            return real(*args, **kwargs)
        self._patch(P.AD, P.GRAD_PASS, backward_pass)

    def _install_transfers(self) -> None:
        transfers, scope = self._transfers, self._scope
        for name in ("array", "asarray"):  # eager uploads (jax.device_put is the explicit way: never counted)
            real = getattr(jnp, name)

            def upload(obj, *args, _real=real, _name=f"jnp.{name}", **kwargs):
                t0 = time.perf_counter()
                out = _real(obj, *args, **kwargs)
                if type(obj) is not P.ArrayImpl and not isinstance(obj, SCALARS):
                    guarded("jax.upload", transfers.upload, obj, out, _name, sys._getframe(1), time.perf_counter() - t0)
                return out
            self._patch(jnp, name, _like(upload, real, name))
        if not self._caps.reads:
            return
        self._patch(P.ArrayImpl, "_value", property(timed(P.ArrayImpl.__dict__["_value"].fget, transfers)))
        real_asarray, real_array = np.asarray, np.array

        def _np_asarray(a, *args, **kwargs):  # the name is what _blame reports ("np.asarray")
            if type(a) is P.ArrayImpl and not scope.in_np:
                frame = sys._getframe(1)
                return shielded("jax.np_read", lambda call: transfers.np_read(call, a, args, kwargs, frame),
                                real_asarray, a, *args, **kwargs)
            return real_asarray(a, *args, **kwargs)

        def _np_array(a, *args, **kwargs):
            if type(a) is P.ArrayImpl and not scope.in_np:
                frame = sys._getframe(1)
                return shielded("jax.np_read", lambda call: transfers.np_read(call, a, args, kwargs, frame),
                                real_array, a, *args, **kwargs)
            return real_array(a, *args, **kwargs)
        self._patch(np, "asarray", _np_asarray)
        self._patch(np, "array", _np_array)

    def _install_annotations(self) -> None:
        stp, steps = jax.profiler.StepTraceAnnotation, self._steps
        base_enter, base_exit = P.annotation_base()

        def __enter__(self_ann):
            guarded("jax.annotation", steps.annotation_enter)
            return base_enter(self_ann)

        def __exit__(self_ann, *exc):
            result = base_exit(self_ann, *exc)
            guarded("jax.annotation", steps.annotation_exit, sys._getframe(1), exc[0] is None)
            return result
        self._patch(stp, "__enter__", __enter__)
        self._patch(stp, "__exit__", __exit__)

    def _install_listeners(self) -> None:
        ls, caps, comp = P.listeners(), self._caps, self._compiles
        for register, unregister, target in ((ls.register_duration, ls.unregister_duration, comp.on_duration),
                                             (ls.register_event, ls.unregister_event, comp.on_event)):
            listener = _Forward(target)  # removable or left inert; never lets our failure into JAX
            register(listener)
            self._listeners.append((unregister if caps.listener_removal else None, listener))

    def remove(self) -> None:
        """Put everything back, in reverse order; a step that fails is a note, never an exception."""
        for owner, name, old in reversed(self._saved):
            try:
                if old is _MISSING:
                    delattr(owner, name)
                else:
                    setattr(owner, name, old)
            except Exception as exc:
                self._notes.append(f"could not restore {getattr(owner, '__name__', owner)}.{name}: {exc}")
        self._saved = []
        for unregister, listener in self._listeners:
            if unregister is None:
                listener.target = None  # left registered, inert
                continue
            try:
                unregister(listener)
            except (AssertionError, ValueError):
                pass
            except Exception as exc:  # a changed API: never fail the run's end for it
                self._notes.append(f"jax.monitoring listener not removed: {str(exc).splitlines()[0][:100]}")
        self._listeners = []


def _like(wrapper: Callable, real: Callable, name: str | None = None) -> Callable:
    """The wrapper with the real function's docstring and `__wrapped__` (help(), inspect)."""
    wrapper.__doc__, wrapper.__wrapped__ = getattr(real, "__doc__", None), real
    if name:
        wrapper.__name__ = name
    return wrapper
