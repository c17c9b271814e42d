"""Where a host value passed to the device came from, read from the user's source (no runtime cost: once per call
site). A NumPy array copied to the device every step is either data (a loader's batch: the input pipeline) or a
value the loop itself makes on the host each step: random draws (`np.random.normal(...)`, a NumPy `Generator`'s
methods, Python's `random`), constants and Python lists it builds (`np.zeros(...)`, `[lr, beta]`). The second kind
is avoidable (draw it on the device with `jax.random`, make it inside the jitted function or once before the loop).

Pure logic on the source text (`ast` + `linecache`): the call at the user's line, its argument expressions, and the
latest assignment of a name used there within the same function, resolved through the module's imports
(`import numpy as np`, `from jax import random`). Anything not recognised is data (the safe default: no finding
changes severity on a guess)."""
from __future__ import annotations

import ast
import functools
import linecache
from typing import NamedTuple

HOST_RANDOM = "host_random"  # drawn on the host each step (np.random, a NumPy Generator, Python's random)
HOST_MADE = "host_made"  # built on the host each step (np.zeros/arange/full..., a Python list literal)

_MAKERS = {"zeros", "ones", "full", "empty", "arange", "linspace", "logspace", "eye", "identity", "zeros_like",
           "ones_like", "full_like", "empty_like", "tri", "meshgrid"}
_CONVERTERS = {"array", "asarray", "ascontiguousarray", "stack", "concatenate", "vstack", "hstack", "float32",
               "float64", "int32", "int64"}
_PASS_THROUGH = {"astype", "reshape", "copy", "view", "squeeze", "transpose", "ravel", "flatten", "clip"}
_RNG_FACTORIES = ("numpy.random.default_rng", "numpy.random.RandomState", "numpy.random.Generator",
                  "random.Random", "numpy.random.PCG64")


class Origin(NamedTuple):
    kind: str  # HOST_RANDOM | HOST_MADE
    text: str  # the expression that made it, as written
    line: int


class CallArgs(NamedTuple):
    """The origins of a call's arguments: positional (None where unknown / data) and by keyword."""

    positional: tuple
    keywords: dict


@functools.lru_cache(maxsize=64)
def _module(filename: str) -> ast.Module | None:
    lines = linecache.getlines(filename)
    if not lines:
        return None
    try:
        return ast.parse("".join(lines), filename)
    except (SyntaxError, ValueError):
        return None


