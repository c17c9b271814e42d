"""Memory: XLA's memory analysis of each compiled program, the runtime's device memory, arrays not donated to the
step that replaces them (missing_donation), and live arrays sampled every few steps (memory_growth)."""
from __future__ import annotations

import math
import os
import time
import weakref
from typing import Any

import jax

from ...analysis import memory as mem
from ...frames import user_frame
from ..live_holders import GrowthWatch, find_holder, holder_counts
from ...model.records import Event, StepRecord
from . import _private as P
from .jitted import JitInfo
from .ledger import Ledger

_LIVE_EVERY = 4  # boundaries: live arrays are counted at every 4th one (memory_growth)...
_LIVE_SHARE = 0.01  # ...or less often, so that a sample costs at most this share of the steps between samples...
_LIVE_MAX_EVERY = 64  # ...but at least every this many boundaries


class Memory:
    """Owns the per-function memory figures, the donation check's weak references and the live-array samples."""

    def __init__(self, ledger: Ledger, caps: P.Capabilities):
        self._ledger = ledger
        self._caps = caps
        self._graph_mem: dict[str, dict] = {}
        self._next_live = 0  # the boundary of the next jax.live_arrays() sample
        self._watch = GrowthWatch()
        self._holders_before: dict[int, int] | None = None  # containers of arrays at the sample it fired

    # --- per compiled program -----------------------------------------------------------------------------
    def remember(self, fn: JitInfo, compiled: Any) -> None:
        """XLA's memory analysis of the program just compiled (once per function and signature, from the Compiled
        the roofline costs): the function keeps its largest signature's figures."""
        m = mem.from_compiled(compiled) if self._caps.memory_analysis else \
            mem.unavailable("jax.stages.Compiled.memory_analysis is missing in this jax")
        entry = self._graph_mem.get(fn.name)
        if entry is None or (m.peak_bytes or 0) > (entry.get("peak_bytes") or 0):
            self._graph_mem[fn.name] = {"id": fn.name, "signatures": (entry or {}).get("signatures", 0),
                                        "donates": fn.donate, **m.to_json()}
        self._graph_mem[fn.name]["signatures"] += 1

    def graph_memory(self, cost_note: str | None) -> dict[str, Any]:
        graphs = list(self._graph_mem.values())
        notes = sorted({g["note"] for g in graphs if g.get("note")})[:3]
        if not graphs:
            notes.append(cost_note or "no jitted function compiled during the session")
        return {"scope": "per device (the compiled, partitioned program each device runs)",
                "method": "compiled.memory_analysis() (XLA's buffer assignment of the optimized program), once per "
                          "jitted function and signature, from the Compiled the roofline costs (a cache hit)",
                "graphs": graphs[:20], "notes": notes}

    def device_memory(self) -> dict[str, Any] | None:
        """The runtime's memory figures of the first local device (TPU/GPU `memory_stats()`; None on the CPU)."""
        if not P.backends_initialized():
            return None
        try:
            device = jax.local_devices()[0]
            stats = device.memory_stats()
        except Exception:
            return None
        if not stats:
            return None
        return {"bytes_limit": stats.get("bytes_limit"), "bytes_in_use": stats.get("bytes_in_use"),
                "peak_bytes_in_use": stats.get("peak_bytes_in_use"), **limit_kind(device.platform, os.environ)}

    # --- donation -------------------------------------------------------------------------------------------
    def watch_outputs(self, fn: JitInfo, out) -> None:
        """After the call that compiled a function that donates nothing: weak refs to its output arrays."""
        if fn.donate or fn.library:
            return
        try:
            fn.outs = [weakref.ref(x) for x in jax.tree_util.tree_leaves(out) if type(x) is P.ArrayImpl]
        except Exception:
            fn.outs = None

    def check_donation(self, fn: JitInfo, args: tuple, kwargs: dict, frame) -> None:
        """The next call after a compile, once: its arguments that are the previous call's outputs (state threaded
        through the step) were not donated, so both are on the device during the call."""
        outs, fn.outs = fn.outs, None
        try:
            self._donation(outs, fn, args, kwargs, frame)
        except Exception:  # a diagnostic: never break the user's call
            pass

    def _donation(self, outs: list, fn: JitInfo, args: tuple, kwargs: dict, frame) -> None:
        alive = {id(x): x for x in (r() for r in outs) if x is not None}
        if not alive or (self._graph_mem.get(fn.name) or {}).get("alias_bytes"):
            return  # XLA aliased outputs to inputs: something is donated, however the wrapper was asked
        n = nbytes = 0
        shapes: list = []
        argnames: list[str] = []
        for name, a in fn.dynamic(args, kwargs, named=True):
            hit = [x for x in jax.tree_util.tree_leaves(a) if alive.get(id(x)) is x]
            if hit:
                argnames.append(name)
                n += len(hit)
                nbytes += sum(int(x.nbytes) for x in hit)
                shapes += [list(x.shape) for x in hit[:4]]
        if not n:
            return
        loc = user_frame(frame)[0] if self._ledger.lines else None
        self._ledger.events.append(Event("missing_donation", loc, {
            "call": fn.name, "bytes": nbytes, "shapes": shapes[:6], "arrays": n, "argument": argnames[:4]}))

    # --- live arrays ----------------------------------------------------------------------------------------
    def sample_live(self, rec: StepRecord, nsteps: int, frame) -> None:
        """Every few boundaries: live arrays and bytes on the record. When they have risen sample after sample,
        look for what holds them (live_holders.py): the containers of arrays now, and at the next boundary the one
        that grew (both boundaries marked attributed). `frame`: where the boundary was seen. Called only where
        the record's boundary is now (adapter.py): a record cut later (the last step, at the session's end, after
        the program's loop dropped what it held) would get a count that is not its step's."""
        if self._holders_before is not None:
            before, self._holders_before = self._holders_before, None
            found = find_holder(_is_array, _array_bytes, frame, before)
            if found is not None:  # rated against the memory section's capacity when the report is made
                rec.events = [*rec.events, Event("memory_growth", found[0], found[1])]  # (maybe records.EMPTY)
            rec.attributed = True
        if nsteps < self._next_live or not self._caps.live_arrays:
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
        self._next_live = nsteps + min(_LIVE_MAX_EVERY, max(_LIVE_EVERY, every))
        if self._watch.observe(rec.live_arrays) and self._ledger.lines:
            self._holders_before = holder_counts(_is_array)
            rec.attributed = True


