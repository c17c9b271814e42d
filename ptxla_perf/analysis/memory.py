"""Device memory: what each step graph holds, what the device has, and what grows from step to step.

- **Per graph**, from XLA's own compiled-memory analysis (`CompiledMemoryStats`: argument, output, alias, temp,
  generated-code bytes), obtained once per distinct graph where the compile already happened: JAX asks the
  `Compiled` object it gets for the roofline's cost analysis (`compiled.memory_analysis()`, a cache hit of the
  executable just built); torch_xla keeps the serialized HLO of each graph it captures for the roofline and, once
  at the end of the run, converts it to StableHLO (`jaxlib`'s `mlir.hlo_to_stablehlo`) and compiles it on the
  standalone jaxlib CPU client hlo_cost.py already makes (never JAX's runtime: that would grab a TPU torch_xla
  holds). Without jaxlib: "unavailable".
- **Capacity**: the runtime's own figure where it gives one (TPU/GPU `memory_stats()['bytes_limit']`,
  `xm.get_memory_info`), else the spec table (peaks.MEMORY_GIB), else unknown (the CPU); a user override
  (`--device-memory-gb`, `roofline.device_memory_gb`) asks "would it fit on X".
- **Headroom** = capacity - the largest graph's peak (its arguments, i.e. the resident parameters and optimizer
  state it takes, are part of its peak), or - the runtime's own peak in use where that is larger.
- **Live memory per step**: the adapters put a cheap live count on boundary records (`StepRecord.live`: arrays,
  bytes; torch_xla's tensor create/destroy counters, JAX's live arrays sampled every few steps);
  `growth()` is the one derivation of "bytes / arrays per step in the steady state" that the rule
  (rules/memory.py), the section and the views read.

Pure logic except `from_hlo_proto` (jaxlib, imported on use). docs/report.md#memory has the section's fields.
"""
from __future__ import annotations

import importlib
import os
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Iterable

from ..model import fmt
from ..model import summary_keys as K
from ..model.thresholds import value as threshold
from ..xla import buffer_assignment
from ..frames import function_at, is_user_file
from ..xla.hlo_cost import analysis_options, compile_for_analysis, cpu_client
from ..peaks import memory_from_table
from ..xla.buffer_assignment import describe
from ..model.records import evidence_json
from .stats import median

XLA, UNAVAILABLE = "xla_memory_analysis", "unavailable"
DISABLE_ENV = "PTXLA_PERF_NO_XLA_MEMORY"  # tests: behave as if jaxlib's entry points were missing
MAX_PROTO_BYTES = 64 << 20  # a torch_xla graph's HLO above this is not compiled again for its memory figures


@dataclass
class GraphMemory:
    """One compiled program, per device. `peak_bytes`: the larger of XLA's own peak estimate and arguments +
    outputs - aliased + temporaries (what the program holds at once)."""

    argument_bytes: int | None
    output_bytes: int | None
    alias_bytes: int | None  # outputs that reuse a donated argument's buffer
    temp_bytes: int | None
    generated_code_bytes: int | None
    peak_bytes: int | None
    source: str  # xla_memory_analysis | unavailable
    note: str | None = None
    xla_peak_bytes: int | None = None  # XLA's own peak estimate (CompiledMemoryStats.peak_memory_in_bytes)
    largest_buffers: list[dict[str, Any]] | None = None  # buffer_assignment.largest(): the biggest held at the peak
    buffers_note: str | None = None  # why largest_buffers is empty or partial

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def unavailable(note: str) -> GraphMemory:
    return GraphMemory(None, None, None, None, None, None, UNAVAILABLE, note)


def from_stats(stats: Any, note: str | None = None, executable: Any = None) -> GraphMemory:
    """XLA's `CompiledMemoryStats` (or a list of one per program) -> GraphMemory; with the `executable` it came from
    (its optimized HLO modules), the largest buffers at the peak with their ops and lines (largest_buffers)."""
    if isinstance(stats, (list, tuple)):
        stats = stats[0] if stats else None
    if stats is None or not hasattr(stats, "argument_size_in_bytes"):
        raise ValueError("memory analysis returned nothing")
    arg = int(stats.argument_size_in_bytes)
    out = int(stats.output_size_in_bytes)
    alias = int(stats.alias_size_in_bytes)
    temp = int(stats.temp_size_in_bytes)
    code = int(getattr(stats, "generated_code_size_in_bytes", 0) or 0)
    xla_peak = int(getattr(stats, "peak_memory_in_bytes", 0) or 0) or None
    # the temporaries are one allocation (XLA's preallocated temp buffer), live for the whole program: what the
    # program holds at once is at least arguments + outputs not aliased + temporaries, whatever XLA's own peak
    # estimate says (on the CPU it can leave a while loop's temporaries out)
    peak = max(xla_peak or 0, arg + out - alias + temp)
    g = GraphMemory(arg, out, alias, temp, code, peak, XLA, note, xla_peak)
    g.largest_buffers, g.buffers_note = largest_buffers(stats, executable)
    return g


