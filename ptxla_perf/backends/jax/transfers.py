"""Transfers between host and device: device-to-host reads (`ArrayImpl._value`, numpy's reads), eager uploads
(`jnp.array` of host data), and the implicit host-to-device copies of a jitted call's arguments. Each NumPy array
sent is told by where it came from: read back from the device (a round trip), made by the loop on the host
(random draws, constants, lists: the source says so), or data (the input pipeline)."""
from __future__ import annotations

import math
import time
import weakref
from typing import Any, NamedTuple

import jax
import numpy as np

from .. import provenance
from ...frames import TOOL, USER, classify, line_of, user_frame
from ...model.records import EMPTY, Event, Location, ReadEvidence, TransferEvidence, shared
from . import _private as P
from .jitted import JitInfo
from .ledger import SKIP, Ledger, Scope
from .ready import ReadyWatch

SCALARS = (int, float, bool, complex)
FULL_SCAN_EVERY = 16  # calls of one function between flattening all its arguments (scan)
_REPEAT_WINDOW = 4  # steps: a host buffer copied again within this many steps is the same data copied again
_UNSEEN = object()
_READ_NAMES = {"__float__": "float", "__int__": "int", "__bool__": "bool", "__index__": "index",
               "__complex__": "complex", "__str__": "print/str", "__repr__": "repr", "__format__": "format",
               "tolist": "tolist", "tobytes": "tobytes", "device_get": "jax.device_get", "_item": "item",
               "_np_asarray": "np.asarray", "_np_array": "np.array"}


def array_leaves(out) -> list:
    try:
        return [x for x in jax.tree_util.tree_leaves(out) if type(x) is P.ArrayImpl]
    except Exception:
        return []


