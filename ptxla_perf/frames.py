"""Which Python frame is the user's: the line a finding points at is never inside torch, torch_xla, jax,
ptxla_perf itself (recipes excepted: they are user code), or, where a user frame exists, any installed library."""
from __future__ import annotations

import os
import sys
import sysconfig
from types import FrameType

from .model.records import Location

_HERE = os.path.dirname(os.path.abspath(__file__))
_RECIPE_DIRS = tuple(
    os.path.join(d, "") for d in {
        os.path.join(_HERE, "recipes"),
        os.path.normpath(os.path.join(_HERE, "..", "recipes")),  # source checkout: top-level recipes/
    }
)


def _package_dir(name: str) -> str | None:
    spec = None
    try:
        import importlib.util
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return os.path.join(os.path.realpath(list(spec.submodule_search_locations)[0]), "")


_TOOL_DIRS = tuple(d for d in (_package_dir(n) for n in ("torch", "torch_xla", "jax", "jaxlib", "flax", "functorch"))
                   if d) + (os.path.join(_HERE, ""),)
_LIB_DIRS = tuple({os.path.join(os.path.realpath(p), "") for p in
                   (sysconfig.get_paths().get("stdlib"), sysconfig.get_paths().get("platstdlib"),
                    sysconfig.get_paths().get("purelib"), sysconfig.get_paths().get("platlib")) if p})

USER, LIBRARY, TOOL = 0, 1, 2
_cache: dict[str, int] = {}
# id(code) -> kind: the per-step frame walk is a few dict hits. Keyed by id, not by the code object, whose hash is
# recomputed from its bytecode, constants and names at every lookup (7-25 us a boundary measured); the code objects
# are kept alive in `_codes`, so an id is never reused for another code.
_by_code: dict[int, int] = {}
_codes: list = []


def kind_of(code, _get=_by_code.get) -> int:
    """A code object's kind (USER, LIBRARY, TOOL: classify of its file, or TOOL for hide_frames), cached by
    id(code); the code is kept alive, so its id stays its own. The one lookup every frame walk uses (user_frame,
    the sampler's stacks)."""
    kind = _get(id(code))
    if kind is None:
        kind = _by_code[id(code)] = classify(code.co_filename)
        _codes.append(code)
    return kind


def classify(filename: str) -> int:
    """USER code, a third-party LIBRARY, or a TOOL frame (torch/torch_xla/jax/ptxla_perf) that is never blamed."""
    kind = _cache.get(filename)
    if kind is None:
        if filename.startswith("<"):
            kind = USER if filename.startswith(("<stdin", "<string", "<ipython")) else TOOL
        else:
            path = os.path.realpath(filename)
            if path.startswith(_RECIPE_DIRS):
                kind = USER
            elif path.startswith(_TOOL_DIRS):
                kind = TOOL
            elif path.startswith(_LIB_DIRS) or f"{os.sep}site-packages{os.sep}" in path \
                    or f"{os.sep}dist-packages{os.sep}" in path:  # installed anywhere (user site, PYTHONPATH)
                kind = LIBRARY
            else:
                kind = USER
        _cache[filename] = kind
    return kind


def line_of(frame: FrameType) -> int:
    """The frame's line. `f_lineno` is None while the frame runs an instruction the compiler gave no line (the
    cleanup after `except ... as e:`, Python 3.11+): then the line of the last instruction before it that has one,
    else the function's first line. A report's line is always a number."""
    line = frame.f_lineno
    if line is not None:
        return line
    line, at = frame.f_code.co_firstlineno, frame.f_lasti
    for start, _, n in frame.f_code.co_lines():
        if start > at:
            break
        if n is not None:
            line = n
    return line


_abs_paths: dict[str, str] = {}


def _abs(filename: str) -> str:
    path = _abs_paths.get(filename)
    if path is None:
        path = _abs_paths[filename] = filename if filename.startswith("<") else os.path.abspath(filename)
    return path


_locations: dict[tuple[int, int], Location] = {}  # (id(code), line) -> its Location, shared: a boundary's site is
# looked up at every boundary, and no Location is ever changed once made


def user_frame(frame: FrameType | None) -> tuple[Location | None, Location | None]:
    """(innermost user line, innermost library line below it) walking outwards from `frame`."""
    library = None
    while frame is not None:
        code = frame.f_code
        kind = kind_of(code)
        if kind == USER:
            line = frame.f_lineno
            if line is None:
                line = line_of(frame)
            key = (id(code), line)  # (the code is alive: kind_of keeps it)
            loc = _locations.get(key)
            if loc is None:
                if len(_locations) > 4096:
                    _locations.clear()
                loc = _locations[key] = Location(_abs(code.co_filename), line, code.co_name)
            return loc, library
        if kind == LIBRARY and library is None:
            library = Location(_abs(code.co_filename), line_of(frame), code.co_name)
        frame = frame.f_back
    return library, None


def hide_frames(fn):
    """Never blame this function's frames (a recipe's own wrapper around library calls): findings inside it
    point at the line that called it. Usable as a decorator."""
    _by_code[id(fn.__code__)] = TOOL
    _codes.append(fn.__code__)
    return fn


_defs: dict[str, list[tuple[int, int, str]]] = {}


def function_at(filename: str, line: int) -> str:
    """The innermost function defined around `line` of a source file ("<module>" outside any): for lines known
    only from HLO metadata (file and line, no frame). The file is parsed once; "?" when it cannot be read."""
    defs = _defs.get(filename)
    if defs is None:
        import ast
        try:
            with open(filename, encoding="utf-8") as f:
                tree = ast.parse(f.read(), filename)
        except (OSError, SyntaxError, ValueError):
            return "?"
        defs = _defs[filename] = [(n.lineno, n.end_lineno or n.lineno, n.name) for n in ast.walk(tree)
                                  if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    inside = [(start, name) for start, end, name in defs if start <= line <= end]
    return max(inside)[1] if inside else "<module>"


def is_user_file(filename: str) -> bool:
    return classify(filename) == USER


def print_user_traceback(exc: BaseException, file=None) -> None:
    """Print a crash of the user's script as Python itself would: the frames of ptxla_perf and of runpy that ran
    the script are dropped from the top of the traceback (the script's own frames, and libraries below them,
    stay), and so is the import watch's frame inside a failed import of a framework (import_watch.py)."""
    import runpy
    import traceback

    ours = (os.path.join(_HERE, ""), os.path.realpath(runpy.__file__), "<frozen runpy>")
    tb = exc.__traceback__
    while tb is not None and (tb.tb_frame.f_code.co_filename.startswith("<frozen runpy")
                              or os.path.realpath(tb.tb_frame.f_code.co_filename).startswith(ours)):
        tb = tb.tb_next
    watch = os.path.realpath(os.path.join(_HERE, "runner", "import_watch.py"))
    link = tb
    while link is not None and link.tb_next is not None:
        if os.path.realpath(link.tb_next.tb_frame.f_code.co_filename) == watch:
            link.tb_next = link.tb_next.tb_next
        else:
            link = link.tb_next
    traceback.print_exception(type(exc), exc, tb, file=file or sys.stderr)
