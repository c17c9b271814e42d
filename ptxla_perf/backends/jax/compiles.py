"""Compiles: counted from `jax.monitoring` duration events (trace, lowering, backend compile), and explained. A
compile inside a wrapped call is explained by diffing the abstract signature (shapes, dtypes, static arguments,
tree structure) with the previous compile of the same function; one outside any jitted call is an eager op,
blamed on its line (one compile unit per user line and step)."""
from __future__ import annotations

import sys

import jax
import numpy as np

from ...frames import user_frame
from ...model.records import Event
from . import _private as P
from .jitted import JitInfo
from .ledger import Ledger, Scope

_SCALARS = (int, float, bool, complex)


class Compiles:
    """Owns the compile identities (signatures per function, partial-bound variants) and the listeners' state."""

    def __init__(self, ledger: Ledger, scope: Scope, notes: list[str]):
        self._ledger = ledger
        self._notes = notes
        self._scope = scope
        self._code_sigs: dict[tuple, tuple] = {}  # function identity -> signature at its last compile
        self._variants: dict[str, list] = {}  # compile key -> identities of its partial-bound variants
        self.own_compiles = 0  # backend compiles inside our own lower().compile() for a cost (cost.py)

    # --- jax.monitoring listeners -------------------------------------------------------------------
    def on_duration(self, event: str, duration: float, **kwargs) -> None:
        if self._scope.costing:  # our own lower().compile() for a cost (a cache hit: it should not compile at all)
            if event == P.BACKEND_COMPILE:
                self.own_compiles += 1
            return
        led = self._ledger
        if event == P.BACKEND_COMPILE:
            led.compiles += 1
            led.compile_time += duration
            if not self._scope.depth:  # an op outside any jitted function compiled
                self._eager(sys._getframe(1), duration)
        elif event in (P.TRACE, P.LOWER):
            led.compile_time += duration

    def on_event(self, event: str, **kwargs) -> None:
        if not self._scope.costing and event == P.CACHE_HIT:
            self._ledger.cached += 1

    def _eager(self, frame, duration: float) -> None:
        """One compile unit per user line and step; its ops listed."""
        loc, _ = user_frame(frame)
        key = f"eager:{loc.file}:{loc.line}" if loc else "eager:?"
        op = _eager_op(frame) or "op"
        for e in self._ledger.events:
            if e.kind == "compile" and e.detail.key == key:
                e.detail.count += 1
                e.detail.seconds = round(e.detail.seconds + duration, 6)
                e.detail.ops = e.detail.ops + [op] if len(e.detail.ops) < 16 else e.detail.ops
                return
        self._ledger.events.append(Event("compile", loc if self._ledger.lines else None, {
            "unit": True, "key": key, "count": 1, "seconds": round(duration, 6), "ops": [op], "cause": "eager_op"}))

    # --- a jitted function's compile ------------------------------------------------------------------
    def explain(self, fn: JitInfo, args: tuple, kwargs: dict, frame, count: int, seconds: float) -> None:
        """Every compile of a jitted function is a compile unit (the package's compiles.py) keyed by the
        function; a compile after its first is explained by diffing its signature with the previous one."""
        unit = {"unit": True, "key": self._unit_key(fn), "count": count, "seconds": round(seconds, 6),
                "call": fn.name}
        loc = user_frame(frame)[0] if self._ledger.lines else None
        events = self._ledger.events
        try:
            sig = signature(fn, args, kwargs)
        except Exception as exc:  # an unusual argument tree: never break the user's call for a diagnostic
            self._notes.append(f"signature of {fn.name} failed: {str(exc).splitlines()[0][:100]}")
            events.append(Event("compile", loc, {**unit, "cause": "unknown"}))
            return
        old, fn.sig = fn.sig, sig
        key = fn.ident
        prev_same_code = self._code_sigs.get(key) if key else None
        if key:
            self._code_sigs[key] = sig
        # an eager op on the same line (e.g. the slice that made the new shape) is explained by this one
        events[:] = [e for e in events if not (e.kind == "compile" and e.location == loc
                                               and (e.detail.key or "").startswith("eager:"))]
        if old is None and prev_same_code is None:
            events.append(Event("compile", loc, {**unit, "first": True, "cause": None}))
            return
        cause, diffs = _differences(fn.name, old, prev_same_code, sig)
        events.append(Event("compile", loc, {**unit, "cause": cause, "differences": diffs}))

    def _unit_key(self, fn: JitInfo) -> str:
        """The compile identity of a jitted function: its code (the same for a `jax.jit` made anew each
        iteration), told apart by the layers around it (what a `functools.partial` binds, `jax.grad`, ...),
        numbered in order of first compile."""
        if not fn.code:
            return f"jit:{fn.name}"
        key = f"jit:{fn.name}@{fn.code[0]}:{fn.code[1]}"
        if not fn.ident[2]:
            return key
        variants = self._variants.setdefault(key, [])
        if fn.ident not in variants:
            variants.append(fn.ident)
        return f"{key}#{variants.index(fn.ident) + 1}"