def largest_buffers(stats: Any, executable: Any) -> tuple[list[dict[str, Any]], str | None]:
    """The buffers the program holds at its peak, largest first (buffer_assignment.py), from the stats' serialized
    buffer assignment and the executable's optimized HLO (opcode, shape, the user's line). ([], why) when either
    is missing or unreadable; never raises."""
    try:
        data = getattr(stats, "serialized_buffer_assignment_proto", None)
        if not data:
            return [], "this XLA gives no buffer assignment with its memory analysis"
        modules: list[bytes] = []
        note = None
        try:
            for m in executable.hlo_modules() if executable is not None else []:
                modules.append(m.as_serialized_hlo_module_proto())
        except Exception as exc:  # noqa: BLE001 - the buffers without their ops
            note = f"optimized HLO unavailable ({type(exc).__name__}): buffers without their ops or lines"
        out = buffer_assignment.largest(bytes(data), modules, is_user=is_user_file)
        for row in out["rows"]:
            loc = row.get("location")
            if loc and not loc.get("function"):
                loc["function"] = function_at(loc["file"], loc["line"])
        return out["rows"], note or out["note"]
    except Exception as exc:  # noqa: BLE001 - a diagnostic: said, never fatal
        return [], f"largest buffers unavailable ({type(exc).__name__}: {_first_line(exc)})"


def from_compiled(compiled: Any) -> GraphMemory:
    """JAX: `jax.stages.Compiled.memory_analysis()`. Never raises."""
    if os.environ.get(DISABLE_ENV):
        return unavailable(f"{DISABLE_ENV} is set")
    try:
        stats = compiled.memory_analysis()
        if stats is None:
            return unavailable("memory analysis unsupported by this backend")
        try:
            exe = compiled.runtime_executable()
        except Exception:  # noqa: BLE001 - the figures without the buffers' ops
            exe = None
        return from_stats(stats, executable=exe)
    except Exception as exc:  # private or changed API: said, never fatal
        return unavailable(f"memory analysis failed ({type(exc).__name__}: {_first_line(exc)})")



def from_hlo_proto(proto: bytes) -> GraphMemory:
    """torch_xla: a graph's serialized HloModuleProto, converted to StableHLO and compiled on a standalone jaxlib
    CPU client (the CPU's buffer assignment: the program XLA would build for the CPU, before the device's own
    layouts and fusions). Never raises."""
    if os.environ.get(DISABLE_ENV):
        return unavailable(f"{DISABLE_ENV} is set")
    if len(proto) > MAX_PROTO_BYTES:
        return unavailable(f"graph HLO of {fmt.nbytes(len(proto))} not compiled again for its memory figures")
    try:
        xla = importlib.import_module("jaxlib._jax")
        client = cpu_client(xla)  # one standalone CPU client per process, shared with the cost analysis
        module = xla.mlir.hlo_to_stablehlo(proto)
        devices = xla.DeviceList(tuple(client.local_devices()[:1]))
        exe = compile_for_analysis(client, module, devices, analysis_options(xla))
        return from_stats(exe.get_compiled_memory_stats(), executable=exe)
    except Exception as exc:
        return unavailable(f"memory analysis of the graph's HLO failed ({type(exc).__name__}: {_first_line(exc)})")


def _first_line(exc: BaseException) -> str:
    text = str(exc)
    return text.splitlines()[0][:120] if text else ""


