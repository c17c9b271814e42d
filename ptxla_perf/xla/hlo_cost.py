"""What one step graph costs: FLOPs, transcendentals and bytes accessed, from XLA's own HloCostAnalysis.

torch_xla has no cost API; jaxlib ships XLA's `HloCostAnalysis` behind private entry points
(`jaxlib._hlo.HloModule.from_serialized_hlo_module_proto`, `jaxlib._jax.hlo_module_cost_analysis`). We call them
on the serialized HLO of the graph a step runs, with a standalone CPU client of jaxlib's own (never
`jax.devices()`: that would start JAX's runtime, and on a TPU host grab the chips torch_xla holds). Every call is
guarded: when they are missing or fail, the HLO text is read instead and only `dot`/`convolution` FLOPs are
counted (the FLOPs that matter for HFU), with the graph's inputs + outputs as its bytes (a lower bound).
`GraphCost.source` says which: "xla_cost_analysis" | "hlo_text" | "unavailable".

Tests simulate missing private APIs with `PTXLA_PERF_NO_XLA_COST=1` (or by making the import fail).
"""
from __future__ import annotations

import importlib
import math
import os
import re
from dataclasses import asdict, dataclass
from typing import Any

XLA, TEXT, UNAVAILABLE = "xla_cost_analysis", "hlo_text", "unavailable"
DISABLE_ENV = "PTXLA_PERF_NO_XLA_COST"


@dataclass
class GraphCost:
    """Per execution of one graph. bytes_accessed is XLA's sum of operand + output bytes over instructions."""

    flops: float | None
    bytes_accessed: float | None
    transcendentals: float | None
    source: str  # xla_cost_analysis | hlo_text | unavailable
    note: str | None = None  # why a weaker source was used, or what the figures leave out
    flops_source: str | None = None  # compiled | hlo | hlo_text: what the FLOPs were counted from (hlo_flops.py)
    flops_lower_bound: bool = False  # partial FLOPs: dots/convolutions only, or a loop counted once
    bytes_lower_bound: bool = False  # partial bytes: the graph's inputs + outputs, or what a compiled count missed

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def unavailable(note: str) -> GraphCost:
    return GraphCost(None, None, None, UNAVAILABLE, note)


def from_properties(props: Any, note: str | None = None) -> GraphCost:
    """XLA's cost property map (`{'flops': .., 'bytes accessed': .., 'transcendentals': ..}`; JAX returns a dict,
    older versions a list of one dict per program) -> GraphCost. Missing keys mean zero: XLA omits them."""
    if isinstance(props, (list, tuple)):
        props = props[0] if props else None
    if not isinstance(props, dict) or not props:
        raise ValueError("cost analysis returned nothing")
    flops = float(props["flops"]) if "flops" in props else None  # missing: unknown (hlo_flops.checked counts them)
    return GraphCost(flops, float(props.get("bytes accessed", 0.0)), float(props.get("transcendentals", 0.0)), XLA,
                     note if flops is not None else (note or "the cost analysis gave no FLOPs"))


# --- XLA's HloCostAnalysis through jaxlib ------------------------------------------------------------------
_CLIENTS: dict[int, Any] = {}  # standalone jaxlib CPU clients by device count, each made once (~3 ms)


def cpu_client(xla: Any, devices: int = 1) -> Any:
    """A standalone jaxlib CPU client with `devices` devices, made once per process (never the runtime's own
    client): the cost analysis (it only supplies shape sizes), memory.py's compile of a torch_xla graph and the
    SPMD partitioner (backends/torch_xla/modes.py) share it."""
    if devices not in _CLIENTS:
        _CLIENTS[devices] = xla.get_tfrt_cpu_client(asynchronous=False, num_devices=devices)
    return _CLIENTS[devices]


# Per-compile overrides of XLA's options for those compiles, where this jaxlib has them: the CPU's fusion
# emitters off (the older loop emitters: the same fusions and buffer assignment, ~2.5x less compile time on a
# training step's graph, measured on jaxlib 0.10.2; jaxlib 0.12 has only the emitters and rejects the name)
_ANALYSIS_OVERRIDES = [("xla_cpu_use_fusion_emitters", False)]
_overrides_ok = True