_FRACTION_VARS = ("XLA_CLIENT_MEM_FRACTION", "XLA_PYTHON_CLIENT_MEM_FRACTION")  # the second: its older name
_ALLOCATOR_VARS = ("XLA_PYTHON_CLIENT_PREALLOCATE", "XLA_PYTHON_CLIENT_ALLOCATOR")


def limit_kind(platform: str, env) -> dict[str, Any]:
    """What `memory_stats()['bytes_limit']` is on this platform: on a GPU the allocator's limit (jaxlib's GPU client
    gives its allocator 75 % of the device's memory unless XLA_CLIENT_MEM_FRACTION / XLA_PYTHON_CLIENT_MEM_FRACTION
    says otherwise; XLA_PYTHON_CLIENT_PREALLOCATE and XLA_PYTHON_CLIENT_ALLOCATOR change how), with the variables
    that set it; on a TPU the device's memory; elsewhere unsaid."""
    platform = (platform or "").lower()
    if platform in ("gpu", "cuda", "rocm"):
        frac = next(((v, env[v]) for v in _FRACTION_VARS if env.get(v)), None)
        said = [f"{frac[0]}={frac[1]}" if frac else
                "XLA_PYTHON_CLIENT_MEM_FRACTION unset (default 75 %)"]
        said += [f"{v}={env[v]}" for v in _ALLOCATOR_VARS if env.get(v)]
        return {"limit_kind": "allocator", "limit_set_by": "; ".join(said)}
    if platform == "tpu":
        return {"limit_kind": "device"}
    return {}


def _live_sample() -> tuple[int, int]:
    """Live device arrays and their bytes (`jax.live_arrays()`: a list of the runtime's live arrays; metadata
    only, no sync)."""
    arrays = jax.live_arrays()
    return len(arrays), int(sum(a.size * a.dtype.itemsize for a in arrays))  # 3x cheaper than .nbytes


def _is_array(x) -> bool:
    return type(x) is P.ArrayImpl


def _array_bytes(x) -> int:
    return int(x.nbytes)
