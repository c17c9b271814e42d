"""JAX adapter: jax.monitoring + a thin wrapper around every `jax.jit` made during the session -> StepRecords.

What it hooks (all restored by `stop()`):
- `jax.jit` (module attribute): functions jitted after the session starts (incl. `flax.nnx.jit`, which calls
  `jax.jit`) come back wrapped in `_Jitted`. Each top-level call (not one made while tracing another) is
  counted as an execution, may be a step boundary (inferred steps), and is checked for implicit transfers.
- Implicit host->device transfers: the call runs under `transfer_guard_host_to_device("disallow")` (and
  device_to_device) - about 2-5 us, whatever the size of the argument tree. When the guard trips, nothing has
  run yet: the arguments are flattened to find the NumPy arrays / Python lists / uncommitted arrays, the user's
  line is recorded, and the call is repeated unguarded. From then on that function is checked by flattening its
  arguments instead (no exception per call). `jax.device_put` is explicit and never a finding.
- Device->host reads: the `ArrayImpl._value` property (float, int, bool, str/print, format, tolist,
  jax.device_get) and `numpy.asarray` / `numpy.array` (numpy reads CPU arrays through the buffer protocol and
  never calls back into Python; `.item()` goes through `np.asarray`). `transfer_guard` sees none of `float(x)`.
- Compiles: `jax.monitoring` duration listeners (trace, lowering, backend compile); a compile inside a wrapped
  call is explained by diffing the abstract signature (shapes, dtypes, static arguments, tree structure) with the
  previous compile of the same function; a compile outside any jitted call is an eager op, blamed on its line.
- Steps: `jax.profiler.StepTraceAnnotation` exits are step boundaries when the code uses them; otherwise the
  step function is the jitted function called again from the same line that computes gradients (a backward pass
  traced in it; with none: the first whose arrays change between calls), not a generation or evaluation step
  called first; each of its calls starts a step. Until it is known, each top-level call keeps a segment (counters, events), and the
  steps are cut from them once it is. `jax.pmap` / `jax.shard_map` calls are wrapped like `jax.jit` ones.
- Eager uploads: `jnp.array` / `jnp.asarray` of host data outside any jitted call are implicit transfers too.
- Device time: the main thread's time in `jax.block_until_ready` / `Array.block_until_ready` is the breakdown's
  `device` part; on sampled steps a daemon thread sees when the jitted calls' outputs become ready
  (`steps[].device_time_s`: jax_ready.py).
"""
from __future__ import annotations

import functools
import math
import os
import sys
import threading
from collections import Counter
import time
import types
import weakref
from typing import Any, Callable, NamedTuple

import numpy as np

import jax
import jax.profiler
from jax._src import config as _jcfg
from jax._src.array import ArrayImpl
from jax._src.interpreters import ad as _ad
from jax._src.lib import guard_lib as _guard

from .. import hlo_cost
from .. import provenance
from .. import memory as mem
from ..live_holders import GrowthWatch, find_holder, holder_counts
from ..frames import USER, classify, user_frame
from ..records import Event, Location, StepRecord, Transfers
from ..sampler import main_thread_cpu
from .jax_ready import ReadyWatch
from .jax_rules import RULES as JAX_RULES

_BACKEND_COMPILE = "/jax/core/compile/backend_compile_duration"
_TRACE = "/jax/core/compile/jaxpr_trace_duration"
_LOWER = "/jax/core/compile/jaxpr_to_mlir_module_duration"
_CACHE_HIT = "/jax/compilation_cache/cache_hits"
_GUARD_TRIP = ("Disallowed host-to-device transfer", "Disallowed device-to-device transfer")
_SCALARS = (int, float, bool, complex)
_MAX_EVENTS_PER_STEP = 16
_REPEAT_WINDOW = 4  # steps: a host buffer copied again within this many steps is the same data copied again
_READER_FALLBACK = 100  # calls from one line of a function that computes no gradients (no training step seen):
#                         then the loop is not training (inference, a benchmark): its repeated function is the step
_MAX_UNDECIDED = 4096  # top-level calls kept while no step function is known
_LIVE_EVERY = 4  # boundaries: live arrays are counted at every 4th one (memory_growth)...
_LIVE_SHARE = 0.01  # ...or less often, so that a sample costs at most this share of the steps between samples...
_LIVE_MAX_EVERY = 64  # ...but at least every this many boundaries


class Counts(NamedTuple):
    """The adapter's running counters at one moment; a step's figures are the difference of two."""

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
    launch: float  # time inside top-level jitted calls, net of the compile time in them (breakdown.py)
    cpu: float  # the main thread's CPU clock
    call_cpu: float  # ...of it inside top-level jitted calls
    blocked: float  # the main thread's time in block_until_ready (waiting for the device: breakdown.py `device`)
_DISALLOW = _guard.TransferGuardLevel.DISALLOW
_GLOBAL_GUARD = _guard.global_state()

_READ_NAMES = {"__float__": "float", "__int__": "int", "__bool__": "bool", "__index__": "index",
               "__complex__": "complex", "__str__": "print/str", "__repr__": "repr", "__format__": "format",
               "tolist": "tolist", "tobytes": "tobytes", "device_get": "jax.device_get", "_item": "item",
               "_np_asarray": "np.asarray", "_np_array": "np.array"}


def _short_dtype(dt) -> str:
    name = np.dtype(dt).name if not hasattr(dt, "name") else dt.name
    return (name.replace("float", "f").replace("bfloat", "bf").replace("uint", "u").replace("int", "s")
            .replace("complex", "c").replace("bool", "pred"))


def _aval_str(x) -> str:
    """The abstract value JAX keys its compile cache on: a Python scalar is a weakly typed 0-d array, the same
    key as the weak array a step returns for it (`step=0` then `state.step + 1` compiles once)."""
    if isinstance(x, _SCALARS):
        if isinstance(x, bool):
            return "pred[]"
        wide = np.complex128 if isinstance(x, complex) else np.float64 if isinstance(x, float) else np.int64
        return f"{_short_dtype(jax.dtypes.canonicalize_dtype(wide))}[]{{weak}}"
    shape = getattr(x, "shape", None)
    dtype = getattr(x, "dtype", None)
    if shape is None or dtype is None:
        return type(x).__name__
    weak = getattr(getattr(x, "aval", None), "weak_type", False)
    return f"{_short_dtype(dtype)}[{','.join(str(d) for d in shape)}]" + ("{weak}" if weak else "")


def _path_str(path) -> str:
    try:
        return jax.tree_util.keystr(path)
    except Exception:
        return str(path)


def _user_code(fun) -> tuple[Any, types.CodeType | None, tuple, bool]:
    """The function the user wrote and its code, under `jax.grad`/`vmap`/`functools.wraps` layers (their
    `__code__` is JAX's wrapper, shared by every function they wrap) and `functools.partial` layers; what those
    layers are (`jit(partial(step, train=True))` and `jit(partial(step, train=False))`, `jit(grad(f))` and
    `jit(f)` are different functions; the same layers made anew each iteration are the same one); and whether a
    partial binds positional arguments (they shift the parameter names)."""
    layers: list = []
    shifted = False
    for _ in range(16):
        if isinstance(fun, functools.partial):
            shifted = shifted or bool(fun.args)
            layers.append((tuple(_binding(v) for v in fun.args),
                           tuple(sorted((k, _binding(v)) for k, v in fun.keywords.items()))))
            fun = fun.func
            continue
        inner = getattr(fun, "__wrapped__", None)
        if inner is None or inner is fun:
            break
        code = getattr(fun, "__code__", None)  # the transform: its wrapper's code and its docstring
        layers.append(((code.co_filename, code.co_firstlineno) if code else type(fun).__name__,
                       (getattr(fun, "__doc__", None) or "")[:120]))
        fun = inner
    return fun, getattr(fun, "__code__", None), tuple(layers), shifted


def _binding(v) -> Any:
    return v if isinstance(v, (int, float, str, bool, type(None))) else (type(v).__name__, id(v))