class Transfers:
    """Owns what is known about host buffers: arrays read back from the device, buffers copied recently, the
    origins of a call's arguments in its source."""

    def __init__(self, ledger: Ledger, scope: Scope, ready: ReadyWatch):
        self._ledger = ledger
        self._scope = scope
        self._ready = ready
        self.steps = 0  # boundaries so far (steps.py sets it): a buffer's age
        self._from_device: dict[int, tuple] = {}  # id(NumPy array read back from the device) -> (weakref, line)
        self._origin_cache: dict[tuple, tuple] = {}  # (id(code), instruction) of a call -> (code, _site's)
        self._buffers: dict[int, tuple] = {}  # id(array) -> (weakref, step it was last copied into a call)
        self._reads: dict[tuple, Event] = {}  # (line, via, call, shape, bytes) of a read -> its event
        self._lists = (EMPTY, EMPTY, EMPTY)  # the last scan's evidence lists (shapes, source, made_by), shared with
        #                                      the next equal ones: a batch per step keeps no lists of its own

    # --- device -> host: the timed `_value` wrapper's parts (hooks.timed) -------------------------------------
    def begin(self, arr, frame):
        """A read through `_value`: counted (and its line) unless the value is cached or it is ours."""
        scope = self._scope
        if P.host_copy(arr) is not None or scope.depth or scope.in_np:
            return SKIP
        return self._read(arr, frame)

    def finish(self, loc, seconds: float) -> None:
        self._ledger.d2h_time += seconds

    def done(self, loc, arr, out, t1: float) -> None:
        if self._ready.calls is not None:  # a sampled step: the read's calls were done by t1
            self._ready.waited(arr, array_leaves, t1)
        self._came_from_device(out, loc)

    def np_read(self, real, a, args, kwargs, frame):
        """`np.asarray` / `np.array` of a jax array (numpy reads CPU arrays through the buffer protocol and never
        calls back into Python)."""
        scope = self._scope
        scope.in_np = True
        try:
            if P.host_copy(a) is None and not scope.depth:
                loc = self._read(a, frame, "np." + real.__name__)
                out = real(a, *args, **kwargs)
                if self._ready.calls is not None:
                    self._ready.waited(a, array_leaves, time.perf_counter())
                self._came_from_device(out, loc)
                self._came_from_device(P.host_copy(a), loc)
                return out
            return real(a, *args, **kwargs)
        finally:
            scope.in_np = False

    def _read(self, arr, frame, default: str = "read") -> Location | None:
        """A device->host copy (float, bool, print, device_get, ...); the user's line."""
        led = self._ledger
        led.d2h += 1
        try:
            led.d2h_bytes += int(arr.nbytes)
        except Exception:
            pass
        if not led.lines:
            return None
        loc, via, call = _blame(frame, default)
        via = via.short() if via else None
        key = (loc and (loc.file, loc.line), via, call, arr.shape, int(arr.nbytes))
        event = self._reads.get(key)  # a loop's read (every step, every N): the same event again, shared
        if event is None:
            if len(self._reads) >= 256:
                self._reads.clear()
            event = self._reads[key] = Event("device_to_host_sync", loc, ReadEvidence(
                call=call, via=via, shapes=[list(arr.shape)], bytes=int(arr.nbytes)))
        led.add(event)
        return loc

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

    def _round_trip(self, x) -> tuple | None:
        hit = self._from_device.get(id(x))
        return hit if hit is not None and hit[0]() is x else None

    # --- host -> device ---------------------------------------------------------------------------------------
    def upload(self, obj, out, call: str, frame, seconds: float | None = None) -> None:
        """`jnp.array(host_data)` outside any jitted function: an implicit host->device copy, counted like one
        made by a jitted call's argument (data, a round trip, or a value the loop makes on the host). `seconds`:
        the call's own time, what an eager upload costs (the rule rates it by time, not bytes)."""
        if self._scope.depth or self._scope.costing or type(obj) is P.ArrayImpl or isinstance(obj, SCALARS) \
                or not isinstance(out, P.ArrayImpl):
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
        led = self._ledger
        nbytes = int(out.nbytes)
        led.h2d += 1
        led.h2d_bytes += nbytes
        if not led.lines:
            return
        back = self._round_trip(obj) if kind == "numpy" else None
        made: list[str] = []
        if back is not None:
            where = "round_trip"
            if back[1] is not None:
                made.append(f"read back from the device at {back[1].short()}")
        else:
            found = self._call_origins(frame)
            o = found.positional[0] if found and found.positional else None
            if o is None and found is None and kind == "python list" and all(isinstance(v, SCALARS) for v in leaves):
                # numbers the loop puts in a list (a schedule, hyperparameters): made on the host each time
                o = provenance.Origin(provenance.HOST_MADE, "a Python list of numbers", line_of(frame))
            where = o.kind if o is not None else "data"
            if o is not None:
                made.append(f"{o.text} (line {o.line})")
        led.event("host_to_device_transfer", user_frame(frame)[0], TransferEvidence(
            call=call, shapes=[list(out.shape)], bytes=nbytes, transfers=1, arrays=1, source=[kind],
            origins={where: nbytes}, made_by=made, eager=True, seconds=seconds, avoidable=where != "data"))

    def scan(self, fn: JitInfo, args: tuple, kwargs: dict, frame) -> bool:
        """Find implicit transfers among a jitted call's arguments; record them. True if any were found.

        Flattening a parameter tree costs ~1 us per leaf, so containers are flattened on a function's first call
        and every FULL_SCAN_EVERY-th after it; in between, only the arguments that held host data on the last
        full scan, or whose first leaf is host data now (parameters brought to the host and handed back), are,
        and the top-level ones are type-checked (a NumPy batch). Never a transfer guard: one that
        trips inside a call sends that signature to JAX's Python dispatch path for good."""
        full = fn.scans % FULL_SCAN_EVERY == 0
        fn.scans += 1
        items = fn.dynamic(args, kwargs)
        if not full and fn.steady is not None and self._steady(fn, items, len(args), frame):
            return True
        found = _Found()
        origins, shapes = found.origins, found.shapes  # (the per-array steps below are inlined: every call)
        from_device = self._from_device
        site = None
        deep = set() if full else fn.deep
        buffers, now, plain = self._buffers, self.steps, False
        batch: list | None = []  # (position, shape, dtype) of each NumPy array passed as it is, while plain
        for pos, a in items:
            t = type(a)
            if t is np.ndarray:  # a NumPy array passed as it is (a batch): the per-array steps below, inlined
                b, plain = a.nbytes, True
                shapes.append(list(a.shape))
                found.nbytes += b
                found.n += 1
                i = id(a)  # _seen_buffer, inlined
                seen = buffers.get(i)
                buffers[i] = (weakref.ref(a), now)
                if seen is not None and seen[0]() is a and now - seen[1] <= _REPEAT_WINDOW:
                    found.repeated += 1
                back = from_device.get(i)
                if back is not None and back[0]() is a:  # read back from the device: a round trip
                    origins["round_trip"] = origins.get("round_trip", 0) + b
                    if back[1] is not None:
                        found.made_by(f"read back from the device at {back[1].short()}")
                    batch = None
                    continue
                if batch is not None:
                    batch.append((pos, a.shape, a.dtype))
                if site is None:
                    site = self._site(frame)
                got = site[1].get((pos, len(args)))
                if got is None:
                    got = self._origin_words(site, pos, len(args))
                if got[0] is None:
                    origins["data"] = origins.get("data", 0) + b
                else:
                    origins[got[0].kind] = origins.get(got[0].kind, 0) + b
                    found.made_by(got[1])
                continue
            if (t is list or t is tuple) and a and isinstance(a[0], SCALARS) \
                    and all(isinstance(v, SCALARS) for v in a):
                found.add("python list", [len(a)], 4 * len(a), len(a))  # a Python list of numbers: one per element
                origins[provenance.HOST_MADE] = origins.get(provenance.HOST_MADE, 0) + 4 * len(a)
                continue
            container = not (t is P.ArrayImpl or t is np.ndarray or isinstance(a, (np.ndarray, np.generic)))
            if not container:
                leaves: Any = (a,)
            elif full or pos in deep or _host_first(a):
                leaves = jax.tree_util.tree_leaves(a)
            else:
                continue
            arg_origin = _UNSEEN
            for x in leaves:
                t = type(x)
                if t is P.ArrayImpl:
                    if full and not fn.multi and P.committed(x) and len(x.sharding.device_set) > 1:
                        fn.multi = True  # the call spans several devices: uncommitted arrays are moved there
                    if fn.multi and not P.committed(x) and x.ndim and len(x.sharding.device_set) == 1:
                        found.add("uncommitted jax.Array", list(x.shape), x.nbytes, 1)
                        if container:
                            deep.add(pos)
                    continue
                array = t is np.ndarray or isinstance(x, np.ndarray)
                if not (array or isinstance(x, np.generic)):
                    continue
                if container:
                    deep.add(pos)
                b = int(x.nbytes)
                found.kinds.add("numpy")
                shapes.append(list(x.shape))
                found.nbytes += b
                found.n += 1
                if array and self._seen_buffer(x):
                    found.repeated += 1
                back = from_device.get(id(x))
                if back is not None and back[0]() is x:  # read back from the device: a round trip
                    origins["round_trip"] = origins.get("round_trip", 0) + b
                    if back[1] is not None:
                        found.made_by(f"read back from the device at {back[1].short()}")
                    continue
                if arg_origin is _UNSEEN:
                    if site is None:
                        site = self._site(frame)
                    got = site[1].get((pos, len(args)))
                    if got is None:
                        got = self._origin_words(site, pos, len(args))
                    arg_origin, made = got
                if arg_origin is None:
                    origins["data"] = origins.get("data", 0) + b
                else:
                    origins[arg_origin.kind] = origins.get(arg_origin.kind, 0) + b
                    found.made_by(made)
        if full:
            fn.deep = deep
        if not found.n:
            return False
        if plain:
            found.kinds.add("numpy")
        if len(buffers) > 4096:
            self._prune_buffers()
        event = self._record_scan(fn, found, frame)
        # the host data were NumPy arrays passed as they are (a batch), none of them seen before: the next call
        # like this one (same line, same arrays' shapes) is this one again (_steady)
        if batch and len(batch) == found.n and not found.repeated and frame is not None \
                and classify(frame.f_code.co_filename) == USER:
            fn.steady = _Steady(frame.f_code, frame.f_lasti, len(args), tuple(batch), self._ledger.lines, found.n,
                                found.nbytes, event)
        else:
            fn.steady = None
        return True

    def _steady(self, fn: JitInfo, items: list, nargs: int, frame) -> bool:
        """A call like the function's last scanned one: from the same call instruction of the user's code, its
        host data again NumPy arrays of the same positions, shapes and dtypes, passed as they are and none of them
        seen before (a fresh batch), no container holding host data: the same event again (the very object: a
        steady loop's records share it rather than each keeping its own, and make nothing the garbage collector
        keeps). False when the call differs in any of these: the full scan looks at it."""
        code, lasti, n, batch, lines, count, nbytes, event = fn.steady
        if frame is None or frame.f_code is not code or frame.f_lasti != lasti or nargs != n \
                or self._ledger.lines != lines:
            return False
        buffers, from_device, now = self._buffers, self._from_device, self.steps
        arrays = []
        for pos, a in items:
            t = type(a)
            if t is np.ndarray:
                if len(arrays) == len(batch) or batch[len(arrays)] != (pos, a.shape, a.dtype):
                    return False
                i = id(a)
                seen, back = buffers.get(i), from_device.get(i)
                if (seen is not None and seen[0]() is a) or (back is not None and back[0]() is a):
                    return False  # this very array again (a repeat, a round trip): said by the full scan
                arrays.append(a)
            elif t is P.ArrayImpl:
                if fn.multi:
                    return False
            elif ((t is list or t is tuple) and a and isinstance(a[0], SCALARS)) or pos in fn.deep \
                    or _host_first(a):  # (a container - the parameters - whose first leaf is host data now)
                return False
        if len(arrays) != len(batch):
            return False
        for a in arrays:
            buffers[id(a)] = (weakref.ref(a), now)
        if len(buffers) > 4096:
            self._prune_buffers()
        led = self._ledger
        led.h2d += count
        led.h2d_bytes += nbytes
        led.add(event)
        return True

    def _record_scan(self, fn: JitInfo, found: "_Found", frame) -> Event:
        led = self._ledger
        led.h2d += found.n
        led.h2d_bytes += found.nbytes
        loc = user_frame(frame)[0] if led.lines else None
        shapes = sorted(found.shapes, key=math.prod, reverse=True)  # largest first (stable among equals)
        last = self._lists
        self._lists = lists = (shared(shapes[:6], last[0]), shared(sorted(found.kinds), last[1]),
                               shared(found.made, last[2]))
        # typed here, not as keywords: a fresh NumPy batch makes one of these every call, and records.evidence's
        # conversion of a dict costs several times the class's own constructor
        event = Event("host_to_device_transfer", loc, TransferEvidence(
            call=fn.name, shapes=lists[0], bytes=found.nbytes, transfers=found.n, arrays=found.n,
            source=lists[1], repeated_buffers=found.repeated, origins=found.origins, made_by=lists[2],
            # what is wasted: the same host buffer copied again within a few steps (parameters left in NumPy),
            # arrays read back from the device and sent again (a round trip), values the loop makes on the host
            # (random draws, constants, Python lists: one transfer per element), arrays resharded on every call.
            # A fresh NumPy batch per call is the input pipeline.
            avoidable=bool(found.repeated or found.kinds & {"python list", "uncommitted jax.Array"}
                           or found.origins.keys() - {"data"})))
        if fn.steady is not None and fn.steady.event == event:  # a full scan of a steady call: the same one again
            event = fn.steady.event
        led.add(event)
        return event

    def _call_origins(self, frame):
        """Where each argument of the call a user frame is making came from (provenance.py), cached per call
        instruction."""
        return self._site(frame)[0]

    def _site(self, frame) -> tuple:
        """A call instruction's (origins of its arguments or None, {(argument, number of arguments): (origin,
        its made_by words)}): kept per instruction, found once. Keyed by id(code), not the code, whose hash is
        recomputed from its bytecode and constants at every lookup (frames.py); the entry holds the code, so an
        id reused by another code is not taken for it."""
        if frame is None:
            return None, {}
        code = frame.f_code
        key = (id(code), frame.f_lasti)
        entry = self._origin_cache.get(key)
        if entry is not None and entry[0] is code:
            return entry[1]
        hit = None
        if classify(code.co_filename) == USER:
            pos = provenance.position(frame)
            try:
                hit = provenance.call_arguments(code.co_filename, pos) if pos else None
            except Exception:  # never break the user's call for a diagnostic
                hit = None
        site = (hit, {})
        if len(self._origin_cache) < 1024:
            self._origin_cache[key] = (code, site)
        return site

    def _origin_words(self, site: tuple, pos, nargs: int) -> tuple:
        """An argument's origin and its made_by words, found once per call instruction (kept in `site`)."""
        o = _arg_origin(site[0] or ((), {}), pos, nargs)
        got = site[1][(pos, nargs)] = (o, None if o is None else f"{o.text} (line {o.line})")
        return got

    def _seen_buffer(self, x: np.ndarray) -> bool:
        """True when this very array object (alive since) was copied into a call within the last few steps. Held
        by weak reference: a fresh batch often lands at the address of the one just freed, so an address alone
        would call every new batch 'the same data'. (scan inlines it for a NumPy array passed as it is.)"""
        try:
            ref = weakref.ref(x)
        except TypeError:
            return False
        now = self.steps
        seen = self._buffers.get(id(x))
        self._buffers[id(x)] = (ref, now)  # (kept bounded at the end of scan, its one caller)
        return seen is not None and seen[0]() is x and now - seen[1] <= _REPEAT_WINDOW

    def _prune_buffers(self) -> None:
        now = self.steps
        self._buffers = {k: v for k, v in self._buffers.items()
                         if v[0]() is not None and now - v[1] <= _REPEAT_WINDOW}


