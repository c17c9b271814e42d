"""What keeps device values alive from step to step, found once: the adapters count live device tensors/arrays
cheaply at every boundary (memory.py); when that count has gone up at several samples in a row, `GrowthWatch`
says so once. Then two looks at the Python heap's containers (list, dict, deque) of device values: `holder_counts`
at that boundary, `find_holder` at the next one, which picks the container that grew in between (not merely the
largest: a model's parameter list holds as many), names the variable holding it in the user's frames on the stack
(or an attribute of an object there), and the line of the user's code that adds to it (`losses.append(loss)`).
Two heap walks (tens of ms each), once per run: the boundaries they run at are marked attributed (not timed).

Backend-neutral: the adapter passes what a device value is and how many bytes it holds. Never raises."""
from __future__ import annotations

import collections
import dataclasses
import gc
import inspect
import itertools
import linecache
import os
import re
import sys
import types
from typing import Any, Callable

from ..frames import USER, classify, function_at, line_of
from ..model.records import Location

_MIN_RISES = 4  # samples in a row with a higher live count before one scan
_ADD = r"(?:\.(?:append|extend|insert|appendleft|add|update|setdefault)\s*\(|\s*\+=|\s*\[[^\]]*\]\s*=(?!=))"


class GrowthWatch:
    """Rising live counts: True once, at the sample that makes `_MIN_RISES` rises in a row."""

    def __init__(self, min_rises: int = _MIN_RISES):
        self.min_rises = min_rises
        self.last: int | None = None
        self.rises = 0
        self.fired = False

    def observe(self, count: int | None) -> bool:
        if count is None or self.fired:
            return False
        if self.last is not None:
            self.rises = self.rises + 1 if count > self.last else 0
        self.last = count
        if self.rises >= self.min_rises:
            self.fired = True
            return True
        return False


def holder_counts(is_device: Callable[[Any], bool], min_items: int = 2) -> dict[int, int]:
    """First of the two looks: id -> device values held, for every container holding at least `min_items`."""
    try:
        return {id(o): len(held) for o, held in _containers(is_device, min_items)}
    except Exception:  # a diagnostic: never break the user's step
        return {}


def find_holder(is_device: Callable[[Any], bool], nbytes: Callable[[Any], int], frame,
                before: dict[int, int] | None = None, min_items: int = 2
                ) -> tuple[Location | None, dict[str, Any]] | None:
    """The container whose device values grew since `before` (holder_counts at an earlier boundary) by the most
    bytes, then the one holding the most; its name and the user's line that adds to it. None when no container holds
    `min_items` device values. `frame`: where to start looking for the user's frames."""
    try:
        return _find(is_device, nbytes, frame, min_items, before or {})
    except Exception:  # a diagnostic: never break the user's step
        return None
    finally:
        _let_go(frame)


def _let_go(frame) -> None:
    """Before Python 3.13, reading a function frame's `f_locals` leaves a dict on the frame that holds what its
    locals held at that moment, for as long as the frame runs: a training loop's batch and outputs (device memory)
    kept alive after the loop rebinds them, until the loop's function returns. The profiler holds no reference to
    the program's device values past its own call (a tensor kept alive is memory the program freed; one kept alive
    with pending IR would be an extra output of a torch_xla sync), so the snapshots this search made are emptied.
    Every reader of `f_locals` / `locals()` refills it from the frame's own variables first, so nothing the program
    reads changes. Module and class frames (their `f_locals` is the namespace itself) are left alone."""
    if sys.version_info >= (3, 13):  # PEP 667: f_locals is a view on the frame, no snapshot is kept
        return
    try:
        for f in _user_frames(frame):
            if f.f_code.co_flags & inspect.CO_OPTIMIZED:
                f.f_locals.clear()
    except Exception:
        pass


