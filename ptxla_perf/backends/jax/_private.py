"""Every private or version-dependent JAX name the backend uses, looked up in this one module.

JAX moves its internals between releases (`jax._src.*`, the monitoring listener API, `Compiled`'s analyses). Each
name is looked up here, once, without raising: a missing one turns off the one feature that needs it, and
`Capabilities.notes()` says so in the report (`not measured: <feature> (needs <name>, jax >= X)`). The rest of the
package imports these names from here and asks `Capabilities` before using a feature.

Checked against the sources of jax 0.6.2, 0.7.0, 0.7.2, 0.8.0-0.8.2, 0.10.2 and 0.12.0.1: the public
`jax.monitoring.unregister_*` functions exist from 0.8.1 (before: `jax._src.monitoring._unregister_*_by_callback`);
`ad.backward_pass3` from 0.7.2 (before: `ad.backward_pass`, which every reverse pass calls). 0.12 keeps every name
used here (the event names in jax._src.dispatch, `jax.stages.Compiled`'s analyses, `jax.shard_map`, `ArrayImpl`'s
`_value` property and `_npy_value` cache - a sharded array is now read in one copy, still through `_value`).
"""
from __future__ import annotations

import dataclasses
import importlib
from typing import Any, Callable

import jax

from ...model import versions

# jax.monitoring event names (jax._src.dispatch, jax._src.compiler): stable from 0.4 through 0.12.0.1
BACKEND_COMPILE = "/jax/core/compile/backend_compile_duration"
TRACE = "/jax/core/compile/jaxpr_trace_duration"
LOWER = "/jax/core/compile/jaxpr_to_mlir_module_duration"
CACHE_HIT = "/jax/compilation_cache/cache_hits"


def _lookup(module: str, name: str | None = None) -> Any:
    """`module.name`, or None when the module or the name is missing (or fails to import)."""
    try:
        mod = importlib.import_module(module)
    except Exception:
        return None
    return mod if name is None else getattr(mod, name, None)


class _NoArray:
    """Stands in for `ArrayImpl` when it is missing: no object is of this type, so every check is False."""


ArrayImpl: type = _lookup("jax._src.array", "ArrayImpl") or _NoArray
AD = _lookup("jax._src.interpreters.ad")
# the function every reverse pass runs (a backward pass traced inside a jitted function: it computes gradients)
GRAD_PASS = next((n for n in ("backward_pass3", "backward_pass") if callable(getattr(AD, n, None))), None)
_xla_bridge = _lookup("jax._src.xla_bridge")


def host_copy(arr: Any) -> Any:
    """ArrayImpl's cached host copy (`_npy_value`: None until read); None where a version has no such field (every
    read is then counted)."""
    return getattr(arr, "_npy_value", None)


def committed(arr: Any) -> bool:
    """Whether an array is committed to its device (`_committed`); True where unknown (never a transfer)."""
    return getattr(arr, "_committed", True)


def backends_initialized() -> bool:
    """Whether JAX's runtime is up (asking a device before the script did would initialise it). False when the
    private check is missing: the device is then not asked at all."""
    check = getattr(_xla_bridge, "backends_are_initialized", None)
    return bool(check()) if check is not None else False


@dataclasses.dataclass(frozen=True)
class Listeners:
    """The monitoring API: register and (where the version has it) unregister, duration and plain events."""

    register_duration: Callable | None
    register_event: Callable | None
    unregister_duration: Callable | None
    unregister_event: Callable | None


def listeners() -> Listeners:
    """Public names first (jax >= 0.8.1 for unregister), then the private ones older versions have."""
    mon = getattr(jax, "monitoring", None) or _lookup("jax.monitoring")
    src = _lookup("jax._src.monitoring")

    def pick(*names: str) -> Callable | None:
        for owner, name in ((m, n) for n in names for m in (mon, src)):
            fn = getattr(owner, name, None)
            if callable(fn):
                return fn
        return None
    return Listeners(pick("register_event_duration_secs_listener"), pick("register_event_listener"),
                     pick("unregister_event_duration_listener", "_unregister_event_duration_listener_by_callback"),
                     pick("unregister_event_listener", "_unregister_event_listener_by_callback"))


