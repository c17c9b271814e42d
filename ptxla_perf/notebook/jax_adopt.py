"""JAX in a notebook: the step function is jitted in an earlier cell, before the profiled block starts, and the
JAX adapter only sees functions jitted during its session (it wraps `jax.jit`). For the block, the caller's names
bound to jitted functions are rebound to the adapter's wrapper around the same jitted object (no new `jax.jit`,
no recompile; its static and donated arguments as jitted), and put back when the block ends."""
from __future__ import annotations

import sys
from typing import Any

_JIT_KWARGS = ("static_argnums", "static_argnames", "donate_argnums", "donate_argnames")


def adopt(namespace: dict[str, Any], adapter) -> list[tuple[str, Any, Any]]:
    """Rebind the jitted functions of `namespace`; returns what `restore` puts back."""
    wrapper = _wrapper(adapter)
    if wrapper is None:
        return []
    swapped = []
    for name, value in list(namespace.items()):
        if type(value).__name__ != "PjitFunction" or name.startswith("_"):
            continue
        info = getattr(value, "_jit_info", None)
        kwargs = {k: getattr(info, k) for k in _JIT_KWARGS if getattr(info, k, None)}
        try:
            wrapped = wrapper(value, getattr(value, "__wrapped__", None) or value, kwargs)
        except Exception:  # noqa: BLE001 - a function we cannot wrap runs as it is (its steps go unseen)
            continue
        namespace[name] = wrapped
        swapped.append((name, value, wrapped))
    return swapped


def _wrapper(adapter):
    """The adapter's own wrapper of a jitted object: its `wrap_jitted(jitted, fun, kwargs)` where it has one, else
    the `_Jitted` class beside it (the adapter as one module)."""
    wrap = getattr(adapter, "wrap_jitted", None)
    if wrap is not None:
        return wrap
    cls = getattr(sys.modules.get(type(adapter).__module__), "_Jitted", None)
    return None if cls is None else (lambda jitted, fun, kwargs: cls(jitted, adapter, fun, kwargs))


def restore(namespace: dict[str, Any], swapped: list[tuple[str, Any, Any]]) -> None:
    """Put the user's own jitted functions back (a name the block rebound itself is left as it is)."""
    for name, original, wrapped in swapped:
        if namespace.get(name) is wrapped:
            namespace[name] = original