def _containers(is_device, min_items):
    for o in gc.get_objects():
        t = type(o)
        if t is list or t is collections.deque:
            items = o
        elif t is dict:
            items = o.values()
        else:
            continue
        if len(o) < min_items:
            continue
        tail = list(o)[-8:] if t is not dict else list(items)[-8:]
        if sum(1 for x in tail if is_device(x)) < max(2, len(tail) // 2):
            continue
        held = [x for x in items if is_device(x)]
        if len(held) >= min_items:
            yield o, held


def _find(is_device, nbytes, frame, min_items, before):
    best = None
    for o, held in _containers(is_device, min_items):
        grew = len(held) - before[id(o)] if id(o) in before else 0
        # of the containers that grew, the one that grew by the most bytes (a dict of lists: the list of weights,
        # not the list of scalar losses beside it)
        key = (grew > 0, grew * nbytes(held[-1]) if grew > 0 else 0, grew, len(held))
        if best is None or key > best[0]:
            best = (key, o, held)
    if best is None:
        return None
    _, container, held = best
    total = sum(nbytes(x) for x in held)
    shapes = collections.Counter(str(list(getattr(x, "shape", ()))) for x in held).most_common(3)
    detail: dict[str, Any] = {"call": type(container).__name__, "items": len(held), "bytes": int(total),
                              "bytes_per_item": int(total / len(held)) if held else 0,
                              "shapes": [s for s, _ in shapes]}
    name, code_frame, is_global = _name_of(container, frame)
    loc = None
    if name:
        detail["holder"] = name
        loc = _adding_line(name, code_frame, is_global, is_device)
    if loc is None and code_frame is not None:
        loc = Location(os.path.abspath(code_frame.f_code.co_filename), line_of(code_frame), code_frame.f_code.co_name)
    return loc, detail


def _user_frames(frame):
    f = frame
    while f is not None:
        if classify(f.f_code.co_filename) == USER:
            yield f
        f = f.f_back


# Bounds of the search for the container's name inside the user's values (dicts, lists, dataclasses, objects'
# attributes): how deep below a frame's variable, how many items of one value, how many values in all.
_NAME_DEPTH = 3
_NAME_ITEMS = 64
_NAME_VISITS = 5000
_SKIP = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType, types.MethodType, str, bytes)


def _name_of(container, frame):
    """(name, the frame whose code refers to it, whether it is a module global) for the container: a local or a
    global of a user frame on the stack, or reached from one through dict values, list items and objects'
    attributes (`metrics['loss']`, `self.history`, `state.logs['acc']`), breadth first so the shortest path
    wins, within _NAME_DEPTH steps, _NAME_ITEMS items of a value and _NAME_VISITS values in all."""
    frames = list(_user_frames(frame))
    for f in frames:
        for k, v in f.f_locals.items():
            if v is container:
                return k, f, False
    for f in frames:
        for k, v in f.f_globals.items():
            if v is container:
                return k, f, True
    seen: set[int] = {id(container)}
    level = [(k, v, f, scope == "globals") for f in frames for scope in ("locals", "globals")
             for k, v in list(getattr(f, "f_" + scope).items())]
    visits = 0
    for _ in range(_NAME_DEPTH):
        nxt = []
        for path, v, f, is_global in level:
            if id(v) in seen or isinstance(v, _SKIP) or visits >= _NAME_VISITS:
                continue
            seen.add(id(v))
            for step, w in _children(v):
                visits += 1
                if w is container:
                    return path + step, f, is_global
                nxt.append((path + step, w, f, is_global))
        level = nxt
    return None, (frames[0] if frames else None), False