# --- capacity -------------------------------------------------------------------------------------------------
def capacity(runtime: dict[str, Any] | None, devices: list[str | None], override_gb: float | None
             ) -> dict[str, Any]:
    """The memory a step can use: the user's figure, else the runtime's `bytes_limit`, else the spec table, else
    unknown. `source` says where from (user | runtime | table | unknown); `kind` what it is: `allocator_limit` (the
    runtime's allocator may use this much: on a GPU a fraction of the device's memory, `set_by` the variable that
    sets it), `device_memory` (the device's own), `runtime_limit` (the runtime's figure, its nature unsaid), `user`
    or `unknown`; `device_bytes` the device's physical memory where known (the runtime's, or the spec table's)."""
    rt = runtime or {}
    name = next((d for d in devices if d), None)
    table = next((t for t in (memory_from_table(d) for d in devices if d) if t), None)
    device = {"device_bytes": table[1] if table else None, "device_source": "table" if table else None}
    if override_gb:
        return {"bytes": int(float(override_gb) * 2**30), "source": "user", "name": f"{float(override_gb):g} GiB",
                "detail": "--device-memory-gb / roofline.device_memory_gb", "kind": "user", "set_by": None,
                **device}
    limit = rt.get("bytes_limit")
    if limit:
        kind = {"allocator": "allocator_limit", "device": "device_memory"}.get(rt.get("limit_kind"), "runtime_limit")
        if kind == "device_memory":
            device = {"device_bytes": int(limit), "device_source": "runtime"}
        what = {"allocator_limit": "the allocator's limit, not the device's memory",
                "device_memory": "the device's memory", "runtime_limit": "the runtime's limit"}[kind]
        return {"bytes": int(limit), "source": "runtime", "name": name, "kind": kind,
                "set_by": rt.get("limit_set_by") if kind == "allocator_limit" else None,
                "detail": f"the runtime's memory_stats() bytes_limit: {what}", **device}
    if table:
        return {"bytes": table[1], "source": "table", "name": table[0], "detail": table[2], "kind": "device_memory",
                "set_by": None, **device}
    return {"bytes": None, "source": "unknown", "name": name, "kind": "unknown", "set_by": None, **device,
            "detail": "the runtime gives no memory figure for this device (the CPU) and the spec table has none: "
                      "pass --device-memory-gb to ask whether it would fit on a given device"}


def capacity_words(cap: dict[str, Any], num=None) -> str:
    """What a capacity is, in a few words: `NVIDIA H200 allocator limit, XLA_PYTHON_CLIENT_MEM_FRACTION unset
    (default 75 %); device 141 GiB`, `TPU v5e`, `user`."""
    num = num or fmt.nbytes
    name = cap.get("name") or cap.get("source") or "?"
    if cap.get("kind") != "allocator_limit":
        return name
    words = f"{name} allocator limit" + (f", {cap['set_by']}" if cap.get("set_by") else "")
    return words + (f"; device {num(cap['device_bytes'])}" if cap.get("device_bytes") else "")


# --- live memory, step over step ---------------------------------------------------------------------------------
def growth(train: list, warmup: int) -> dict[str, Any] | None:
    """Live device values per step over the training iterations after warm-up: `arrays_per_step` (and
    `bytes_per_step` where the adapter measured bytes) as the trend of the samples (`trend`: one stray sample, a
    step output in flight or a count taken at the wrong moment, does not decide it), `rising_share` of the
    intervals between samples in which the count went up. None without enough samples."""
    samples = [(s.index + getattr(s, "repeat", 1) - 1, s.live_arrays, s.live_bytes)  # a folded record's: its last
               for s in train[warmup:] if s.live_arrays is not None]
    if len(samples) < 2:
        return None
    (i0, _, _), (i1, a1, b1) = samples[0], samples[-1]
    rises = sum(1 for (_, a, _), (_, b, _) in zip(samples, samples[1:]) if b > a)
    measured = all(b is not None for _, _, b in samples)
    out = {"samples": len(samples), "first_step": i0, "last_step": i1,
           "arrays_per_step": trend([(i, a) for i, a, _ in samples]), "rising_share": rises / (len(samples) - 1),
           "bytes_per_step": trend([(i, b) for i, _, b in samples]) if measured else None,
           "live_arrays": a1, "live_bytes": b1}
    return out


def trend(points: list[tuple[int, float]], most: int = 100) -> float:
    """The rise per step of (step, value) samples, resistant to stray ones (the Theil-Sen slope: the median of the
    slopes between every two samples, over at most `most` samples evenly spread): on a steady rise it is the rise
    from the first to the last sample, whatever a few samples say (up to ~29 % of them); a flat or sawtooth count
    gives ~0."""
    if len(points) > most:
        points = [points[round(j * (len(points) - 1) / (most - 1))] for j in range(most)]
    slopes = [(v1 - v0) / (i1 - i0) for n, (i0, v0) in enumerate(points) for i1, v1 in points[n + 1:] if i1 > i0]
    return median(slopes) or 0.0