def _host_first(a: Any) -> bool:
    """Whether a container's first leaf (through dicts, lists and tuples) is host data: ~1 us, no flattening."""
    for _ in range(32):
        if isinstance(a, dict):
            a = next(iter(a.values()), None)
        elif isinstance(a, (list, tuple)):
            a = a[0] if a else None
        else:
            return isinstance(a, (np.ndarray, np.generic))
    return False


class _Steady(NamedTuple):
    """A function's last scanned call whose host data were NumPy arrays passed as they are (scan, _steady)."""

    code: Any  # the calling frame's code and instruction: the same call in the user's code
    lasti: int
    nargs: int
    batch: tuple  # (position, shape, dtype) of each array
    lines: bool  # attribution was on (the event has the user's line)
    count: int  # arrays copied, their bytes
    nbytes: int
    event: Event


class _Found:
    """The implicit transfers found among one call's arguments."""

    __slots__ = ("shapes", "nbytes", "n", "repeated", "kinds", "origins", "made")

    def __init__(self):
        self.shapes: list[list[int]] = []
        self.nbytes = self.n = self.repeated = 0
        self.kinds: set[str] = set()
        self.origins: dict[str, int] = {}  # bytes by origin
        self.made: list[str] = []

    def add(self, kind: str, shape: list, nbytes: int, n: int) -> None:
        self.kinds.add(kind)
        self.shapes.append(shape)
        self.nbytes += nbytes
        self.n += n

    def made_by(self, text: str) -> None:
        if text not in self.made and len(self.made) < 4:
            self.made.append(text)


def _arg_origin(found, pos, nargs: int):
    """The origin of argument `pos` (an index, or a keyword) from the call's source: positional arguments are
    aligned from the end (a bound method's call passes `self` first, which the source does not show)."""
    positional, keywords = found
    if isinstance(pos, str):
        return keywords.get(pos)
    k = pos - (nargs - len(positional))
    return positional[k] if 0 <= k < len(positional) else None


def _blame(frame, default: str) -> tuple[Location | None, Location | None, str]:
    """The user's line, a library line under it, and what read the value (the outermost tool frame)."""
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