def _children(v):
    """(access as written in code, value) for what `v` holds: a dict's values (`['key']`), a list's or tuple's
    items (`[i]`), an object's attributes (`.name`; dataclasses with slots too). At most _NAME_ITEMS of them."""
    t = type(v)
    if t.__module__ == "builtins" or isinstance(v, dict):
        if isinstance(v, dict):
            items = ((f"[{k!r}]", w) for k, w in v.items())
        elif isinstance(v, (list, tuple, collections.deque)):
            items = ((f"[{i}]", w) for i, w in enumerate(v))
        else:
            return []
    else:
        d = getattr(v, "__dict__", None)
        if isinstance(d, dict):
            items = ((f".{a}", w) for a, w in d.items())
        elif dataclasses.is_dataclass(v):
            items = ((f".{fl.name}", getattr(v, fl.name, None)) for fl in dataclasses.fields(v))
        else:
            return []
    return list(itertools.islice(items, _NAME_ITEMS))


def _adding_line(name: str, f, is_global: bool, is_device=None) -> Location | None:
    """The user's line that adds to the holder `name` (`losses`, `metrics['loss']`, `self.history`) —
    `name.append(`, `name +=`, `name[k] =`, with any key where the name has one (`metrics[key].append(`), or the
    name's tail after an attribute (`self.history.append(` for `trainer.history`): in the frame's function, else
    (a global; an attribute's tail, which a method may fill) anywhere in its file. Of several, one that adds a variable holding a device value now
    (`losses.append(loss)`, not `losses.append(loss.item())`) wins, then the nearest above the current line."""
    if f is None:
        return None
    path = f.f_code.co_filename
    lines = linecache.getlines(path)
    if not lines:
        return None
    code = f.f_code
    first = code.co_firstlineno
    last = max((ln for _, _, ln in code.co_lines() if ln), default=len(lines))
    whole = [(1, len(lines))]
    spans = [(first, last)] + (whole if is_global or code.co_name == "<module>" else [])
    for prefix in _access_patterns(name):
        pat = re.compile(prefix + _ADD)
        # an attribute's tail (`.metrics[...]`) may be filled in a method of the object's class: the whole file
        for lo, hi in spans + (whole if prefix.startswith(r"\.") else []):
            hits = [i for i in range(lo, min(hi, len(lines)) + 1) if pat.search(lines[i - 1].split("#", 1)[0])]
            if hits and is_device is not None:
                device = [i for i in hits
                          if _adds_device(lines[i - 1].split("#", 1)[0].rstrip(), prefix, f, is_device)]
                hits = device or hits
            if hits:
                above = [i for i in hits if i <= line_of(f)]
                line = above[-1] if above else hits[0]
                return Location(os.path.abspath(path), line, function_at(path, line))
    return None


def _access_patterns(name: str) -> list[str]:
    """Regexes for the code that reaches the holder `name`: the whole path (a key written as any subscript),
    then each tail that starts at an attribute, then the last attribute alone (the way it was matched before)."""
    steps = re.findall(r"\.?\w+|\[[^\]]*\]", name)
    def rx(parts):
        return "".join(r"\[[^\]]*\]" if p.startswith("[") else re.escape(p) for p in parts)
    out = [r"(?<![\w.])" + rx(steps)]
    out += [rx(steps[j:]) for j in range(1, len(steps)) if steps[j].startswith(".")]
    tail = name.split(".")[-1]
    if re.fullmatch(r"\w+", tail):
        out.append(r"(?<![\w.])" + re.escape(tail))
    return list(dict.fromkeys(out))


def _adds_device(text: str, prefix: str, f, is_device) -> bool:
    """`name.append(var)` / `name += [var]` / `name[k] = var` where `var` is a device value in the frame now
    (`prefix`: the regex of the name, _access_patterns)."""
    m = re.search(rf"{prefix}(?:\.\w+\(\s*\[?\s*|\s*\+=\s*\[\s*|\s*\[[^\]]*\]\s*=\s*)([A-Za-z_]\w*)\s*(?:[\])]|$)",
                  text)
    if not m:
        return False
    try:
        return bool(is_device(f.f_locals.get(m.group(1), f.f_globals.get(m.group(1)))))
    except Exception:
        return False