def grows(g: dict[str, Any] | None) -> bool:
    """Steady growth: enough samples, going up in most intervals, with a trend of at least a value every few
    steps."""
    return bool(g) and g["samples"] >= threshold("memory_growth_min_samples") \
        and g["rising_share"] >= threshold("memory_growth_share") \
        and g["arrays_per_step"] >= threshold("memory_growth_min_per_step")


# --- the report section ---------------------------------------------------------------------------------------
@dataclass
class MemorySection:
    """The report's `memory` section (docs/report.md#memory): the graphs' figures, the largest graph's parts, the
    device's capacity and the headroom left, live memory per step; `per_rank` on a merged report."""

    source: str
    method: str | None
    scope: str | None
    graphs: list[dict[str, Any]]
    largest_graph: str | None = None
    peak_bytes: int | None = None
    argument_bytes: int | None = None
    output_bytes: int | None = None
    alias_bytes: int | None = None
    temp_bytes: int | None = None
    capacity: dict[str, Any] = field(default_factory=dict)
    runtime: dict[str, Any] | None = None
    headroom_bytes: int | None = None
    headroom_share: float | None = None
    live: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)
    per_rank: list[dict[str, Any]] | None = None  # merged reports: each rank's peak, headroom, live growth

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        if out["per_rank"] is None:
            del out["per_rank"]
        return out

    @classmethod
    def from_json(cls, d: dict[str, Any] | None) -> "MemorySection | None":
        """A written report's section (`merge`)."""
        if not isinstance(d, dict):
            return None
        known = {f.name for f in fields(cls)}
        return cls(**{"source": UNAVAILABLE, "method": None, "scope": None, "graphs": [],
                      **{k: v for k, v in d.items() if k in known}})

    def summary_fields(self) -> dict[str, Any]:
        """The figures the summary carries (console, `diff`, the sweep table)."""
        return {K.PEAK_BYTES: self.peak_bytes, K.TEMP_BYTES: self.temp_bytes, K.ARGUMENT_BYTES: self.argument_bytes,
                K.DEVICE_MEMORY: (self.capacity or {}).get("bytes"), K.MEMORY_HEADROOM: self.headroom_bytes,
                K.LIVE_BYTES_PER_STEP: (self.live or {}).get("bytes_per_step")}


def section(info: dict[str, Any], runtime: dict[str, Any] | None, devices: list[str | None],
            override_gb: float | None, live: dict[str, Any] | None, cap: dict[str, Any] | None = None
            ) -> MemorySection:
    """`info`: the adapter's `graph_memory()`; `runtime`: its `device_memory()`; `live`: `live_figures()`; `cap`:
    the capacity already derived from these (`capacity()`: the session derives it once, for the analysis's
    `memory_growth` rating and this section alike)."""
    graphs = [dict(g) for g in info.get("graphs", [])]
    known = [g for g in graphs if g.get("peak_bytes") is not None]
    cap = cap if cap is not None else capacity(runtime, devices, override_gb)
    out = MemorySection(XLA if known else UNAVAILABLE, info.get("method"), info.get("scope"), graphs,
                        capacity=cap, runtime=runtime or None, live=live_json(live), notes=list(info.get("notes", [])))
    if known:
        top = max(known, key=lambda g: g["peak_bytes"])
        out.largest_graph = top.get("id")
        out.peak_bytes, out.argument_bytes, out.output_bytes, out.alias_bytes, out.temp_bytes = (
            top.get(k) for k in ("peak_bytes", "argument_bytes", "output_bytes", "alias_bytes", "temp_bytes"))
    need = max([v for v in (out.peak_bytes, (runtime or {}).get("peak_bytes_in_use")) if v is not None],
               default=None)
    if cap["bytes"] and need is not None:
        out.headroom_bytes = cap["bytes"] - need
        out.headroom_share = out.headroom_bytes / cap["bytes"]
    return out


def _gib(n: float | None) -> str:
    if n is None:
        return "?"
    return f"{n / 2**30:.3g}" if abs(n) >= 2**27 else fmt.nbytes(n)