def analysis_options(xla: Any) -> Any:
    """CompileOptions for a compile made only to read its HLO-level results (buffer assignment, the partitioned
    module): LLVM's optimizations off, as they change the machine code and nothing those figures read. A step
    graph's memory figures then cost about a quarter of the CPU compile (2.5 s instead of 11 s measured on a
    tiny GPT step's graph, the same figures to the byte)."""
    options = xla.CompileOptions()
    debug = options.executable_build_options.debug_options
    debug.xla_backend_optimization_level = 0
    debug.xla_llvm_disable_expensive_passes = True
    if _overrides_ok:
        options.env_option_overrides = list(_ANALYSIS_OVERRIDES)
    return options


def compile_for_analysis(client: Any, module: Any, devices: Any, options: Any) -> Any:
    """`client.compile_and_load` with analysis_options' overrides, and again without them where this jaxlib does
    not know one ("No such compile option": then never tried again in this process)."""
    global _overrides_ok
    try:
        return client.compile_and_load(module, devices, options)
    except Exception as exc:
        if not options.env_option_overrides or "No such compile option" not in str(exc):
            raise
        _overrides_ok = False
        options.env_option_overrides = []
        return client.compile_and_load(module, devices, options)


def xla_cost(proto: bytes) -> GraphCost:
    """HloCostAnalysis of a serialized HloModuleProto. Raises when the private entry points are missing."""
    if os.environ.get(DISABLE_ENV):
        raise ImportError(f"{DISABLE_ENV} is set")
    hlo = importlib.import_module("jaxlib._hlo")
    xla = importlib.import_module("jaxlib._jax")
    module = hlo.HloModule.from_serialized_hlo_module_proto(proto)
    return from_properties(xla.hlo_module_cost_analysis(cpu_client(xla), module))


def xla_text_cost(text: str) -> dict[str, float]:
    """HloCostAnalysis of a module given as HLO text (hlo_flops.py: one loop body at a time). Raises when the
    private entry points are missing."""
    if os.environ.get(DISABLE_ENV):
        raise ImportError(f"{DISABLE_ENV} is set")
    hlo = importlib.import_module("jaxlib._hlo")
    xla = importlib.import_module("jaxlib._jax")
    props = xla.hlo_module_cost_analysis(cpu_client(xla), hlo.hlo_module_from_text(text))
    return dict(props[0] if isinstance(props, (list, tuple)) else props)


def cost(proto_fn, text: str | None) -> GraphCost:
    """The best cost we can get: XLA's analysis of `proto_fn()` (a callable, so the proto is only serialized when
    it is used), else the HLO text, else unavailable. Never raises."""
    why = None
    try:
        return xla_cost(proto_fn())
    except Exception as exc:  # private API missing or changed: say so, fall back
        why = f"XLA cost analysis unavailable ({type(exc).__name__}: {str(exc).splitlines()[0][:120] if str(exc) else ''})"
    if text:
        try:
            c = text_cost(text)
            c.note = f"{why}; {c.note}" if c.note else why
            return c
        except Exception as exc:
            why = f"{why}; HLO text not readable ({str(exc).splitlines()[0][:80]})"
    return unavailable(why)


# --- fallback: the HLO text ---------------------------------------------------------------------------------
_BYTES = {"pred": 1, "s8": 1, "u8": 1, "s16": 2, "u16": 2, "f16": 2, "bf16": 2, "s32": 4, "u32": 4, "f32": 4,
          "s64": 8, "u64": 8, "f64": 8, "c64": 8, "c128": 16, "s4": 0.5, "u4": 0.5}
_INSTR = re.compile(r"^\s*(?P<root>ROOT\s+)?%?(?P<name>[\w.\-]+)\s*=\s*(?P<shape>.+?)\s+(?P<op>[a-z][\w\-]*)\((?P<rest>.*)$")
_ARRAY = re.compile(r"\b(?P<dt>pred|[subfc]\d+|bf16|f8\w*)\[(?P<dims>[\d,]*)\]")
_TRANSCENDENTAL = {"exponential", "exponential-minus-one", "log", "log-plus-one", "power", "rsqrt", "sqrt", "cbrt",
                   "tanh", "logistic", "sine", "cosine", "tan", "atan2", "erf"}