class _Jitted:
    """Stands in for the object `jax.jit` returns: same call, attributes forwarded (lower, trace, ...)."""

    __slots__ = ("_jit", "_adapter", "_name", "_static", "_code", "_ident", "_library", "_sig", "_mode",
                 "_no_host_trips", "_d2d", "_varnames", "_cost", "_costs", "_donate", "_outs",
                 "__weakref__")

    def __init__(self, jitted, adapter: "JaxAdapter", fun, kwargs: dict):
        self._jit = jitted
        self._adapter = adapter
        inner, code, layers, shifted = _user_code(fun)
        self._name = (getattr(fun, "__qualname__", None) or getattr(inner, "__qualname__", None)
                      or getattr(fun, "__name__", None) or repr(fun)[:60])
        self._code = (code.co_filename, code.co_firstlineno) if code else None
        nums = kwargs.get("static_argnums")
        names = kwargs.get("static_argnames")
        nums = (nums,) if isinstance(nums, int) else tuple(nums or ())
        names = (names,) if isinstance(names, str) else tuple(names or ())
        if code and not shifted and not names and nums:  # jax also accepts the names of static positional args
            names = tuple(code.co_varnames[i] for i in nums if 0 <= i < code.co_argcount)
        self._static = (nums, names)
        # what a step function is recognised by: the jitted code (a `jax.jit(f)` or `jax.jit(lambda ..)` made
        # anew inside the loop is the same step each iteration), or this object when the callable has no code
        self._ident = (self._code, self._name, layers, nums, names) if code else None
        # a library's own jitted helper (optax's bias correction inside an eager `tx.update`): work inside the
        # user's iteration, never a step function or an evaluation of its own
        self._library = code is not None and classify(code.co_filename) != USER
        self._varnames = code.co_varnames[:code.co_argcount] if code and not shifted else ()
        self._sig: tuple | None = None  # abstract signature at the last compile
        self._mode = "guard"  # guard | flatten (after the guard tripped once)
        self._no_host_trips = 0
        self._d2d = False  # its guard tripped on a device-to-device move (uncommitted arrays to a mesh)
        self._costs: dict[tuple, hlo_cost.GraphCost] = {}  # signature -> cost of its compiled program (roofline)
        self._cost: hlo_cost.GraphCost | None = None  # the cost while only one signature has compiled
        # donation (missing_donation): whether it donates anything; weak refs to the outputs of the call that
        # compiled it, checked against the next call's arguments once
        self._donate = _donates(kwargs)
        self._outs: list | None = None

    def __call__(self, *args, **kwargs):
        return self._adapter._call(self, args, kwargs)

    def __getattr__(self, name):
        return getattr(self._jit, name)

    def __get__(self, obj, objtype=None):  # jitted methods
        return self if obj is None else types.MethodType(self, obj)

    def __repr__(self):
        return f"<ptxla_perf-wrapped {self._jit!r}>"

    @property
    def __wrapped__(self):
        return getattr(self._jit, "__wrapped__", None)

    def same_function(self, other: "_Jitted | None") -> bool:
        return other is not None and (self is other or (self._ident is not None and self._ident == other._ident))


def _eager_op(frame) -> str | None:
    """The primitive an eager compile is for: the `prim` of jax's apply_primitive frame on the stack."""
    f = frame
    while f is not None:
        if f.f_code.co_name == "apply_primitive" and "prim" in f.f_locals:
            return str(getattr(f.f_locals["prim"], "name", f.f_locals["prim"]))
        f = f.f_back
    return None