def _differences(name: str, old: tuple | None, prev_same_code: tuple | None, sig: tuple) -> tuple[str, list[str]]:
    """The cause of a recompile and what changed, in words."""
    diffs: list[str] = []
    cause = "unknown"
    if old is None:
        old = prev_same_code
        cause = "new_function_object"
        diffs.append(f"{name} was jitted again (a new jax.jit object or lambda, e.g. created inside the "
                     "loop): JAX caches compiled code per function object")
    if old[3] != sig[3]:
        cause = "static_argument" if cause == "unknown" else cause
        for (k, v_old), (_, v_new) in zip(old[3], sig[3]):
            if v_old != v_new:
                diffs.append(f"static {k} of {name}: {v_old} -> {v_new} (each new value of a static "
                             "argument compiles a new program)")
    if old[1] != sig[1]:
        cause = "argument_structure" if cause == "unknown" else cause
        diffs.append(f"the argument pytree structure of {name} changed")
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
        diffs.append(f"{name} compiled again with the same signature (jit cache cleared, a changed "
                     "global/closure, or a different device/sharding)")
    return cause, diffs


def signature(fn: JitInfo, args: tuple, kwargs: dict) -> tuple:
    """What JAX keys a compiled program on: the tree structures, each leaf's abstract value, the static values."""
    nums, names = fn.static
    static = tuple((f"argument {i}", a) for i, a in enumerate(args) if i in nums) + \
        tuple((f"argument {k!r}", v) for k, v in sorted(kwargs.items()) if k in names)
    varnames = fn.varnames
    named = [(varnames[i] if i < len(varnames) else f"args[{i}]", a)
             for i, a in enumerate(args) if i not in nums]
    named += [(k, v) for k, v in sorted(kwargs.items()) if k not in names]
    leaves = []
    trees = []
    for name, a in named:
        flat, tree = jax.tree_util.tree_flatten_with_path(a)
        trees.append(tree)
        leaves += [(name + _path_str(p), _aval_str(x)) for p, x in flat]
    return (id(fn.jit), tuple(trees), tuple(leaves), tuple((k, _safe_repr(v)) for k, v in static))


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


def _safe_repr(v) -> str:
    try:
        r = repr(v)
    except Exception:
        r = f"<{type(v).__name__}>"
    return r if len(r) <= 60 else r[:57] + "..."


def _eager_op(frame) -> str | None:
    """The primitive an eager compile is for: the `prim` of jax's apply_primitive frame on the stack (a frame
    name, not an import: nothing to look up in _private; None where a version names it otherwise)."""
    f = frame
    while f is not None:
        if f.f_code.co_name == "apply_primitive" and "prim" in f.f_locals:
            return str(getattr(f.f_locals["prim"], "name", f.f_locals["prim"]))
        f = f.f_back
    return None