def _arrays(shape: str) -> list[tuple[str, tuple[int, ...]]]:
    return [(m["dt"], tuple(int(d) for d in m["dims"].split(",") if d)) for m in _ARRAY.finditer(shape)]


def _nbytes(arrays: list[tuple[str, tuple[int, ...]]]) -> float:
    return sum(math.prod(dims) * _BYTES.get(dt, 1 if dt.startswith("f8") else 4) for dt, dims in arrays)


def _operands(rest: str) -> list[str]:
    """The operand names of an instruction: `f32[4,8]{1,0} %a, %b` (torch_xla) or `a, b` (JAX) up to the
    parenthesis that closes the operand list."""
    names, depth, start = [], 0, 0
    for i, ch in enumerate(rest):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            if depth == 0:  # the operand list's own closing parenthesis
                names.append(rest[start:i])
                break
            depth -= 1
        elif ch == "," and depth == 0:
            names.append(rest[start:i])
            start = i + 1
    return [part.split()[-1].lstrip("%") for part in names if part.strip()]


def _attr(rest: str, key: str) -> str | None:
    m = re.search(rf"\b{key}=(\{{[^}}]*\}}|[%\w.\->]+)", rest)
    return m.group(1) if m else None


def _dot_conv_flops(op: str, arrays, rest: str, shapes: dict) -> float:
    """2 x multiply-adds of a `dot` (output elements x contracted size) or a `convolution` (output elements x
    kernel elements per output feature, padding included); 0 for anything else."""
    out = math.prod(arrays[0][1]) if arrays else 0
    if op == "dot":
        ops = _operands(rest)
        lhs = shapes.get(ops[0]) if ops else None
        if lhs is None:  # torch_xla prints operand shapes inline: `dot(f32[4,8]{1,0} %a, ...)`
            inline = _arrays(rest.split("%", 1)[0])
            lhs = inline[0] if inline else None
        dims = [int(d) for d in re.findall(r"\d+", _attr(rest, "lhs_contracting_dims") or "")]
        return 2.0 * out * math.prod(lhs[1][d] for d in dims if d < len(lhs[1])) if lhs else 0.0
    if op == "convolution":
        ops = _operands(rest)
        kernel = shapes.get(ops[1]) if len(ops) > 1 else None
        if kernel is None:
            inline = _arrays(rest)
            kernel = inline[1] if len(inline) > 1 else None
        labels = _attr(rest, "dim_labels") or ""
        k_labels = labels.split("_")[1].split("->")[0] if "_" in labels else ""
        if kernel is not None and "o" in k_labels and len(k_labels) == len(kernel[1]):
            return 2.0 * out * math.prod(kernel[1]) // max(kernel[1][k_labels.index("o")], 1)
    return 0.0


# `%name (p: f32[2]) -> f32[2] {` (torch_xla, XLA's printer) or `region_0.2 {` (JAX's `as_text(dialect="hlo")`)
_COMPUTATION = re.compile(r"^(?P<entry>ENTRY\s+)?%?(?P<name>[\w.\-]+)\s*(?:\(.*)?\{\s*$")


def _parse(text: str):
    """HLO text -> (instructions as (computation, name, op, arrays, rest, is_root), name -> single array shape,
    entry computation name)."""
    shapes: dict[str, tuple[str, tuple[int, ...]]] = {}
    instrs = []
    comp, entry = None, None
    for line in text.splitlines():
        c = _COMPUTATION.match(line)
        if c and "=" not in line.split("(", 1)[0]:
            comp = c["name"]
            if c["entry"]:
                entry = comp
            continue
        m = _INSTR.match(line)
        if not m:
            continue
        arrays = _arrays(m["shape"])
        if len(arrays) == 1 and not m["shape"].lstrip().startswith("("):
            shapes[m["name"]] = arrays[0]
        instrs.append((comp, m["name"], m["op"], arrays, m["rest"], bool(m["root"])))
    return instrs, shapes, entry