class JaxAdapter:
    name = "jax"
    rules = JAX_RULES  # eager_compile: JAX's own concept (jax_rules.py)
    advice = {
        "device_to_host_sync": "Keep values on the device: accumulate metrics in the step function and read them "
                               "every N steps or after the loop (jax.device_get once).",
        "host_to_device_transfer": "Put parameters and state on the device once (jax.device_put) and keep them "
                                   "there.",
        "eager_compile": "Move the ops into a jitted function if they run every step.",
        "input_pipeline": "Prefetching batches to the device (jax.device_put ahead of the step) overlaps the copy.",
        "graph_break": "Call the step function once per step.",
        "no_steps": "No StepTraceAnnotation and no jitted function called twice from the same line.",
        "memory_growth": "Keep Python numbers, not jax.Arrays, across steps: read the value every N steps "
                         "(float(loss) or jax.device_get once for many), or accumulate inside the step function; "
                         "drop references to old step outputs.",
        "missing_donation": "Donate the arguments the step replaces: jax.jit(step, donate_argnums=(0,)) "
                            "(or donate_argnames=...); XLA then writes the new values into the old buffers.",
        "memory_headroom": "Reduce the per-device batch, rematerialise activations (jax.checkpoint), donate the "
                           "state (donate_argnums), or shard parameters and optimizer state over more devices.",
        "input_bound": "Prefetch batches ahead of the step (a background thread or a loader that prefetches, "
                       "jax.device_put of the next batch before the step) and move per-batch NumPy work out of the "
                       "loop, or cache it.",
        "host_bound": "Move the per-step Python/NumPy work into the jitted step function, or precompute it; "
                      "Python between steps runs while the device has nothing queued.",
        "launch_bound": "Do more work per jitted call: a larger batch, or several steps per call (jax.lax.scan / "
                        "fori_loop over micro-steps).",
    }

    def __init__(self, attribution: dict | None = None):
        cfg = {"mode": "auto"}
        cfg.update({k: v for k, v in (attribution or {}).items() if k == "mode"})
        self.cfg = cfg
        self.lines = cfg["mode"] != "off"
        self.notes: list[str] = []
        self.step_detection = "no step found yet"
        self._on_boundary: Callable[[StepRecord], None] | None = None
        self._depth = 0  # inside a wrapped jitted call (its tracing and dispatch)
        self._in_np = False
        self._events: list[Event] = []
        # cumulative counters
        self._compiles = 0
        self._compile_time = 0.0
        self._cached = 0
        self._execs = 0
        self._d2h = 0
        self._d2h_bytes = 0
        self._h2d = 0
        self._h2d_bytes = 0
        self._eager_compile_events = 0
        # step state
        self._annotated = False
        self._step_key: tuple | None = None
        self._step_fn: _Jitted | None = None
        # step inference, until the step function is known: one entry per top-level jitted call (Counts at its
        # start, the events before it, the function's identity), and per (identity, file, line) its calls
        self._pre: list[tuple] = []
        self._cand_calls: dict[tuple, list[int]] = {}
        self._cand_ins: dict[tuple, list] = {}  # its inputs at its last call (id, weakref, bytes)
        self._cand_end: dict[tuple, tuple] = {}  # (call index, Counts, events so far) when its last call returned
        self._cand_order: list[tuple] = []  # keys in the order they were called a second time (the fallback)
        self._cur_key: tuple | None = None
        self._cand_fn: dict[tuple, Any] = {}
        self._cand_changed: set = set()  # keys whose arrays changed between two calls (state carried by the loop)
        self._tracing: Any = None  # identity of the top-level jitted function running now
        self._grad_fns: set = set()  # identities of functions that traced a backward pass (compute gradients)
        self._members: set = set()  # other functions called once or twice in each iteration: phases of it
        self._from_device: dict[int, tuple] = {}  # id(NumPy array read back from the device) -> (weakref, line)
        self._origin_cache: dict[tuple, Any] = {}  # (code, instruction) of a user call -> its arguments' origins
        self._mark: Counts | None = None  # counters at the last boundary; None before the first step
        self._mark_site: Location | None = None
        self._session_start: Counts | None = None
        self._saved: dict[str, Any] = {}
        self._server = None
        self._first_mark: Counts | None = None
        self._code_sigs: dict[tuple, tuple] = {}  # function identity -> signature at its last compile
        self._variants: dict[str, list] = {}  # compile key -> identities of its partial-bound variants
        self._nsteps = 0
        self._site_cache: tuple = (None, None)
        self._d2h_time = 0.0
        self._in_other = False  # between steps, other jitted functions ran (evaluation): an eval interval is open
        self._ann_depth = 0
        self._step_open = False  # a step began (its function was called) and its record is not emitted yet
        self._buffers: dict[int, tuple] = {}  # id(array) -> (weakref, step it was last copied into a call)
        self._last_call_end: tuple | None = None  # (snapshot, events so far) when the step function last returned
        # roofline: cost of the compiled programs the top-level jitted calls ran, summed per call
        self._flops = self._bytes = self._trans = 0.0
        self._uncosted = 0  # calls whose program's cost is unknown
        self._costing = False  # inside our own lower().compile() for a cost: its monitoring events are not the user's
        self._cost_note: str | None = None
        self._costed_fns: dict[str, dict] = {}  # function name -> its signatures' costs (report: roofline.graphs)
        self._compiled: dict[int, Any] = {}  # the Compiled objects costed (their HLO text only read on demand)
        # memory (memory.py): per function, XLA's memory analysis of its compiled program(s), from the same Compiled
        self._graph_mem: dict[str, dict] = {}
        self._next_live = 0  # the boundary of the next jax.live_arrays() sample
        self._watch = GrowthWatch()
        self._holders_before: dict[int, int] | None = None  # containers of arrays at the sample it fired
        self._launch = 0.0  # time in top-level jitted calls net of compile (dispatch), cumulative
        self._call_cpu = 0.0
        self._cpu = main_thread_cpu()
        self._blocked = 0.0  # the main thread's time in block_until_ready, cumulative
        self._blocking = False
        self._ready: ReadyWatch | None = None  # device time of sampled steps (jax_ready.py)

    @staticmethod
    def sampler_codes() -> tuple[set, set]:
        """Our wrapper's code, for the stack sampler (sampler.py): a frame of a jitted call (dispatch, compile)."""
        return {JaxAdapter._call.__code__}, set()

    # --- lifecycle ---------------------------------------------------------------------------------
    def start(self, on_boundary: Callable[[StepRecord], None]) -> None:
        self._on_boundary = on_boundary
        self._session_start = self._snapshot()
        adapter = self
        real_jit = jax.jit
        real_value = ArrayImpl.__dict__["_value"]
        real_asarray, real_array = np.asarray, np.array
        stp = jax.profiler.StepTraceAnnotation
        real_bur, real_api_bur = ArrayImpl.__dict__["block_until_ready"], jax.block_until_ready
        self._ready = ReadyWatch(real_bur)
        main = threading.get_ident()

        def blocked(real):
            def block_until_ready(x):
                if adapter._blocking or adapter._depth or threading.get_ident() != main:
                    return real(x)
                adapter._blocking = True
                t0 = time.perf_counter()
                try:
                    out = real(x)
                finally:
                    t1 = time.perf_counter()
                    adapter._blocked += t1 - t0
                    adapter._blocking = False
                if adapter._ready.calls is not None:  # a sampled step: x's calls were done by t1
                    adapter._ready.waited(x, _array_leaves, t1)
                return out
            return block_until_ready
        ArrayImpl.block_until_ready, jax.block_until_ready = blocked(real_bur), blocked(real_api_bur)
        real_exit = stp.__dict__.get("__exit__")
        self._saved = {"jit": real_jit, "value": real_value, "asarray": real_asarray, "array": real_array,
                       "stp_exit": real_exit, "bur": real_bur, "api_bur": real_api_bur}

        def jit(fun=None, /, **kwargs):
            if fun is None:
                return lambda f: jit(f, **kwargs)
            return _Jitted(real_jit(fun, **kwargs), adapter, fun, kwargs)
        jit.__doc__ = real_jit.__doc__
        jit.__wrapped__ = real_jit
        jax.jit = jit

        # pmap and shard_map run compiled programs too: each top-level call is an execution and may be the step
        real_pmap, real_smap = jax.pmap, getattr(jax, "shard_map", None)
        self._saved.update(pmap=real_pmap, shard_map=real_smap)

        def pmap(fun=None, *args, **kwargs):
            if fun is None:
                return lambda f: pmap(f, *args, **kwargs)
            static = kwargs.get("static_broadcasted_argnums")
            return _Jitted(real_pmap(fun, *args, **kwargs), adapter, fun,
                           {"static_argnums": static} if static is not None else {})
        pmap.__doc__ = real_pmap.__doc__
        pmap.__wrapped__ = real_pmap
        jax.pmap = pmap
        if real_smap is not None:
            def shard_map(f=None, /, **kwargs):
                if f is None:
                    return lambda g: shard_map(g, **kwargs)
                return _Jitted(real_smap(f, **kwargs), adapter, f, {})
            shard_map.__doc__ = real_smap.__doc__
            shard_map.__wrapped__ = real_smap
            jax.shard_map = shard_map

        # a backward pass traced inside a top-level jitted call: that function computes gradients (a training
        # step, or its gradient phase); read by step inference
        real_bp = getattr(_ad, "backward_pass3", None)
        self._saved["backward_pass3"] = real_bp
        if real_bp is not None:
            def backward_pass3(*args, **kwargs):
                if adapter._depth and adapter._tracing is not None:
                    adapter._grad_fns.add(adapter._tracing)
                return real_bp(*args, **kwargs)
            _ad.backward_pass3 = backward_pass3

        # eager uploads: jnp.array / jnp.asarray of host data outside any jitted function copy it to the device
        # (jax.device_put is the explicit way and is never counted)
        jnp_mod = sys.modules["jax.numpy"]
        for name in ("array", "asarray"):
            real = getattr(jnp_mod, name)
            self._saved[f"jnp_{name}"] = real

            def upload(obj, *args, _real=real, _name=f"jnp.{name}", **kwargs):
                out = _real(obj, *args, **kwargs)
                if not adapter._depth and not adapter._costing and type(obj) is not ArrayImpl \
                        and not isinstance(obj, _SCALARS):
                    adapter._eager_upload(obj, out, _name, sys._getframe(1))
                return out
            upload.__doc__, upload.__wrapped__, upload.__name__ = real.__doc__, real, name
            setattr(jnp_mod, name, upload)

        fget = real_value.fget

        def _value(self_arr):
            if self_arr._npy_value is None and not adapter._depth and not adapter._in_np:
                loc = adapter._read(self_arr, sys._getframe(1))
                t0 = time.perf_counter()
                try:
                    out = fget(self_arr)
                finally:
                    t1 = time.perf_counter()
                    adapter._d2h_time += t1 - t0
                if adapter._ready.calls is not None:  # a sampled step: the read's calls were done by t1
                    adapter._ready.waited(self_arr, _array_leaves, t1)
                adapter._came_from_device(out, loc)
                return out
            return fget(self_arr)
        ArrayImpl._value = property(_value)

        def _np_asarray(a, *args, **kwargs):
            if type(a) is ArrayImpl and not adapter._in_np:
                return adapter._np_read(real_asarray, a, args, kwargs, sys._getframe(1))
            return real_asarray(a, *args, **kwargs)

        def _np_array(a, *args, **kwargs):
            if type(a) is ArrayImpl and not adapter._in_np:
                return adapter._np_read(real_array, a, args, kwargs, sys._getframe(1))
            return real_array(a, *args, **kwargs)
        np.asarray, np.array = _np_asarray, _np_array

        real_enter = stp.__dict__.get("__enter__")
        self._saved["stp_enter"] = real_enter
        base_enter, base_exit = stp.__mro__[1].__enter__, stp.__mro__[1].__exit__

        def __enter__(self_ann):
            if not adapter._annotated and not adapter._depth:
                adapter._annotation_start()
            if not adapter._depth:
                adapter._ann_depth += 1
                if adapter._in_other:  # an evaluation interval ends where the next annotated step begins
                    adapter._close_other()
            return base_enter(self_ann)

        def __exit__(self_ann, *exc):
            if not adapter._depth:
                adapter._ann_depth = max(0, adapter._ann_depth - 1)
            result = base_exit(self_ann, *exc)
            if exc[0] is None:  # a block that raised is not a finished step
                adapter._annotation_boundary(sys._getframe(1))
            return result
        stp.__enter__, stp.__exit__ = __enter__, __exit__

        jax.monitoring.register_event_duration_secs_listener(self._on_duration)
        jax.monitoring.register_event_listener(self._on_event)

    def stop(self) -> StepRecord | None:
        s = self._saved
        if s:
            jax.jit = s["jit"]
            jax.pmap = s["pmap"]
            if s.get("backward_pass3") is not None:
                _ad.backward_pass3 = s["backward_pass3"]
            if s.get("shard_map") is not None:
                jax.shard_map = s["shard_map"]
            jnp_mod = sys.modules["jax.numpy"]
            for name in ("array", "asarray"):
                setattr(jnp_mod, name, s[f"jnp_{name}"])
            ArrayImpl._value = s["value"]
            ArrayImpl.block_until_ready, jax.block_until_ready = s["bur"], s["api_bur"]
            np.asarray, np.array = s["asarray"], s["array"]
            stp = jax.profiler.StepTraceAnnotation
            for attr in ("__enter__", "__exit__"):
                if s[f"stp_{attr.strip('_')}"] is None:
                    try:
                        delattr(stp, attr)
                    except AttributeError:
                        pass
                else:
                    setattr(stp, attr, s[f"stp_{attr.strip('_')}"])
            for unreg, cb in ((jax.monitoring.unregister_event_duration_listener, self._on_duration),
                              (jax.monitoring.unregister_event_listener, self._on_event)):
                try:
                    unreg(cb)
                except (AssertionError, ValueError):
                    pass
            self._saved = {}
        if self._step_fn is None and not self._annotated and self._cand_order:
            # no jitted function computed gradients (an inference loop, training outside jitted code): the one
            # called again from one line with new arrays each call (else the first called again) is the step
            key = self._fallback()
            self._decide(key, "called again from one line (no jitted function computes gradients)",
                         end=self._cand_end.get(key))
        if self._mark is None:
            return None
        if self._step_fn is not None and self._step_open and self._last_call_end is not None:
            # inferred steps: a record is emitted when the next call begins; the last call's step ends where
            # that call returned, and what came after it (a final read, an evaluation) is trailing work
            end, n_events = self._last_call_end
            later, self._events = self._events[n_events:], self._events[:n_events]
            self._emit(None, phase="train", now=end)
            self._events = later
        elif self._step_fn is not None and self._step_open and self._in_other:
            self._emit(None, phase="eval")
        if self._ready is not None:
            self._ready.stop()
        tail = self._record(None)
        busy = tail.compiles or tail.device_to_host.count or tail.executions or tail.host_to_device.count
        return tail if busy else None

    def host_to_device_bytes(self) -> int | None:
        return self._h2d_bytes

    def process_index(self) -> int | None:
        from jax._src import xla_bridge
        return int(jax.process_index()) if xla_bridge.backends_are_initialized() else None

    def follow_spawn(self, wrap):
        return None  # JAX has no launcher: each process calls jax.distributed.initialize itself

    def start_server(self, port: int):
        self._server = jax.profiler.start_server(port)
        return self._server

    def runaway(self, rec: StepRecord, cfg) -> str | None:
        """Never from compile counts: eager ops compile once per op and shape (tens in an evaluation pass are
        normal and cached), and a jitted function recompiling every step is a finding, not a memory runaway."""
        return None

    def environment(self) -> dict[str, Any]:
        env: dict[str, Any] = {"versions": {"jax": jax.__version__}}
        try:
            import jaxlib
            env["versions"]["jaxlib"] = getattr(jaxlib, "__version__", None)
        except ImportError:
            pass
        try:
            import flax
            env["versions"]["flax"] = flax.__version__
        except ImportError:
            pass
        from jax._src import xla_bridge
        if not xla_bridge.backends_are_initialized():  # asking would initialise JAX before the script did
            env["device_kind"] = os.environ.get("JAX_PLATFORMS")
            return env
        try:
            devs = jax.devices()
            env["device_kind"] = devs[0].platform
            env["device"] = f"{devs[0].device_kind} x{len(devs)}"
            env["device_model"] = devs[0].device_kind  # picks the peak (peaks.py)
            env["local_devices"] = len(jax.local_devices())  # CPU: host-platform devices share the calibrated peak
            env["process_count"] = int(jax.process_count())
            env["process_index"] = int(jax.process_index())
        except Exception as exc:
            env["device_kind"] = os.environ.get("JAX_PLATFORMS")
            env["device_error"] = str(exc).splitlines()[0]
        return env

    # --- counters ---------------------------------------------------------------------------------------
    def _snapshot(self) -> Counts:
        return Counts(self._compiles, self._compile_time, self._cached, self._execs, self._d2h, self._d2h_bytes,
                self._h2d, self._h2d_bytes, time.perf_counter(), self._d2h_time,
                self._flops, self._bytes, self._trans, self._uncosted, self._launch, self._cpu(), self._call_cpu,
                self._blocked)

    def _record(self, site: Location | None, phase: str | None = None, now: Counts | None = None) -> StepRecord:
        prev, now = self._mark, now or self._snapshot()
        self._mark = now
        execs = now.execs - prev.execs
        rec = StepRecord(index=0, wall_time_s=max(now.t - prev.t, 0.0), site=site or self._mark_site,
                         compiles=now.compiles - prev.compiles,
                         compile_time_s=max(now.compile_time - prev.compile_time, 0.0),
                         cached_compiles=now.cached - prev.cached, executions=execs,
                         device_to_host=Transfers(now.d2h - prev.d2h, now.d2h_bytes - prev.d2h_bytes),
                         host_to_device=Transfers(now.h2d - prev.h2d, now.h2d_bytes - prev.h2d_bytes),
                         events=self._events, phase=phase,
                         device_to_host_time_s=max(now.d2h_time - prev.d2h_time, 0.0),
                         launch_time_s=max(now.launch - prev.launch, 0.0),
                         device_wait_s=max(now.blocked - prev.blocked, 0.0),
                         host_cpu_s=max((now.cpu - prev.cpu) - (now.call_cpu - prev.call_cpu), 0.0))
        if not execs or now.uncosted == prev.uncosted:  # every call's program cost known (or no call): the sum
            rec.flops, rec.bytes_accessed = now.flops - prev.flops, now.bytes - prev.bytes
            rec.transcendentals = now.trans - prev.trans
        self._events = []
        return rec

    def _event(self, kind: str, loc: Location | None, detail: dict) -> None:
        if sum(e.kind != "compile" for e in self._events) >= _MAX_EVENTS_PER_STEP:
            return
        for e in self._events:  # one event per line and kind per step; repeats add up in detail["transfers"]
            if e.kind == kind and e.location == loc and kind != "compile":
                e.detail.transfers += detail.get("transfers", 1)
                return
        self._events.append(Event(kind, loc, detail))

    def _emit(self, site: Location | None, phase: str | None = "train", now: Counts | None = None) -> None:
        rec = self._record(site, phase, now)
        self._mark_site = site
        self._sample_live(rec)
        self._nsteps += 1
        if self._ready is not None:
            self._ready.step_end(rec, ok=phase == "train" and not rec.compiles)
            self._ready.arm(self._nsteps)
        self._on_boundary(rec)

    def _open_other(self) -> None:
        """Another jitted function ran at top level between steps (evaluation, metrics): the training step ends
        here and an evaluation interval begins; it ends where the next step begins."""
        self._emit(self._mark_site, "train")
        self._in_other = True
        self._step_open = False

    def _close_other(self) -> None:
        self._emit(self._mark_site, "eval")
        self._in_other = False

    # --- steps -------------------------------------------------------------------------------------------
    def _annotation_start(self) -> None:
        self._annotated = True
        self.step_detection = "jax.profiler.StepTraceAnnotation: each annotated block is one step"
        if self._mark is not None and self._step_fn is not None:
            self.notes.append("steps were inferred from a jitted function until the first "
                              "StepTraceAnnotation; annotations are used from then on")
        self._step_fn = None
        self._forget_candidates()
        if self._mark is None:  # step 0 starts where the first annotated block does
            self._mark = self._first_mark = self._snapshot()
            self._events = []  # what happened before the first step is not a step's

    def _annotation_boundary(self, frame) -> None:
        if self._depth or not self._annotated:
            return
        self._emit(user_frame(frame)[0])

    def _maybe_step(self, fn: _Jitted, frame, args: tuple, kwargs: dict) -> None:
        """A top-level call of a jitted function: maybe a step boundary (inferred steps)."""
        if self._step_fn is not None:
            if not fn.same_function(self._step_fn):
                if not self._in_other and (fn._ident or id(fn)) in self._members:
                    return  # a phase of the iteration: its second jitted call (grads, then the update)
                if not self._in_other and self._step_open:
                    self._open_other()
                return
            key = (frame.f_code, frame.f_lineno)
            if key == self._site_cache[0]:
                site = self._site_cache[1]
            else:
                site = user_frame(frame)[0]
                if classify(frame.f_code.co_filename) == USER:  # called straight from user code: cacheable
                    self._site_cache = (key, site)
            if site is not None and (site.file, site.line) != self._step_key:
                if not self._in_other and self._step_open:
                    self._open_other()  # the step function called from elsewhere (e.g. evaluation)
                return
            if self._in_other:
                self._close_other()
            elif self._step_open:
                self._emit(site)
            self._step_open = True
            return
        # no step function yet: each top-level call starts a segment (the counters at its start, the events
        # since the previous one), so that the steps can be cut once the step function is known
        site = user_frame(frame)[0]
        ident = fn._ident or id(fn)
        key = (ident, site.file, site.line) if site else (ident, "?", 0)
        if len(self._pre) >= _MAX_UNDECIDED:
            if self._cand_order:  # a long loop of calls that never changed their inputs: it is the loop
                self._decide(self._fallback(), "called repeatedly from one line; no jitted function computes "
                                               "gradients")
                return self._maybe_step(fn, frame, args, kwargs)
            self._forget_candidates()
        index = len(self._pre)
        self._pre.append((self._snapshot(), self._events, ident, site))
        self._events = []
        self._cur_key = key
        calls = self._cand_calls.setdefault(key, [])
        calls.append(index)
        self._cand_fn.setdefault(key, fn)
        previous, now = self._cand_ins.get(key), _fingerprint(args, kwargs)
        self._cand_ins[key] = now
        if len(calls) < 2:
            return
        if len(calls) == 2:
            self._cand_order.append(key)
        if _changed(previous, now):
            self._cand_changed.add(key)
        if ident in self._grad_fns:
            self._decide(key, "called again from one line and computes gradients (a backward pass is traced in "
                              "it)", fn)
        elif len(calls) >= _READER_FALLBACK:
            self._decide(self._fallback(), f"called {len(calls)} times from one line and no jitted function "
                                            "computes gradients")

    def _decide(self, key: tuple, why: str, fn: "_Jitted | None" = None, end: tuple | None = None) -> None:
        """`key`'s function is the step function: each of its calls from its line so far starts a step; the
        records of those steps are cut from the segments kept since the session started. Other functions called
        once or twice between its last two calls are phases of the iteration (a second jitted call per step),
        not evaluation. `end`: (call index, Counts, events) where its last call returned (at the end of the
        run: the last step ends there)."""
        calls = self._cand_calls[key]
        pre, current = self._pre, self._events
        site = pre[calls[-1]][3]
        if fn is None:
            fn = self._cand_fn.get(key)
        self._step_fn, self._step_key = fn, key[1:]
        name = fn._name if fn is not None else "?"
        self.step_detection = (f"inferred: the jitted function {name} at {site.short() if site else '?'}, "
                               f"{why}; each call starts a step")
        if len(calls) >= 2:
            between = Counter(p[2] for p in pre[calls[-2] + 1:calls[-1]])
            self._members = {ident for ident, k in between.items() if k <= 2 and ident != key[0]}
        self._mark, self._mark_site = pre[calls[0]][0], site
        self._first_mark = self._mark
        for a, b in zip(calls, calls[1:]):
            self._events = [e for p in pre[a + 1:b + 1] for e in p[1]]
            self._emit(site, now=pre[b][0])
        if end is not None:
            last, snap, n_events = end
            rest = [p[1] for p in pre[last + 1:]] + [current]
            self._events = rest[0][:n_events]
            self._emit(site, now=snap)
            self._events = rest[0][n_events:] + [e for evs in rest[1:] for e in evs]
            self._step_open = False
        else:
            self._events = []
            self._step_open = True
        self._forget_candidates()

    def _fallback(self) -> tuple:
        """No function computes gradients: the first called again from one line whose arrays changed between
        calls (the state the loop carries), else the first called again from one line."""
        return next((k for k in self._cand_order if k in self._cand_changed), self._cand_order[0])

    def _forget_candidates(self) -> None:
        self._pre = []
        self._cand_calls.clear()
        self._cand_ins.clear()
        self._cand_end.clear()
        self._cand_order = []
        self._cand_changed = set()
        self._cand_fn.clear()
        self._cur_key = None

    # --- jitted calls ------------------------------------------------------------------------------------
    def _call(self, fn: _Jitted, args: tuple, kwargs: dict):
        if self._depth:  # called while tracing another jitted function: not a launch
            return fn._jit(*args, **kwargs)
        frame = sys._getframe(2)
        if fn._library and classify(frame.f_code.co_filename) != USER:
            pass  # called by a library on the user's behalf: part of whatever the user's loop is doing
        elif not self._annotated:
            self._maybe_step(fn, frame, args, kwargs)
        elif not self._ann_depth and not self._in_other and self._mark is not None:
            self._in_other = True  # a jitted call between annotated steps: evaluation until the next step
        if fn._outs is not None:
            try:
                self._check_donation(fn, args, kwargs, frame)
            except Exception:  # a diagnostic: never break the user's call
                fn._outs = None
        self._execs += 1
        compiles, compile_time = self._compiles, self._compile_time
        c0 = self._cpu()
        t0 = time.perf_counter()
        self._depth += 1
        self._tracing = fn._ident or id(fn)
        try:
            tls = _guard.thread_local_state() if fn._mode == "guard" else None
            if tls is not None and tls.host_to_device is None and tls.device_to_device is None \
                    and _GLOBAL_GUARD.host_to_device is None and _GLOBAL_GUARD.device_to_device is None:
                # the user set no guard of their own: disallow implicit transfers for this call only (setting
                # the C++ thread-local state directly costs ~0.1 us; jax's context managers ~5 us each)
                tls.host_to_device = tls.device_to_device = _DISALLOW
                try:
                    out = fn._jit(*args, **kwargs)
                except Exception as exc:
                    tls.host_to_device = tls.device_to_device = None
                    msg = str(exc)[:300]
                    if not any(t in msg for t in _GUARD_TRIP):
                        raise
                    if "device-to-device" in msg:
                        fn._d2d = True
                    found = self._scan(fn, args, kwargs, frame)
                    if found:
                        fn._mode = "flatten"
                    else:  # scalars only, or a constant made while tracing: not worth a finding
                        fn._no_host_trips += 1
                        if fn._no_host_trips >= 2:
                            fn._mode = "flatten"
                    out = fn._jit(*args, **kwargs)
                finally:
                    tls.host_to_device = tls.device_to_device = None
            else:
                self._scan(fn, args, kwargs, frame)
                out = fn._jit(*args, **kwargs)
        finally:
            self._depth -= 1
            self._tracing = None
            self._launch += max(time.perf_counter() - t0 - (self._compile_time - compile_time), 0.0)
            self._call_cpu += self._cpu() - c0
        if self._ready is not None and self._ready.calls is not None and not self._in_other:
            self._ready.call(t0, _array_leaves(out))  # a sampled step (jax_ready.py): its device time
        if self._compiles != compiles:
            self._explain_compile(fn, args, kwargs, frame, self._compiles - compiles, self._compile_time - compile_time)
            self._cost_compiled(fn, args, kwargs)
            self._watch_outputs(fn, out)
        cost = fn._cost if len(fn._costs) < 2 else fn._costs.get(self._cost_signature(fn, args, kwargs))
        if cost is not None and cost.flops is not None:
            self._flops += cost.flops
            self._bytes += cost.bytes_accessed or 0.0
            self._trans += cost.transcendentals or 0.0
        else:
            self._uncosted += 1
        if fn.same_function(self._step_fn) and not self._in_other:
            self._last_call_end = (self._snapshot(), len(self._events))
        elif self._step_fn is None and self._cur_key is not None and self._pre:
            self._cand_end[self._cur_key] = (len(self._pre) - 1, self._snapshot(), len(self._events))
        return out

    def _scan(self, fn: _Jitted, args: tuple, kwargs: dict, frame) -> bool:
        """Find implicit transfers among the arguments; record them. True if any were found. Each NumPy array
        is told by where it came from: read back from the device (a round trip), made by the loop on the host
        (random draws, constants, lists: the source says so), or data (the input pipeline)."""
        nums, names = fn._static
        shapes: list[list[int]] = []
        nbytes = 0
        n = repeated = 0
        kinds = set()
        origins: Counter = Counter()  # bytes by origin
        made: list[str] = []
        dyn = [(i, a) for i, a in enumerate(args) if i not in nums] + \
              [(k, v) for k, v in kwargs.items() if k not in names]
        found = None
        multi = fn._d2d  # uncommitted arrays are moved only where the call spans other devices
        for pos, a in dyn:
            if type(a) in (list, tuple) and a and all(isinstance(v, _SCALARS) for v in a):
                # a Python list of numbers: one transfer per element
                kinds.add("python list")
                shapes.append([len(a)])
                nbytes += 4 * len(a)
                n += len(a)
                origins[provenance.HOST_MADE] += 4 * len(a)
                continue
            arg_origin = _UNSEEN
            for x in jax.tree_util.tree_leaves(a):
                t = type(x)
                if t is ArrayImpl:
                    if multi and not x._committed and x.ndim and len(x.sharding.device_set) == 1:
                        kinds.add("uncommitted jax.Array")
                        shapes.append(list(x.shape))
                        nbytes += x.nbytes
                        n += 1
                elif t is np.ndarray or isinstance(x, (np.ndarray, np.generic)):
                    kinds.add("numpy")
                    shapes.append(list(np.shape(x)))
                    b = int(x.nbytes)
                    nbytes += b
                    n += 1
                    if isinstance(x, np.ndarray) and self._seen_buffer(x):
                        repeated += 1
                    back = self._round_trip(x)
                    if back is not None:
                        origins["round_trip"] += b
                        if back[1] is not None and len(made) < 4:
                            text = f"read back from the device at {back[1].short()}"
                            if text not in made:
                                made.append(text)
                        continue
                    if arg_origin is _UNSEEN:
                        if found is None:
                            found = self._call_origins(frame, len(args)) or ((), {})
                        arg_origin = _arg_origin(found, pos, len(args))
                    if arg_origin is None:
                        origins["data"] += b
                    else:
                        origins[arg_origin.kind] += b
                        text = f"{arg_origin.text} (line {arg_origin.line})"
                        if text not in made and len(made) < 4:
                            made.append(text)
        if not n:
            return False
        self._h2d += n
        self._h2d_bytes += nbytes
        loc = user_frame(frame)[0] if self.lines else None
        shapes.sort(key=lambda s: -int(np.prod(s)) if s else 0)
        self._event("host_to_device_transfer", loc,
                    {"call": fn._name, "shapes": shapes[:6], "bytes": nbytes, "transfers": n,
                     "arrays": n, "source": sorted(kinds), "repeated_buffers": repeated,
                     "origins": dict(origins), "made_by": made,
                     # what is wasted: the same host buffer copied again within a few steps (parameters left in
                     # NumPy), arrays read back from the device and sent again (a round trip), values the loop
                     # makes on the host (random draws, constants, Python lists: one transfer per element),
                     # arrays resharded on every call. A fresh NumPy batch per call is the input pipeline.
                     "avoidable": bool(repeated or kinds & {"python list", "uncommitted jax.Array"}
                                       or set(origins) - {"data"})})
        return True

    def _call_origins(self, frame, nargs: int):
        """Where each argument of the call a user frame is making came from (provenance.py), cached per call
        instruction."""
        if frame is None or classify(frame.f_code.co_filename) != USER:
            return None
        key = (frame.f_code, frame.f_lasti)
        hit = self._origin_cache.get(key, _UNSEEN)
        if hit is _UNSEEN:
            pos = provenance.position(frame)
            try:
                hit = provenance.call_arguments(frame.f_code.co_filename, pos) if pos else None
            except Exception:  # never break the user's call for a diagnostic
                hit = None
            if len(self._origin_cache) < 1024:
                self._origin_cache[key] = hit
        return hit

    def _seen_buffer(self, x: np.ndarray) -> bool:
        """True when this very array object (alive since) was copied into a call within the last few steps. Held
        by weak reference: a fresh batch often lands at the address of the one just freed, so an address alone
        would call every new batch 'the same data'."""
        try:
            ref = weakref.ref(x)
        except TypeError:
            return False
        seen = self._buffers.get(id(x))
        self._buffers[id(x)] = (ref, self._nsteps)
        if len(self._buffers) > 4096:
            self._buffers = {k: v for k, v in self._buffers.items()
                             if v[0]() is not None and self._nsteps - v[1] <= _REPEAT_WINDOW}
        return seen is not None and seen[0]() is x and self._nsteps - seen[1] <= _REPEAT_WINDOW

    # --- compiles --------------------------------------------------------------------------------------
    def _on_duration(self, event: str, duration: float, **kwargs) -> None:
        if self._costing:  # our own lower().compile() for a cost (a cache hit: it should not compile at all)
            if event == _BACKEND_COMPILE:
                self._cost_note = "jax compiled again for cost analysis: cost analysis turned off for this run"
            return
        if event == _BACKEND_COMPILE:
            self._compiles += 1
            self._compile_time += duration
            if not self._depth:  # an op outside any jitted function compiled: one unit per user line and step
                frame = sys._getframe(1)
                loc, _ = user_frame(frame)
                key = f"eager:{loc.file}:{loc.line}" if loc else "eager:?"
                op = _eager_op(frame) or "op"
                for e in self._events:
                    if e.kind == "compile" and e.detail.key == key:
                        e.detail.count += 1
                        e.detail.seconds = round(e.detail.seconds + duration, 6)
                        e.detail.ops = e.detail.ops + [op] if len(e.detail.ops) < 16 else e.detail.ops
                        break
                else:
                    self._events.append(Event("compile", loc if self.lines else None, {
                        "unit": True, "key": key, "count": 1, "seconds": round(duration, 6), "ops": [op],
                        "cause": "eager_op"}))
        elif event in (_TRACE, _LOWER):
            self._compile_time += duration

    def _on_event(self, event: str, **kwargs) -> None:
        if self._costing:
            return
        if event == _CACHE_HIT:
            self._cached += 1

    # --- roofline: the cost of each compiled program --------------------------------------------------------
    def _cost_compiled(self, fn: _Jitted, args: tuple, kwargs: dict) -> None:
        """Once per function and signature, right after the call that compiled it: `lower(...).compile()` is then
        a cache hit of the executable just built (no trace, no compile), and its `cost_analysis()` is XLA's
        HloCostAnalysis of the optimized (fused, partitioned: per device) program."""
        sig = fn._sig
        if sig is None or sig in fn._costs or not hasattr(fn._jit, "lower"):
            return
        if self._cost_note:
            cost = hlo_cost.unavailable(self._cost_note)
        else:
            self._costing = True
            self._depth += 1
            try:
                lowered = fn._jit.lower(*args, **kwargs)
                try:
                    if os.environ.get(hlo_cost.DISABLE_ENV):
                        raise ImportError(f"{hlo_cost.DISABLE_ENV} is set")
                    compiled = lowered.compile()
                    self._remember_memory(fn, mem.from_compiled(compiled))
                    cost = hlo_cost.from_properties(compiled.cost_analysis())
                    if len(self._compiled) < 8:
                        self._compiled[id(compiled)] = compiled
                except Exception as exc:  # private or changed API: the HLO text instead
                    cost = self._cost_from_text(lowered, exc)
            except Exception as exc:  # never break the user's call for a diagnostic
                cost = hlo_cost.unavailable(f"lowering for cost analysis failed: {str(exc).splitlines()[0][:120]}")
            finally:
                self._depth -= 1
                self._costing = False
            if self._cost_note:
                cost = hlo_cost.unavailable(self._cost_note)
        fn._costs[sig] = cost
        fn._cost = cost if len(fn._costs) == 1 else None
        entry = self._costed_fns.setdefault(fn._name, {"id": fn._name, "signatures": 0, **cost.to_json()})
        entry["signatures"] += 1

    @staticmethod
    def _cost_from_text(lowered, exc: Exception) -> hlo_cost.GraphCost:
        why = f"XLA cost analysis unavailable ({type(exc).__name__}: {str(exc).splitlines()[0][:120] if str(exc) else ''})"
        try:
            text = lowered.as_text(dialect="hlo")
            cost = hlo_cost.text_cost(text)
            cost.note = f"{why}; {cost.note}"
            return cost
        except Exception:
            return hlo_cost.unavailable(why)

    def _cost_signature(self, fn: _Jitted, args: tuple, kwargs: dict) -> tuple | None:
        """Which of a function's compiled signatures this call ran (only for functions with several)."""
        try:
            return self._signature(fn, args, kwargs)
        except Exception:
            return None

    def hlo_modules(self) -> dict[str, str]:
        """The optimized HLO of the programs costed so far, by module name (read now, not at compile time)."""
        out: dict[str, str] = {}
        for compiled in self._compiled.values():
            try:
                text = compiled.as_text()
            except Exception:
                continue
            name = text[:200].split(",", 1)[0].removeprefix("HloModule").strip()
            if name and len(text) < 50_000_000:
                out.setdefault(name, text)
        return out

    def graph_costs(self) -> dict[str, Any]:
        graphs = list(self._costed_fns.values())
        sources = {g["source"] for g in graphs}
        source = next((s for s in (hlo_cost.XLA, hlo_cost.TEXT) if s in sources), hlo_cost.UNAVAILABLE)
        notes = sorted({g["note"] for g in graphs if g.get("note")})[:3]
        if not graphs:
            notes.append("no jitted function compiled during the session")
        return {"source": source, "scope": "per device (the compiled, partitioned program each device runs)",
                "method": "compiled.cost_analysis() (XLA HloCostAnalysis of the optimized program), once per jitted "
                          "function and signature, right after the call that compiled it (a cache hit); summed "
                          "over the top-level jitted calls of each step",
                "graphs": graphs[:20], "notes": notes}

    # --- memory: per compiled program, live arrays, donation ------------------------------------------------
    def _remember_memory(self, fn: _Jitted, m: "mem.GraphMemory") -> None:
        """XLA's memory analysis of the program just compiled (once per function and signature, from the Compiled
        the roofline costs): the function keeps its largest signature's figures."""
        entry = self._graph_mem.get(fn._name)
        if entry is None or (m.peak_bytes or 0) > (entry.get("peak_bytes") or 0):
            self._graph_mem[fn._name] = {"id": fn._name, "signatures": (entry or {}).get("signatures", 0),
                                         "donates": fn._donate, **m.to_json()}
        self._graph_mem[fn._name]["signatures"] += 1

    def graph_memory(self, final: bool = True) -> dict[str, Any]:
        graphs = list(self._graph_mem.values())
        notes = sorted({g["note"] for g in graphs if g.get("note")})[:3]
        if not graphs:
            notes.append(self._cost_note or "no jitted function compiled during the session")
        return {"scope": "per device (the compiled, partitioned program each device runs)",
                "method": "compiled.memory_analysis() (XLA's buffer assignment of the optimized program), once per "
                          "jitted function and signature, from the Compiled the roofline costs (a cache hit)",
                "graphs": graphs[:20], "notes": notes}

    def device_memory(self) -> dict[str, Any] | None:
        """The runtime's memory figures of the first local device (TPU/GPU `memory_stats()`; None on the CPU)."""
        from jax._src import xla_bridge
        if not xla_bridge.backends_are_initialized():
            return None
        try:
            stats = jax.local_devices()[0].memory_stats()
        except Exception:
            return None
        if not stats:
            return None
        return {"bytes_limit": stats.get("bytes_limit"), "bytes_in_use": stats.get("bytes_in_use"),
                "peak_bytes_in_use": stats.get("peak_bytes_in_use")}

    def _watch_outputs(self, fn: _Jitted, out) -> None:
        """After the call that compiled a function that donates nothing: weak refs to its output arrays."""
        if fn._donate or fn._library:
            return
        try:
            fn._outs = [weakref.ref(x) for x in jax.tree_util.tree_leaves(out) if type(x) is ArrayImpl]
        except Exception:
            fn._outs = None

    def _check_donation(self, fn: _Jitted, args: tuple, kwargs: dict, frame) -> None:
        """The next call after a compile, once: its arguments that are the previous call's outputs (state threaded
        through the step) were not donated, so both are on the device during the call."""
        outs, fn._outs = fn._outs, None
        alive = {id(x): x for x in (r() for r in outs) if x is not None}
        if not alive:
            return
        nums, names = fn._static
        dyn = [(fn._varnames[i] if i < len(fn._varnames) else f"args[{i}]", a) for i, a in enumerate(args)
               if i not in nums] + [(k, v) for k, v in kwargs.items() if k not in names]
        n = nbytes = 0
        shapes: list = []
        argnames: list[str] = []
        for name, a in dyn:
            hit = [x for x in jax.tree_util.tree_leaves(a) if alive.get(id(x)) is x]
            if hit:
                argnames.append(name)
                n += len(hit)
                nbytes += sum(int(x.nbytes) for x in hit)
                shapes += [list(x.shape) for x in hit[:4]]
        if not n:
            return
        loc = user_frame(frame)[0] if self.lines else None
        self._events.append(Event("missing_donation", loc, {
            "call": fn._name, "bytes": nbytes, "shapes": shapes[:6], "arrays": n, "argument": argnames[:4]}))

    def _sample_live(self, rec: StepRecord) -> None:
        """Every few boundaries: live arrays and bytes on the record. When they have risen sample after sample,
        look for what holds them (live_holders.py): the containers of arrays now, and at the next boundary the one
        that grew (both boundaries marked attributed)."""
        if self._holders_before is not None:
            before, self._holders_before = self._holders_before, None
            found = find_holder(_is_array, _array_bytes, sys._getframe(2), before)
            if found is not None:
                rec.events.append(Event("memory_growth", found[0], found[1]))
            rec.attributed = True
        if self._nsteps < self._next_live:
            return
        t0 = time.perf_counter()
        try:
            rec.live = _live_sample()
        except Exception:
            return
        # the next sample: every _LIVE_EVERY boundaries, further apart when a sample costs more than _LIVE_SHARE of
        # a step (many arrays, short steps): at most every _LIVE_MAX_EVERY
        cost = time.perf_counter() - t0
        every = math.ceil(cost / max(_LIVE_SHARE * rec.wall_time_s, 5e-6))
        self._next_live = self._nsteps + min(_LIVE_MAX_EVERY, max(_LIVE_EVERY, every))
        if self._watch.observe(rec.live_arrays) and self.lines:
            self._holders_before = holder_counts(_is_array)
            rec.attributed = True

    def _signature(self, fn: _Jitted, args: tuple, kwargs: dict) -> tuple:
        nums, names = fn._static
        static = tuple((f"argument {i}", a) for i, a in enumerate(args) if i in nums) + \
            tuple((f"argument {k!r}", v) for k, v in sorted(kwargs.items()) if k in names)
        varnames = fn._varnames
        named = [(varnames[i] if i < len(varnames) else f"args[{i}]", a)
                 for i, a in enumerate(args) if i not in nums]
        named += [(k, v) for k, v in sorted(kwargs.items()) if k not in names]
        leaves = []
        trees = []
        for name, a in named:
            flat, tree = jax.tree_util.tree_flatten_with_path(a)
            trees.append(tree)
            leaves += [(name + _path_str(p), _aval_str(x)) for p, x in flat]
        return (id(fn._jit), tuple(trees), tuple(leaves), tuple((k, _safe_repr(v)) for k, v in static))

    def _unit_key(self, fn: _Jitted) -> str:
        """The compile identity of a jitted function: its code (the same for a `jax.jit` made anew each
        iteration), told apart by the layers around it (what a `functools.partial` binds, `jax.grad`, ...),
        numbered in order of first compile."""
        if not fn._code:
            return f"jit:{fn._name}"
        key = f"jit:{fn._name}@{fn._code[0]}:{fn._code[1]}"
        if not fn._ident[2]:
            return key
        variants = self._variants.setdefault(key, [])
        if fn._ident not in variants:
            variants.append(fn._ident)
        return f"{key}#{variants.index(fn._ident) + 1}"

    def _explain_compile(self, fn: _Jitted, args: tuple, kwargs: dict, frame, count: int = 1,
                         seconds: float = 0.0) -> None:
        """Every compile of a jitted function is a compile unit (compiles.py) keyed by the function; a compile
        after its first is explained by diffing the abstract signature with that function's previous one."""
        unit = {"unit": True, "key": self._unit_key(fn), "count": count, "seconds": round(seconds, 6),
                "call": fn._name}
        loc = user_frame(frame)[0] if self.lines else None
        try:
            sig = self._signature(fn, args, kwargs)
        except Exception as exc:  # an unusual argument tree: never break the user's call for a diagnostic
            self.notes.append(f"signature of {fn._name} failed: {str(exc).splitlines()[0][:100]}")
            self._events.append(Event("compile", loc, {**unit, "cause": "unknown"}))
            return
        old, fn._sig = fn._sig, sig
        key = fn._ident
        prev_same_code = self._code_sigs.get(key) if key else None
        if key:
            self._code_sigs[key] = sig
        # an eager op on the same line (e.g. the slice that made the new shape) is explained by this one
        self._events = [e for e in self._events if not (e.kind == "compile" and e.location == loc
                                                        and (e.detail.key or "").startswith("eager:"))]
        if old is None and prev_same_code is None:
            self._events.append(Event("compile", loc, {**unit, "first": True, "cause": None}))
            return
        diffs: list[str] = []
        cause = "unknown"
        if old is None:
            old = prev_same_code
            cause = "new_function_object"
            diffs.append(f"{fn._name} was jitted again (a new jax.jit object or lambda, e.g. created inside the "
                         "loop): JAX caches compiled code per function object")
        if old[3] != sig[3]:
            cause = "static_argument" if cause == "unknown" else cause
            for (k, v_old), (_, v_new) in zip(old[3], sig[3]):
                if v_old != v_new:
                    diffs.append(f"static {k} of {fn._name}: {v_old} -> {v_new} (each new value of a static "
                                 "argument compiles a new program)")
        if old[1] != sig[1]:
            cause = "argument_structure" if cause == "unknown" else cause
            diffs.append(f"the argument pytree structure of {fn._name} changed")
        else:
            shape_change = dtype_change = False
            for (path, a_old), (_, a_new) in zip(old[2], sig[2]):
                if a_old != a_new:
                    if a_old.split("[")[0] == a_new.split("[")[0]:
                        shape_change = True
                    else:
                        dtype_change = True
                    if len(diffs) < 6:
                        diffs.append(f"input {path or '(arg)'}: {a_old} -> {a_new}")
            if cause == "unknown":
                cause = "input_shapes" if shape_change else ("input_dtypes" if dtype_change else cause)
        if not diffs:
            diffs.append(f"{fn._name} compiled again with the same signature (jit cache cleared, a changed "
                         "global/closure, or a different device/sharding)")
        self._events.append(Event("compile", loc, {**unit, "cause": cause, "differences": diffs}))

    def _read(self, arr, frame, default: str = "read") -> Location | None:
        """A device->host copy from the `_value` property (float, bool, print, device_get, ...); the user's line."""
        self._d2h += 1
        try:
            self._d2h_bytes += int(arr.nbytes)
        except Exception:
            pass
        if not self.lines:
            return None
        loc, via, call = self._blame(frame, default)
        detail: dict[str, Any] = {"call": call, "shapes": [list(arr.shape)], "bytes": int(arr.nbytes)}
        if via:
            detail["via"] = via.short()
        self._event("device_to_host_sync", loc, detail)
        return loc

    def _np_read(self, real, a, args, kwargs, frame):
        self._in_np = True
        try:
            if a._npy_value is None and not self._depth:
                loc = self._read(a, frame, "np." + real.__name__)
                out = real(a, *args, **kwargs)
                if self._ready.calls is not None:
                    self._ready.waited(a, _array_leaves, time.perf_counter())
                self._came_from_device(out, loc)
                self._came_from_device(a._npy_value, loc)
                return out
            return real(a, *args, **kwargs)
        finally:
            self._in_np = False

    def _came_from_device(self, x, loc: Location | None) -> None:
        """Remember a NumPy array read back from the device (weakly): passed into a jitted call again, it is a
        round trip (parameters pulled to the host and sent back), not input data."""
        if type(x) is not np.ndarray:
            return
        try:
            ref = weakref.ref(x)
        except TypeError:
            return
        if len(self._from_device) >= 4096:
            self._from_device = {k: v for k, v in self._from_device.items() if v[0]() is not None}
            if len(self._from_device) >= 4096:
                return
        self._from_device[id(x)] = (ref, loc)

    def _eager_upload(self, obj, out, call: str, frame) -> None:
        """`jnp.array(host_data)` outside any jitted function: an implicit host->device copy, counted like one
        made by a jitted call's argument (data, a round trip, or a value the loop makes on the host)."""
        if not isinstance(out, ArrayImpl):
            return
        leaves: list = []
        if isinstance(obj, np.ndarray):
            kind = "numpy"
        elif isinstance(obj, (list, tuple)):
            leaves = jax.tree_util.tree_leaves(obj)  # numbers, or host arrays
            if not leaves or any(isinstance(v, jax.Array) for v in leaves):  # device arrays stacked: no copy
                return
            kind = "python list"
        else:
            return
        nbytes = int(out.nbytes)
        self._h2d += 1
        self._h2d_bytes += nbytes
        if not self.lines:
            return
        back = self._round_trip(obj) if kind == "numpy" else None
        made: list[str] = []
        if back is not None:
            where = "round_trip"
            if back[1] is not None:
                made.append(f"read back from the device at {back[1].short()}")
        else:
            found = self._call_origins(frame, 1)
            o = found.positional[0] if found and found.positional else None
            if o is None and found is None and kind == "python list" and all(isinstance(v, _SCALARS) for v in leaves):
                # numbers the loop puts in a list (a schedule, hyperparameters): made on the host each time
                o = provenance.Origin(provenance.HOST_MADE, "a Python list of numbers", frame.f_lineno)
            where = o.kind if o is not None else "data"
            if o is not None:
                made.append(f"{o.text} (line {o.line})")
        loc = user_frame(frame)[0]
        self._event("host_to_device_transfer", loc,
                    {"call": call, "shapes": [list(out.shape)], "bytes": nbytes, "transfers": 1, "arrays": 1,
                     "source": [kind], "origins": {where: nbytes}, "made_by": made, "eager": True,
                     "avoidable": where != "data"})

    def _round_trip(self, x) -> tuple | None:
        hit = self._from_device.get(id(x))
        return hit if hit is not None and hit[0]() is x else None

    def _blame(self, frame, default: str) -> tuple[Location | None, Location | None, str]:
        """The user's line, a library line under it, and what read the value (the outermost tool frame)."""
        from ..frames import TOOL, classify
        call = None
        f = frame
        while f is not None and classify(f.f_code.co_filename) == TOOL:
            call = f.f_code.co_name
            f = f.f_back
        if f is frame and frame is not None:  # called straight from user code: np.asarray/np.array
            call = None
        loc, via = user_frame(frame)
        name = _READ_NAMES.get(call, default) if call else default
        return loc, via, name