# feature -> (what is lost when it is off, the name it needs, the oldest jax known to have it)
_FEATURES = {
    "reads": ("device-to-host reads (float, print, device_get)", "jax._src.array.ArrayImpl._value", "0.4.1"),
    "device_wait": ("device wait and device time (block_until_ready)", "ArrayImpl.block_until_ready", "0.4.1"),
    "gradients": ("which jitted function computes gradients (step inference falls back to repeated calls)",
                  "jax._src.interpreters.ad.backward_pass3 or backward_pass", "0.4.1"),
    "compile_events": ("compiles and compile time", "jax.monitoring.register_event_duration_secs_listener",
                       "0.4.1"),
    "listener_removal": ("removal of the compile listeners at the end (left registered, inert)",
                         "jax.monitoring.unregister_event_duration_listener", "0.8.1"),
    "cost_analysis": ("program costs (roofline: flops, bytes)", "jax.stages.Compiled.cost_analysis", "0.4.1"),
    "memory_analysis": ("per-program memory (graph memory)", "jax.stages.Compiled.memory_analysis", "0.4.1"),
    "live_arrays": ("live arrays per step (memory_growth)", "jax.live_arrays", "0.4.1"),
    "annotations": ("StepTraceAnnotation steps", "jax.profiler.StepTraceAnnotation", "0.4.1"),
    "shard_map": ("jax.shard_map calls as executions", "jax.shard_map", "0.6.0"),
    "runtime_state": ("device kind, process index and device memory", "jax._src.xla_bridge.backends_are_initialized",
                      "0.4.1"),
}


@dataclasses.dataclass(frozen=True)
class Capabilities:
    """One flag per feature that needs a private or version-dependent name; `off` holds the reason of each one off."""

    reads: bool
    device_wait: bool
    gradients: bool
    compile_events: bool
    listener_removal: bool
    cost_analysis: bool
    memory_analysis: bool
    live_arrays: bool
    annotations: bool
    shard_map: bool
    runtime_state: bool
    off: tuple[tuple[str, str], ...] = ()  # (feature, note) for each feature off
    version_note: str | None = None  # a jax outside the measured range, and the older names used in its place

    def notes(self) -> list[str]:
        return [note for _, note in self.off] + ([self.version_note] if self.version_note else [])


def annotation_base() -> tuple[Any, Any] | None:
    """`StepTraceAnnotation`'s base `__enter__`/`__exit__` (TraceAnnotation): the wrappers call them."""
    stp = getattr(getattr(jax, "profiler", None), "StepTraceAnnotation", None)
    mro = getattr(stp, "__mro__", ())
    if len(mro) < 2 or not hasattr(mro[1], "__enter__") or not hasattr(mro[1], "__exit__"):
        return None
    return mro[1].__enter__, mro[1].__exit__


def probe() -> Capabilities:
    """Look every feature's names up now (at the session's start: a test may have taken some away)."""
    ls = listeners()
    value = getattr(ArrayImpl, "__dict__", {}).get("_value")
    compiled = _lookup("jax.stages", "Compiled")
    flags = {
        "reads": isinstance(value, property),
        "device_wait": "block_until_ready" in getattr(ArrayImpl, "__dict__", {})
        and callable(getattr(jax, "block_until_ready", None)),
        "gradients": GRAD_PASS is not None,
        "compile_events": ls.register_duration is not None and ls.register_event is not None,
        "listener_removal": ls.unregister_duration is not None and ls.unregister_event is not None,
        "cost_analysis": callable(getattr(compiled, "cost_analysis", None)),
        "memory_analysis": callable(getattr(compiled, "memory_analysis", None)),
        "live_arrays": callable(getattr(jax, "live_arrays", None)),
        "annotations": annotation_base() is not None,
        "shard_map": callable(getattr(jax, "shard_map", None)),
        "runtime_state": callable(getattr(_xla_bridge, "backends_are_initialized", None)),
    }
    version = getattr(jax, "__version__", "?")
    off = tuple((f, f"not measured: {what} (needs {name}, jax >= {since}; this is jax {version})")
                for f, (what, name, since) in _FEATURES.items() if not flags[f])
    return Capabilities(**flags, off=off, version_note=_version_note(version, ls))


def _version_note(version: str, ls: Listeners) -> str | None:
    """Outside the measured range (versions.MEASURED, as doctor says it): say so, and which older names stood in for
    newer ones."""
    outside = versions.words("jax", version)
    if outside is None:
        return None
    older = []
    if GRAD_PASS == "backward_pass":
        older.append("gradients found through ad.backward_pass (backward_pass3: jax >= 0.7.2)")
    if ls.unregister_duration is not None and ls.unregister_duration.__name__.startswith("_"):
        older.append("listeners removed through jax._src.monitoring (public: jax >= 0.8.1)")
    return (f"{outside}: every feature without a 'not measured' note found the names it needs and is measured"
            + (f"; {'; '.join(older)}" if older else ""))
