"""JAX in a notebook: the step function is jitted in an earlier cell (or in a module the notebook imported) before
the profiled block starts, and the JAX adapter only sees functions jitted during its session (it wraps `jax.jit`).
A jitted function is a C++ object whose call cannot be hooked, so for the block every place the caller's code can
reach it by name is rebound to the adapter's wrapper around the same jitted object (no new `jax.jit`, no
recompile; its static and donated arguments as jitted), and put back when the block ends. Those places: the
caller's names, and the attributes of what they hold, a few levels deep: the user's own modules (`import train as
T; T.train_step`, `from pkg import train`; a loop inside the module calls its global), classes, instances and
dicts (`steps["train"]`). Libraries' modules are left alone."""
from __future__ import annotations

import sys
import types
from typing import Any

from ..frames import USER, classify

_JIT_KWARGS = ("static_argnums", "static_argnames", "donate_argnums", "donate_argnames")
_DEPTH = 3  # namespace -> package -> module -> function: `import pkg; pkg.train.train_step(...)`
_MAX_ITEMS = 10_000  # a larger dict is data (a dataset, a cache), not where functions are kept
_KERNEL_NAMES = frozenset({"In", "Out", "exit", "quit", "get_ipython"})  # IPython's history and helpers


def adopt(namespace: dict[str, Any], adapter) -> list[tuple[Any, str, Any, Any]]:
    """Rebind the jitted functions reachable from `namespace`; returns what `restore` puts back."""
    wrapper = _wrapper(adapter)
    if wrapper is None:
        return []
    swapped: list[tuple[Any, str, Any, Any]] = []
    wrapped_of: dict[int, Any] = {}  # one wrapper per jitted object, wherever it is reached from
    seen: set[int] = {id(namespace)}
    level = [(namespace, True)]
    for _ in range(_DEPTH):
        found = []
        for holder, top in level:
            for name, value in _items(holder):
                if not isinstance(name, str) or (top and (name.startswith("_") or name in _KERNEL_NAMES)):
                    continue
                if type(value).__name__ == "PjitFunction":
                    wrapped = wrapped_of.get(id(value))
                    if wrapped is None:
                        wrapped = wrapped_of[id(value)] = _wrap(wrapper, value)
                    if wrapped is not None and _set(holder, name, wrapped):
                        swapped.append((holder, name, value, wrapped))
                elif id(value) not in seen and _holds_user_code(value):
                    seen.add(id(value))
                    found.append((value, False))
        level = found
    return swapped


def _wrap(wrapper, value):
    info = getattr(value, "_jit_info", None)
    kwargs = {k: getattr(info, k) for k in _JIT_KWARGS if getattr(info, k, None)}
    try:
        return wrapper(value, getattr(value, "__wrapped__", None) or value, kwargs)
    except Exception:  # noqa: BLE001 - a function we cannot wrap runs as it is (its steps go unseen)
        return None


def _holds_user_code(value) -> bool:
    """A module, class or instance of the user's own code, or a plain dict: where a step function may be kept."""
    if type(value) is dict:
        return len(value) <= _MAX_ITEMS
    if isinstance(value, types.ModuleType):
        return _user_file(getattr(value, "__file__", None))
    if isinstance(value, type):
        return _user_module(getattr(value, "__module__", None))
    if isinstance(value, (types.FunctionType, types.BuiltinFunctionType, types.MethodType)):
        return False
    return _user_module(getattr(type(value), "__module__", None)) and isinstance(getattr(value, "__dict__", None),
                                                                                  dict)


def _user_module(name: str | None) -> bool:
    if not isinstance(name, str):
        return False
    mod = sys.modules.get(name)
    return name == "__main__" or (mod is not None and _user_file(getattr(mod, "__file__", None)))


def _user_file(path) -> bool:
    return isinstance(path, str) and classify(path) == USER


def _items(holder) -> list:
    """(name, value) pairs of a holder, read without running the user's code (no properties, no __getattr__)."""
    try:
        if type(holder) is dict:
            return list(holder.items())
        if isinstance(holder, type):
            return list(vars(holder).items())
        return list(vars(holder).items())  # a module's globals, an instance's attributes
    except Exception:  # noqa: BLE001 - a holder we cannot read keeps its functions as they are
        return []


def _set(holder, name: str, value) -> bool:
    try:
        if type(holder) is dict:
            holder[name] = value
        else:
            setattr(holder, name, value)  # a module, a class (its __dict__ is read-only), an instance
        return True
    except Exception:  # noqa: BLE001 - a frozen object: its function runs unwrapped
        return False


def _get(holder, name: str):
    try:
        return holder.get(name) if type(holder) is dict else vars(holder).get(name)
    except Exception:  # noqa: BLE001
        return None


def _wrapper(adapter):
    """The adapter's own wrapper of a jitted object: its `wrap_jitted(jitted, fun, kwargs)` where it has one, else
    the `_Jitted` class beside it (the adapter as one module)."""
    wrap = getattr(adapter, "wrap_jitted", None)
    if wrap is not None:
        return wrap
    cls = getattr(sys.modules.get(type(adapter).__module__), "_Jitted", None)
    return None if cls is None else (lambda jitted, fun, kwargs: cls(jitted, adapter, fun, kwargs))


def restore(namespace: dict[str, Any], swapped: list[tuple[Any, str, Any, Any]]) -> None:
    """Put the user's own jitted functions back (a name the block rebound itself is left as it is)."""
    for holder, name, original, wrapped in reversed(swapped):
        if _get(holder, name) is wrapped:
            _set(holder, name, original)