def summary_line(sec: dict[str, Any] | None, largest: bool = True) -> list[str]:
    """`memory  peak 3.2 GiB of 16 GiB (TPU v5e) · args 1.10 GiB · temps 1.90 GiB · live +12 MiB/step`, then
    (`largest`) the largest graph's largest buffer at its peak: `memory  largest buffer 1.00 MiB f32[512,512] temp
    (fusion) at train.py:19`."""
    if not sec:
        return []
    if sec.get("peak_bytes") is None:
        why = (sec.get("notes") or [sec.get("source")])[0]
        return [f"  memory      per-graph figures unavailable: {why}"] + _live_part(sec, alone=True)
    cap = sec.get("capacity") or {}
    peak = sec["peak_bytes"]
    big = max(peak, cap.get("bytes") or 0) >= 2**27
    # the peak and the capacity in one unit (GiB on a device), to compare; every other figure in its own unit,
    # never a bare number after the first ("args 0.0543" read as what?)
    num = (lambda n: f"{n / 2**30:.3g} GiB") if big else fmt.nbytes
    head = f"  memory      peak {num(peak)}"
    if cap.get("bytes"):
        head += f" of {num(cap['bytes'])} ({capacity_words(cap, num)})"
    else:
        head += " (device capacity unknown)"
    parts = [head, f"args {fmt.nbytes(sec.get('argument_bytes') or 0)}",
             f"temps {fmt.nbytes(sec.get('temp_bytes') or 0)}"]
    if sec.get("alias_bytes"):
        parts.append(f"donated {fmt.nbytes(sec['alias_bytes'])}")
    line = " · ".join(parts)
    live = _live_part(sec)
    top = top_buffers(sec, 1) if largest else []
    largest_line = [f"  memory      largest buffer {buffers_text(top)}"] if top else []
    return [line + (" · " + live[0] if live else "")] + largest_line


def _live_part(sec: dict[str, Any], alone: bool = False) -> list[str]:
    live = sec.get("live") or {}
    if not live:
        return []
    b = live.get("bytes_per_step")
    text = (f"live {fmt.value(b, 'B', signed=True)}/step" if b is not None
            else f"live {live['arrays_per_step']:+.2f} arrays/step")
    return [f"  memory      {text}"] if alone else [text]


def top_buffers(sec: dict[str, Any] | None, k: int = 3) -> list[dict[str, Any]]:
    """The largest graph's largest buffers at its peak (graphs[].largest_buffers, buffer_assignment.py), up to k."""
    top = next((g for g in (sec or {}).get("graphs") or [] if g.get("id") == (sec or {}).get("largest_graph")), None)
    return list((top or {}).get("largest_buffers") or [])[:k]


def buffers_text(rows: list[dict[str, Any]]) -> str:
    """`1 MiB f32[512,512] temp (fusion) at train.py:12; ...`: the rows in a message."""
    return "; ".join(describe(r) for r in rows)


def fmt_gib(n: float | None) -> str:
    return _gib(n)


def graph_rows(sec: dict[str, Any]) -> Iterable[dict[str, Any]]:
    """Per-graph rows for the views: id and the parts of its peak (arguments, outputs not aliased, temps)."""
    for g in sec.get("graphs") or []:
        if g.get("peak_bytes") is None:
            continue
        yield {"id": g.get("id"), "arguments": g.get("argument_bytes") or 0,
               "outputs": max((g.get("output_bytes") or 0) - (g.get("alias_bytes") or 0), 0),
               "temps": g.get("temp_bytes") or 0, "peak": g["peak_bytes"], "aliased": g.get("alias_bytes") or 0}


def live_figures(train: list, warmup: int, iterations: list) -> dict[str, Any] | None:
    """`growth()` joined with what holds the values where an adapter found it (a `memory_growth` event: the
    container, its name, the line that adds to it, bytes per held value). Where the adapter measured no bytes per
    step (torch_xla), bytes/step = arrays/step x the held values' bytes each. The one derivation the rule, the
    section and the views read."""
    g = growth(train, warmup)
    if g is None:
        return None
    ev = next((e for s in iterations for e in s.events if e.kind == "memory_growth"), None)
    if ev is not None:
        g["holder"] = dict(evidence_json(ev.detail), location=ev.location)
        per_item = g["holder"].get("bytes_per_item")
        if g["bytes_per_step"] is None and per_item:
            g["bytes_per_step"] = g["arrays_per_step"] * per_item
            g["bytes_source"] = "arrays/step x bytes of each held value"
    return g


def location_of(holder: dict[str, Any]):
    return holder.get("location")


def live_json(g: dict[str, Any] | None) -> dict[str, Any] | None:
    """The section's `live` block: JSON (the holder's location as a dict)."""
    if g is None:
        return None
    out = {k: v for k, v in g.items() if k != "holder"}
    h = g.get("holder")
    if h:
        loc = h.get("location")
        out["holder"] = {**{k: v for k, v in h.items() if k != "location"},
                         "location": asdict(loc) if loc is not None else None}
    return out