_UNSEEN = object()


def _fingerprint(args: tuple, kwargs: dict) -> list:
    """The arrays a call gets, by identity (weakly held) and size."""
    out = []
    for x in jax.tree_util.tree_leaves((args, kwargs)):
        if type(x) is ArrayImpl or type(x) is np.ndarray:
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


def _arg_origin(found, pos, nargs: int):
    """The origin of argument `pos` (an index, or a keyword) from the call's source: positional arguments are
    aligned from the end (a bound method's call passes `self` first, which the source does not show)."""
    positional, keywords = found
    if isinstance(pos, str):
        return keywords.get(pos)
    k = pos - (nargs - len(positional))
    return positional[k] if 0 <= k < len(positional) else None


def _safe_repr(v) -> str:
    try:
        r = repr(v)
    except Exception:
        r = f"<{type(v).__name__}>"
    return r if len(r) <= 60 else r[:57] + "..."


def _donates(kwargs: dict) -> bool:
    """Whether `jax.jit(..., donate_argnums=..., donate_argnames=...)` donates any argument."""
    nums, names = kwargs.get("donate_argnums"), kwargs.get("donate_argnames")
    return (isinstance(nums, int) or bool(nums)) or (isinstance(names, str) or bool(names))


def _live_sample() -> tuple[int, int]:
    """Live device arrays and their bytes (`jax.live_arrays()`: a list of the runtime's live arrays; metadata
    only, no sync)."""
    arrays = jax.live_arrays()
    return len(arrays), int(sum(a.size * a.dtype.itemsize for a in arrays))  # 3x cheaper than .nbytes


def _is_array(x) -> bool:
    return type(x) is ArrayImpl


def _array_bytes(x) -> int:
    return int(x.nbytes)


def _array_leaves(out) -> list:
    try:
        return [x for x in jax.tree_util.tree_leaves(out) if type(x) is ArrayImpl]
    except Exception:
        return []