@functools.lru_cache(maxsize=64)
def _imports(filename: str) -> dict[str, str]:
    """alias -> module path: `import numpy as np` -> {"np": "numpy"}, `from jax import random` ->
    {"random": "jax.random"}, `from numpy.random import normal` -> {"normal": "numpy.random.normal"}."""
    tree = _module(filename)
    out: dict[str, str] = {}
    for node in ast.walk(tree) if tree else ():
        if isinstance(node, ast.Import):
            for a in node.names:
                out[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for a in node.names:
                out[a.asname or a.name] = f"{node.module}.{a.name}"
    return out


def _dotted(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


class _Scope:
    """The innermost function (or the module) around a line, and the module's imports."""

    def __init__(self, filename: str, line: int):
        self.imports = _imports(filename)
        tree = _module(filename)
        self.body: ast.AST | None = tree
        self.line = line
        for node in ast.walk(tree) if tree else ():
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                    node.lineno <= line <= (node.end_lineno or node.lineno):
                if self.body is tree or node.lineno >= getattr(self.body, "lineno", 0):
                    self.body = node
        # what runs each iteration: the innermost loop around the line in this scope (a function without a
        # loop around the call runs once per call, all of it)
        self.region = (0, 1 << 30)
        for node in _walk_scope(self.body):
            if isinstance(node, (ast.For, ast.AsyncFor, ast.While)) and \
                    node.lineno <= line <= (node.end_lineno or node.lineno) and node.lineno >= self.region[0]:
                self.region = (node.lineno, node.end_lineno or node.lineno)

    def resolve(self, name: str | None) -> str | None:
        if not name:
            return None
        head, _, rest = name.partition(".")
        full = self.imports.get(head)
        if full is None:
            return name
        return f"{full}.{rest}" if rest else full

    def assignment(self, name: str, before: int, anywhere: bool = False) -> tuple[ast.AST | None, int]:
        """The value last assigned to `name` before line `before` in this scope, inside the loop around the call
        unless `anywhere` (a value made once before the loop is not made each step); for a `for` target: None
        (what the loop iterates over, a loader: data); and its line."""
        best: tuple[int, ast.AST | None] | None = None
        lo, hi = (0, 1 << 30) if anywhere else self.region
        for node in _walk_scope(self.body):
            line = getattr(node, "lineno", None)
            if line is None or line > before or not lo <= line <= hi:
                continue
            if isinstance(node, ast.Assign) and any(_binds(t, name) for t in node.targets):
                value = node.value if any(isinstance(t, ast.Name) for t in node.targets if _binds(t, name)) else None
                cand = (line, value)
            elif isinstance(node, ast.AnnAssign) and node.value is not None and _binds(node.target, name):
                cand = (line, node.value)
            elif isinstance(node, (ast.For, ast.AsyncFor, ast.With, ast.comprehension)) and \
                    _binds(getattr(node, "target", None), name):
                cand = (line, None)  # a loop variable: what the loop iterates over (a loader): data
            else:
                continue
            if best is None or cand[0] >= best[0]:
                best = cand
        return (best[1], best[0]) if best else (None, 0)


def _walk_scope(body: ast.AST | None):
    """The nodes of one scope: nested functions, classes and lambdas are other scopes (not entered)."""
    todo = [body] if body is not None else []
    while todo:
        node = todo.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                todo.append(child)


def _binds(target: ast.AST | None, name: str) -> bool:
    if isinstance(target, ast.Name):
        return target.id == name
    if isinstance(target, (ast.Tuple, ast.List)):
        return any(_binds(t, name) for t in target.elts)
    return False


def _text(node: ast.AST) -> str:
    try:
        text = ast.unparse(node)
    except Exception:
        return "?"
    return text if len(text) <= 80 else text[:77] + "..."


def origin(node: ast.AST | None, scope: _Scope, line: int, depth: int = 0) -> Origin | None:
    """HOST_RANDOM / HOST_MADE when the expression is (or is assigned from) a value the loop makes on the host;
    None for anything else (data, device values, unknown)."""
    if node is None or depth > 4:
        return None
    if isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in _PASS_THROUGH:  # np.random.normal(...).astype(f32)
            return origin(func.value, scope, line, depth + 1)
        full = scope.resolve(_dotted(func))
        receiver = func.value if isinstance(func, ast.Attribute) else None
        if full is None and isinstance(receiver, ast.Call):  # np.random.default_rng(0).normal(...)
            made_by = scope.resolve(_dotted(receiver.func)) or ""
            if made_by.startswith(_RNG_FACTORIES):
                return Origin(HOST_RANDOM, _text(node), getattr(node, "lineno", line))
            return None
        if not full:
            return None
        if full.startswith("numpy.random.") or (full.startswith("random.") and scope.imports.get("random") == "random"):
            if not full.startswith(_RNG_FACTORIES):
                return Origin(HOST_RANDOM, _text(node), getattr(node, "lineno", line))
            return None
        if isinstance(receiver, ast.Name) and receiver.id not in scope.imports:  # rng.normal(...): rng's maker
            value, at = scope.assignment(receiver.id, getattr(node, "lineno", line), anywhere=True)
            if isinstance(value, ast.Call):
                made_by = scope.resolve(_dotted(value.func)) or ""
                if made_by.startswith(_RNG_FACTORIES):
                    return Origin(HOST_RANDOM, _text(node), getattr(node, "lineno", line))
            return None
        head, _, last = full.rpartition(".")
        if head == "numpy" and last in _MAKERS:
            return Origin(HOST_MADE, _text(node), getattr(node, "lineno", line))
        if head == "numpy" and last in _CONVERTERS:
            for a in node.args[:1]:
                o = origin(a, scope, line, depth + 1)
                if o is not None:
                    return o
                if isinstance(a, (ast.List, ast.Tuple, ast.ListComp)):
                    return Origin(HOST_MADE, _text(node), getattr(node, "lineno", line))
        return None
    if isinstance(node, ast.BinOp):
        found = [o for o in (origin(node.left, scope, line, depth + 1), origin(node.right, scope, line, depth + 1))
                 if o is not None]
        return next((o for o in found if o.kind == HOST_RANDOM), found[0] if found else None)
    if isinstance(node, ast.UnaryOp):
        return origin(node.operand, scope, line, depth + 1)
    if isinstance(node, (ast.List, ast.Tuple, ast.ListComp)):
        elts = node.elts if not isinstance(node, ast.ListComp) else [node.elt]
        inner = [o for o in (origin(e, scope, line, depth + 1) for e in elts) if o is not None]
        if inner:  # (x, noise): what made its elements
            return next((o for o in inner if o.kind == HOST_RANDOM), inner[0])
        if elts and all(isinstance(e, (ast.Constant, ast.BinOp, ast.UnaryOp)) for e in elts):
            return Origin(HOST_MADE, _text(node), getattr(node, "lineno", line))  # numbers: [lr * 0.9 ** i, 0.1]
        return None
    if isinstance(node, ast.Subscript):
        return origin(node.value, scope, line, depth + 1)
    if isinstance(node, ast.Name):
        value, at = scope.assignment(node.id, line)
        if value is None:
            return None
        return origin(value, scope, at, depth + 1)
    return None


@functools.lru_cache(maxsize=512)
def call_arguments(filename: str, position: tuple) -> CallArgs | None:
    """The origins of the arguments of the call at `position` = (line, end line, column, end column) in
    `filename`: the span CPython records for the call instruction (`code.co_positions()`), so the call is found
    exactly (`state = p_step(state, batch, np.random.normal(...))` maps each argument). None when not found."""
    line, end_line, col, end_col = position
    tree = _module(filename)
    if tree is None or line is None:
        return None
    call = next((n for n in ast.walk(tree) if isinstance(n, ast.Call) and n.lineno == line
                 and n.col_offset == col and n.end_lineno == end_line and n.end_col_offset == end_col), None)
    if call is None or any(isinstance(a, ast.Starred) for a in call.args):
        return None
    scope = _Scope(filename, line)
    return CallArgs(tuple(origin(a, scope, line) for a in call.args),
                    {k.arg: origin(k.value, scope, line) for k in call.keywords if k.arg})


def first_argument(filename: str, position: tuple) -> Origin | None:
    """The origin of the first argument of the call at `position` (`jnp.array(x)`, `jnp.asarray([...])`)."""
    found = call_arguments(filename, position)
    return found.positional[0] if found and found.positional else None


def position(frame) -> tuple | None:
    """(line, end line, column, end column) of the call a frame is executing (CPython 3.11+), or None."""
    try:
        return next(p for i, p in enumerate(frame.f_code.co_positions()) if i == frame.f_lasti // 2)
    except (AttributeError, StopIteration, ValueError):
        return None
