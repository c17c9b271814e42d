"""The stand-in for what `jax.jit` (and `pmap`, `shard_map`) return during a session, and what is known about each
jitted function: its identity as a step candidate, its static arguments, its compiled signatures and costs."""
from __future__ import annotations

import functools
import types
from typing import Any

from ...frames import USER, classify


class JitInfo:
    """What the parts know about one jitted function (the wrapper's state, read and written by its owner parts)."""

    __slots__ = ("jit", "name", "static", "code", "ident", "key", "library", "varnames", "sig", "scans",
                 "deep", "multi", "steady", "costs", "cost", "donate", "outs", "__weakref__")

    def __init__(self, jitted, fun, kwargs: dict):
        self.jit = jitted
        inner, code, layers, shifted = user_code(fun)
        self.name = (getattr(fun, "__qualname__", None) or getattr(inner, "__qualname__", None)
                     or getattr(fun, "__name__", None) or repr(fun)[:60])
        self.code = (code.co_filename, code.co_firstlineno) if code else None
        nums = kwargs.get("static_argnums")
        names = kwargs.get("static_argnames")
        nums = (nums,) if isinstance(nums, int) else tuple(nums or ())
        names = (names,) if isinstance(names, str) else tuple(names or ())
        if code and not shifted and not names and nums:  # jax also accepts the names of static positional args
            names = tuple(code.co_varnames[i] for i in nums if 0 <= i < code.co_argcount)
        self.static = (nums, names)
        # what a step function is recognised by: the jitted code (a `jax.jit(f)` or `jax.jit(lambda ..)` made
        # anew inside the loop is the same step each iteration), or this object when the callable has no code
        self.ident = (self.code, self.name, layers, nums, names) if code else None
        self.key: Any = self.ident or id(self)  # its identity among step candidates
        # a library's own jitted helper (optax's bias correction inside an eager `tx.update`): work inside the
        # user's iteration, never a step function or an evaluation of its own
        self.library = code is not None and classify(code.co_filename) != USER
        self.varnames = code.co_varnames[:code.co_argcount] if code and not shifted else ()
        self.sig: tuple | None = None  # abstract signature at the last compile (compiles.py)
        # implicit transfers (transfers.scan): calls scanned, the arguments whose containers held host data or
        # uncommitted arrays on the last full scan, whether the call spans several devices
        self.scans = 0
        self.deep: set = set()
        self.multi = False
        self.steady: tuple | None = None  # the last scan's call, when its host data were plain batches (scan)
        self.costs: dict[tuple, Any] = {}  # signature -> hlo_cost.GraphCost of its compiled program (cost.py)
        self.cost: Any = None  # the cost while only one signature has compiled
        # donation (memory.py): whether it donates anything; weak refs to the outputs of the call that compiled it
        self.donate = donates(kwargs)
        self.outs: list | None = None

    def same_function(self, other: "JitInfo | None") -> bool:
        return other is not None and (self is other or (self.ident is not None and self.ident == other.ident))

    def dynamic(self, args: tuple, kwargs: dict, named: bool = False) -> list[tuple]:
        """The non-static arguments as (position or keyword, value); `named`: by parameter name."""
        nums, names = self.static
        if not nums and not names and not named:  # no static arguments (most step functions): every one
            return [*enumerate(args), *kwargs.items()]
        if named:
            pos = [(self.varnames[i] if i < len(self.varnames) else f"args[{i}]", a)
                   for i, a in enumerate(args) if i not in nums]
        else:
            pos = [(i, a) for i, a in enumerate(args) if i not in nums]
        return pos + [(k, v) for k, v in kwargs.items() if k not in names]


class Jitted:
    """Stands in for the object `jax.jit` returns: same call, attributes forwarded (lower, trace, ...). A call
    goes to `calls.call(info, args, kwargs)` (calls.py)."""

    __slots__ = ("_jit", "_info", "_calls", "__weakref__")

    def __init__(self, jitted, calls, fun, kwargs: dict):
        self._jit = jitted
        self._info = JitInfo(jitted, fun, kwargs)
        self._calls = calls

    def __call__(self, *args, **kwargs):
        return self._calls.call(self._info, args, kwargs)

    def __getattr__(self, name):
        return getattr(self._jit, name)

    def __get__(self, obj, objtype=None):  # jitted methods
        return self if obj is None else types.MethodType(self, obj)

    def __repr__(self):
        return f"<ptxla_perf-wrapped {self._jit!r}>"

    @property
    def __wrapped__(self):
        return getattr(self._jit, "__wrapped__", None)


def user_code(fun) -> tuple[Any, types.CodeType | None, tuple, bool]:
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


def donates(kwargs: dict) -> bool:
    """Whether `jax.jit(..., donate_argnums=..., donate_argnames=...)` donates any argument."""
    nums, names = kwargs.get("donate_argnums"), kwargs.get("donate_argnames")
    return (isinstance(nums, int) or bool(nums)) or (isinstance(names, str) or bool(names))
