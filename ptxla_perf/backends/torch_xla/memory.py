"""Memory: XLA's memory analysis of each captured graph (at the end of the run), the device's own figures, and
live XLA tensors rising step after step (one look for what holds them)."""
from __future__ import annotations

import os
import time
from typing import Any

import torch
import torch_xla

from ...analysis import memory as mem
from ..live_holders import GrowthWatch, find_holder, holder_counts
from ...model.records import Event, StepRecord
from . import _private as P
from ._private import X


class GraphMemory:
    """Graph hash -> its serialized HLO (kept at capture, at most 16) and, once the run ends, XLA's memory figures."""

    def __init__(self):
        self._protos: dict[str, bytes] = {}  # graph hash -> its serialized HLO, for the memory analysis at the end
        self._graph_mem: dict[str, dict] = {}  # graph hash -> XLA's memory analysis of it (memory.py)
        self._mem_time = 0.0  # seconds spent compiling graphs for their memory figures (at the end)

    def keep(self, digest: str, pending: list) -> None:
        """`pending`: the tensors with pending IR the sync is about to compute (Compiles.pending), its outputs."""
        if len(self._protos) >= 16:
            return
        try:
            self._protos[digest] = X._get_xla_tensors_hlo_proto(pending)
        except Exception:  # the memory figures of this graph stay unknown
            pass

    def graph_memory(self, final: bool = True) -> dict[str, Any]:
        """XLA's memory analysis of each captured graph: its HLO (kept when the roofline costed it) compiled once on
        a standalone CPU client, at the end of the run only (`final`), never inside a step."""
        if final:
            t0 = time.perf_counter()
            for digest, proto in list(self._protos.items()):
                if digest not in self._graph_mem:
                    self._graph_mem[digest] = {"id": digest, **mem.from_hlo_proto(proto).to_json()}
                    self._mem_time += time.perf_counter() - t0
                    t0 = time.perf_counter()
        graphs = list(self._graph_mem.values())
        notes = sorted({g["note"] for g in graphs if g.get("note")})[:3]
        if graphs:
            notes.append(f"{len(graphs)} graph(s) compiled for their memory figures in {self._mem_time:.2f} s, after "
                         "the run")
        if not self._protos:
            notes.append("no step graph was captured: memory figures come from graph-capture attribution steps "
                         "(attribution.mode=off or hlo=false turns them off)")
        elif not final:
            notes.append("per-graph memory is analysed when the run ends")
        if graphs:  # the captured HLO has no aliasing: torch_xla adds it when it compiles the graph itself
            aliasing = os.environ.get("XLA_ENABLE_PARAM_ALIASING", "1").lower() not in ("0", "false")
            notes.append("alias_bytes is 0 here: torch_xla aliases the parameters a step updates in place "
                         "(input-output aliasing) when it compiles the graph, after the HLO captured for these "
                         "figures; " + ("it is on (XLA_ENABLE_PARAM_ALIASING unset or 1), so the step's peak is "
                                        "lower by up to the updated parameters' bytes" if aliasing else
                                        "it is OFF in this run (XLA_ENABLE_PARAM_ALIASING=0): every updated "
                                        "parameter is held twice at the step's peak"))
        return {"scope": "per device (the graph torch_xla runs on one device), as XLA's CPU compiler assigns its "
                         "buffers",
                "method": "the captured graph's HLO (the roofline's, once per graph hash) converted to StableHLO and "
                          "compiled on a standalone jaxlib CPU client at the end of the run; its "
                          "CompiledMemoryStats (arguments, outputs, aliasing, temporaries)",
                "graphs": graphs[:20], "notes": notes}


class LiveTensors:
    """Live XLA tensors rising at several boundaries in a row (GrowthWatch): once, what holds them."""

    def __init__(self):
        self._watch = GrowthWatch()
        self._holders_before: dict[int, int] | None = None  # containers of XLA tensors at the boundary it fired

    def observe(self, rec: StepRecord, frame, attribution_on: bool) -> None:
        """Live XLA tensors rose at several boundaries in a row: once, find what holds them (live_holders.py): the
        containers of XLA tensors now, and at the next boundary the one that grew (searched from `frame`, the sync's
        caller)."""
        if self._holders_before is not None:
            before, self._holders_before = self._holders_before, None
            found = find_holder(is_xla_tensor, tensor_bytes, frame, before)
            if found is not None:
                rec.events.append(Event("memory_growth", found[0], found[1]))
            rec.attributed = True
        elif self._watch.observe(rec.live_arrays) and attribution_on:
            self._holders_before = holder_counts(is_xla_tensor)
            rec.attributed = True


def device_memory() -> dict[str, Any] | None:
    """The runtime's figures for the device (TPU/GPU: `xm.get_memory_info`); None on the CPU."""
    if not P.runtime_up():
        return None
    try:
        import torch_xla.core.xla_model as xm
        import torch_xla.runtime as xr
        kind = str(xr.device_type()).upper()
        if kind == "CPU":
            return None
        info = xm.get_memory_info(torch_xla.device())
    except Exception:
        return None
    return {"bytes_limit": info.get("bytes_limit"), "bytes_in_use": info.get("bytes_used"),
            "peak_bytes_in_use": info.get("peak_bytes_used"), **limit_kind(kind, os.environ)}


def limit_kind(device_type: str, env) -> dict[str, Any]:
    """What the runtime's `bytes_limit` is: on a GPU (CUDA) the PJRT allocator's limit (torch_xla gives it 75 % of
    the device's memory unless PJRT_ALLOCATOR_FRACTION says otherwise; PJRT_ALLOCATOR_PREALLOCATE changes how);
    on a TPU the device's memory; elsewhere unsaid."""
    if device_type in ("CUDA", "GPU"):
        frac = env.get("PJRT_ALLOCATOR_FRACTION")
        said = [f"PJRT_ALLOCATOR_FRACTION={frac}" if frac else
                "PJRT_ALLOCATOR_FRACTION unset (default 75 %)"]
        if env.get("PJRT_ALLOCATOR_PREALLOCATE"):
            said.append(f"PJRT_ALLOCATOR_PREALLOCATE={env['PJRT_ALLOCATOR_PREALLOCATE']}")
        return {"limit_kind": "allocator", "limit_set_by": "; ".join(said)}
    if device_type == "TPU":
        return {"limit_kind": "device"}
    return {}


def is_xla_tensor(x) -> bool:
    try:
        return isinstance(x, torch.Tensor) and x.device.type == "xla"
    except Exception:
        return False


def tensor_bytes(x) -> int:
    return int(x.element_size() * x.numel())  # metadata: no sync