def text_cost(text: str) -> GraphCost:
    """Count `dot` and `convolution` FLOPs (2 per multiply-add, padding included) and transcendental elements from
    HLO text; bytes = the entry computation's parameters + its root output (each read/written once: a lower
    bound). Elementwise FLOPs are left out, which is what the note says."""
    instrs, shapes, entry = _parse(text)
    if not instrs:
        raise ValueError("no HLO instructions found")
    flops = trans = nbytes = 0.0
    for comp, _name, op, arrays, rest, root in instrs:
        flops += _dot_conv_flops(op, arrays, rest, shapes)
        if op in _TRANSCENDENTAL:
            trans += math.prod(arrays[0][1]) if arrays else 0
        if comp == entry and (op == "parameter" or root):
            nbytes += _nbytes(arrays)
    return GraphCost(flops, nbytes, trans, TEXT,
                     "from the HLO text: dot/convolution FLOPs only; bytes = graph inputs + outputs (a lower bound)",
                     flops_source=TEXT, flops_lower_bound=True, bytes_lower_bound=True)


def instruction_costs(text: str) -> dict[str, dict[str, float]]:
    """Per instruction of the entry computation of an optimized module (what a trace names its op events after:
    `fusion.253`, `dot.12`, `all-reduce.40`): `flops` (dot/convolution, inside the fused computation for a
    fusion), `bytes` (operands + result, each once: what a fusion reads and writes), `transcendentals`."""
    instrs, shapes, entry = _parse(text)
    by_comp: dict[str, list] = {}
    for ins in instrs:
        by_comp.setdefault(ins[0], []).append(ins)
    memo: dict[str, tuple[float, float]] = {}

    def comp_cost(name: str, depth: int = 0) -> tuple[float, float]:
        if name in memo or depth > 16:
            return memo.get(name, (0.0, 0.0))
        f = t = 0.0
        for _c, _n, op, arrays, rest, _r in by_comp.get(name, []):
            f += _dot_conv_flops(op, arrays, rest, shapes)
            t += math.prod(arrays[0][1]) if op in _TRANSCENDENTAL and arrays else 0
            called = _attr(rest, "calls") if op in ("fusion", "call") else None
            if called:
                cf, ct = comp_cost(called.lstrip("%"), depth + 1)
                f, t = f + cf, t + ct
        memo[name] = (f, t)
        return memo[name]

    out: dict[str, dict[str, float]] = {}
    for _c, name, op, arrays, rest, _r in by_comp.get(entry, []):
        if op in ("parameter", "constant", "tuple", "get-tuple-element", "bitcast"):
            continue
        f = _dot_conv_flops(op, arrays, rest, shapes)
        t = math.prod(arrays[0][1]) if op in _TRANSCENDENTAL and arrays else 0.0
        called = _attr(rest, "calls") if op in ("fusion", "call") else None
        if called:
            cf, ct = comp_cost(called.lstrip("%"))
            f, t = f + cf, t + ct
        operand_bytes = sum(_nbytes([shapes[o]]) for o in _operands(rest) if o in shapes)
        out[name] = {"flops": f, "bytes": operand_bytes + _nbytes(arrays), "transcendentals": float(t)}
    return out


COLLECTIVES = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "ragged-all-to-all", "collective-permute",
               "collective-broadcast")


def collectives(text: str) -> dict[str, dict[str, float]]:
    """The collective instructions of a module's HLO text, by op (an async pair counts once, at its `-start`):
    `count` and `bytes` (operands + result, each once: how `instruction_costs` and XLA's cost analysis count an
    instruction's bytes accessed)."""
    instrs, shapes, _entry = _parse(text)
    out: dict[str, dict[str, float]] = {}
    for _comp, _name, op, arrays, rest, _root in instrs:
        base = op[:-len("-start")] if op.endswith("-start") else op
        if base not in COLLECTIVES:
            continue
        operand_bytes = sum(_nbytes([shapes[o]]) for o in _operands(rest) if o in shapes)
        row = out.setdefault(base, {"count": 0, "bytes": 0.0})
        row["count"] += 1
        row["bytes"] += operand_bytes + _nbytes(arrays)
    return out
