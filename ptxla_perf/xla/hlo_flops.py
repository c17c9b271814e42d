"""FLOPs that hold on any backend: a compiled program's cost held against what its own dots and convolutions imply.

XLA's compiled cost analysis is not always a measurement. On a GPU, cuBLAS/cuDNN calls are custom calls that it
counts as -1 FLOP and -1 byte each (a matmul step: -1 FLOP; a feed-forward block: its elementwise FLOPs only), and
on every backend it counts a `while` loop's body once, whatever its trip count (a `lax.scan` over 12 layers: one
layer). So `checked()` counts, from the program's HLO before optimization (what the backend compiled; JAX:
`lowered.as_text(dialect="hlo")`, torch_xla: the graph's HLO), the `dot`/`convolution` FLOPs with each loop body
times its trip count - the FLOPs the program cannot have less of - and keeps the compiled figure only when it is
valid (present, not negative) and not below that. Otherwise the FLOPs come from XLA's own HloCostAnalysis of that
HLO, run by us on jaxlib's standalone CPU client (hlo_cost.py), loop bodies times their trip counts (each body
analysed as a module of its own); without jaxlib's entry points, from the dot/convolution count alone (a lower
bound). A partitioned program's HLO is the global one: divided over the `partitions` devices it is split across
(an even split assumed), except where the work is in a shard_map or pmap body, whose shapes are one device's.

`GraphCost.flops_source` says which (`compiled` | `hlo` | `hlo_text`), `flops_lower_bound` whether the figure is
partial (dot/convolution only, or a loop whose trip count is unknown counted once), `bytes_lower_bound` whether
the bytes miss part of the program (the custom calls' or the loops' repeats). A negative figure is never kept.

Tests make the compiled figures look like a GPU's with `PTXLA_PERF_COMPILED_COST=negative|missing|low`.
"""
from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field, replace
from typing import Callable

from . import hlo_cost
from .hlo_cost import _COMPUTATION as _HEADER
from .hlo_cost import _INSTR, GraphCost, _arrays, _attr, _dot_conv_flops, _operands

SIMULATE_ENV = "PTXLA_PERF_COMPILED_COST"  # tests: negative | missing | low (the compiled figures a GPU gives)
SLACK = 0.01  # a compiled count this far below the dots' is still taken (XLA rewrites small dots)
COMPILED, HLO, TEXT = "compiled", "hlo", "hlo_text"

_KNOWN_TRIP = re.compile(r'"known_trip_count"\s*:\s*\{\s*"n"\s*:\s*"?(\d+)')
_CALLED = re.compile(r"\b(?:to_apply|calls|body|condition|true_computation|false_computation)=%?([\w.\-]+)"
                     r"|\bbranch_computations=\{([^}]*)\}")
_SUBCALLS = ("call", "fusion", "conditional", "async-start")  # ops whose computations run once per execution


@dataclass
class Instr:
    name: str
    op: str
    shape: str
    rest: str
    root: bool


@dataclass
class Computation:
    name: str
    header: str
    lines: list[str] = field(default_factory=list)
    instrs: dict[str, Instr] = field(default_factory=dict)
    root: Instr | None = None


@dataclass
class Module:
    comps: dict[str, Computation]
    entry: str
    shapes: dict[str, tuple]


def parse(text: str) -> Module:
    """HLO text (JAX's `region_0.2 {` headers or torch_xla's `%name (..) -> .. {`) -> its computations."""
    comps: dict[str, Computation] = {}
    shapes: dict[str, tuple] = {}
    cur, entry = None, None
    for line in text.splitlines():
        if cur is None:
            h = _HEADER.match(line)
            if h and not line.startswith("HloModule") and "=" not in line.split("(", 1)[0]:
                cur = comps[h["name"]] = Computation(h["name"], line)
                entry = h["name"] if h["entry"] else entry
            continue
        if line.strip() == "}":
            cur = None
            continue
        cur.lines.append(line)
        m = _INSTR.match(line)
        if m:
            ins = Instr(m["name"], m["op"], m["shape"], m["rest"], bool(m["root"]))
            cur.instrs[ins.name] = ins
            cur.root = ins if ins.root else cur.root
            arrays = _arrays(m["shape"])
            if len(arrays) == 1 and not m["shape"].lstrip().startswith("("):
                shapes[ins.name] = arrays[0]
    if entry is None:
        raise ValueError("no ENTRY computation in the HLO text")
    return Module(comps, entry, shapes)


# --- trip counts ------------------------------------------------------------------------------------------------
def _int_constant(comp: Computation, name: str) -> int | None:
    ins = comp.instrs.get(name)
    if ins is None or ins.op != "constant":
        return None
    m = re.match(r"\s*(-?\d+)\)", ins.rest)
    return int(m.group(1)) if m else None


def _gte_index(comp: Computation, name: str) -> int | None:
    ins = comp.instrs.get(name)
    if ins is None or ins.op != "get-tuple-element":
        return None
    src = comp.instrs.get(_operands(ins.rest)[0])
    idx = _attr(ins.rest, "index")
    return int(idx) if src is not None and src.op == "parameter" and idx and idx.isdigit() else None


def trip_count(mod: Module, comp: Computation, w: Instr) -> int | None:
    """A `while` loop's trip count: XLA's `known_trip_count` where the optimizer annotated it, else the counted
    loop JAX's scan and fori_loop build: an induction variable at tuple index k, started from a constant, stepped
    by a constant in the body, compared with a constant in the condition. None when it is not of that form."""
    known = _KNOWN_TRIP.search(w.rest)
    if known:
        return int(known.group(1))
    cond, body = mod.comps.get((_attr(w.rest, "condition") or "").lstrip("%")), \
        mod.comps.get((_attr(w.rest, "body") or "").lstrip("%"))
    if cond is None or body is None or cond.root is None or cond.root.op != "compare" or body.root is None:
        return None
    a, b = _operands(cond.root.rest)[:2]
    direction = (_attr(cond.root.rest, "direction") or "")
    k, limit = _gte_index(cond, a), _int_constant(cond, b)
    if k is None:  # `N > i`: the same test the other way round
        k, limit = _gte_index(cond, b), _int_constant(cond, a)
        direction = {"GT": "LT", "GE": "LE", "LT": "GT", "LE": "GE"}.get(direction, direction)
    init = comp.instrs.get(_operands(w.rest)[0])
    if k is None or limit is None or init is None or init.op != "tuple" or body.root.op != "tuple":
        return None
    init_ops, body_ops = _operands(init.rest), _operands(body.root.rest)
    if k >= len(init_ops) or k >= len(body_ops):
        return None
    start = _int_constant(comp, init_ops[k])
    step_ins = body.instrs.get(body_ops[k])
    if start is None or step_ins is None or step_ins.op not in ("add", "subtract"):
        return None
    x, y = _operands(step_ins.rest)[:2]
    step = _int_constant(body, y) if _gte_index(body, x) == k else \
        (_int_constant(body, x) if _gte_index(body, y) == k and step_ins.op == "add" else None)
    if not step:
        return None
    step = -step if step_ins.op == "subtract" else step
    span = {"LT": limit - start, "LE": limit - start + (1 if step > 0 else 0),
            "GT": start - limit, "GE": start - limit + (1 if step < 0 else 0)}.get(direction)
    if span is None or (step > 0) != (direction in ("LT", "LE")):
        return None
    return max(math.ceil(span / abs(step)), 0)


def _edges(mod: Module, comp: Computation):
    """(called computation, times it runs per execution of `comp` or None when unknown, is_loop, the conditional
    it is a branch of or None) for the ops that run whole computations: calls, fusions, conditional branches (one
    of which runs), and loop bodies."""
    for ins in comp.instrs.values():
        if ins.op == "while":
            body = (_attr(ins.rest, "body") or "").lstrip("%")
            if body in mod.comps:
                yield mod.comps[body], trip_count(mod, comp, ins), True, None
        elif ins.op in _SUBCALLS:
            for m in _CALLED.finditer(ins.rest):
                for name in (m.group(1),) if m.group(1) else m.group(2).split(","):
                    name = name.strip().lstrip("%")
                    if name in mod.comps:
                        yield mod.comps[name], 1, False, ins.name if ins.op == "conditional" else None


@dataclass
class DotCount:
    flops: float = 0.0
    loops: int = 0  # loops with a trip count above 1
    unknown_loops: int = 0  # loops whose trip count is unknown (counted once)
    opaque_calls: int = 0  # custom calls that do work (a Pallas/Triton kernel, cuDNN attention): their FLOPs unknown


# custom calls that only annotate (shardings, layouts, host offloading): no work of their own
_ANNOTATIONS = re.compile(r'custom_call_target="(?:Sharding|xla\.sdy\.[\w]+|SPMD\w+|LayoutConstraint|MoveTo\w+|'
                          r'annotate_device_placement|X64\w+)"')


def dot_flops(mod: Module) -> DotCount:
    """The `dot`/`convolution` FLOPs one execution of the module runs, loop bodies times their trip counts."""
    out = DotCount()

    def walk(comp: Computation, depth: int) -> float:
        if depth > 32:
            return 0.0
        f = sum(_dot_conv_flops(i.op, _arrays(i.shape), i.rest, mod.shapes) for i in comp.instrs.values())
        out.opaque_calls += sum(1 for i in comp.instrs.values()
                                if i.op == "custom-call" and not _ANNOTATIONS.search(i.rest))
        branches: dict[str, float] = {}  # a conditional runs one branch: the floor has its smallest
        for sub, times, loop, branch_of in _edges(mod, comp):
            if loop and times is None:
                out.unknown_loops += 1
            elif loop and times > 1:
                out.loops += 1
            sub_f = (1 if times is None else times) * walk(sub, depth + 1)
            if branch_of is None:
                f += sub_f
            else:
                branches[branch_of] = min(branches.get(branch_of, sub_f), sub_f)
        return f + sum(branches.values())

    out.flops = walk(mod.comps[mod.entry], 0)
    return out


# --- XLA's own analysis, loops counted ------------------------------------------------------------------------
_KEYS = ("flops", "transcendentals", "bytes accessed")


def _reachable(mod: Module, name: str) -> set[str]:
    seen, todo = set(), [name]
    while todo:
        n = todo.pop()
        if n in seen or n not in mod.comps:
            continue
        seen.add(n)
        for line in mod.comps[n].lines:
            for m in _CALLED.finditer(line):
                todo += [x.strip().lstrip("%") for x in ((m.group(1),) if m.group(1) else m.group(2).split(","))]
    return seen


def module_text(mod: Module, name: str) -> str:
    """One computation as the entry of a module of its own, with the computations it calls."""
    blocks, keep = [], _reachable(mod, name)
    for n in (n for n in mod.comps if n in keep):  # the module's own order: each callee before its callers
        c = mod.comps[n]
        header = c.header.strip()
        header = header[len("ENTRY"):].lstrip() if header.startswith("ENTRY") else header
        blocks.append(("ENTRY " if n == name else "") + header + "\n" + "\n".join(c.lines) + "\n}\n")
    return "HloModule sub\n\n" + "\n".join(blocks)


def loop_cost(mod: Module, analyse: Callable[[str], dict]) -> tuple[dict[str, float], int]:
    """XLA's HloCostAnalysis (`analyse(hlo_text) -> properties`) of the module, each loop body times its trip count:
    the analysis counts a body once, so each loop adds (trips x its body's own loop-counted cost - the body once).
    Returns (flops, transcendentals, bytes accessed) and the loops whose trip count is unknown (counted once)."""
    memo: dict[str, dict[str, float]] = {}
    unknown = 0

    def once(name: str) -> dict[str, float]:
        if name not in memo:
            props = analyse(module_text(mod, name))
            memo[name] = {k: float(props.get(k, 0.0)) for k in _KEYS}
        return memo[name]

    def counted(name: str, depth: int) -> dict[str, float]:
        nonlocal unknown
        total = dict(once(name))
        if depth > 16:
            return total
        for loop, trips in _loops(mod, mod.comps[name]):
            if trips is None:
                unknown += 1
                continue
            inner, body = counted(loop, depth + 1), once(loop)
            for k in _KEYS:
                total[k] += trips * inner[k] - body[k]
        return total

    return counted(mod.entry, 0), unknown


def _loops(mod: Module, comp: Computation, depth: int = 0) -> list[tuple[str, int | None]]:
    """The loops `comp` runs directly or through calls, fusions and branches (not those inside other loops)."""
    out = []
    for sub, times, loop, _branch in _edges(mod, comp):
        if loop:
            out.append((sub.name, times))
        elif depth < 16:
            out += _loops(mod, sub, depth + 1)
    return out


# --- the check --------------------------------------------------------------------------------------------------
def simulated(cost: GraphCost) -> GraphCost:
    """Tests: the compiled figures as a GPU gives them (PTXLA_PERF_COMPILED_COST): `negative` (-1 FLOP, -1 byte: a
    matmul that is one cuBLAS call), `missing` (no FLOPs), `low` (a thousandth: the elementwise FLOPs only)."""
    how = os.environ.get(SIMULATE_ENV)
    if not how or cost.flops is None:
        return cost
    if how == "negative":
        return replace(cost, flops=-1.0, bytes_accessed=-1.0)
    if how == "missing":
        return replace(cost, flops=None)
    if how == "low":
        return replace(cost, flops=cost.flops * 1e-3)
    return cost


def origin_of(cost: GraphCost) -> str | None:
    """What an analysis of the graph's own (unoptimized) HLO counted from: XLA's analysis (`hlo`) or the text."""
    return {hlo_cost.XLA: HLO, hlo_cost.TEXT: TEXT}.get(cost.source)


def _why(cost: GraphCost, floor: float, what: str) -> str:
    if cost.flops is None:
        return "the cost analysis gave no FLOPs"
    if cost.flops < 0:
        return f"the cost analysis gave {cost.flops:g} FLOPs (custom calls such as cuBLAS/cuDNN count as -1)"
    return f"the cost analysis gave {cost.flops:.4g} FLOPs, below the {floor:.4g} of {what}"


def checked(cost: GraphCost, text_fn: Callable[[], str | None], partitions: int = 1,
            origin: str | None = COMPILED) -> GraphCost:
    """`cost` (XLA's analysis of the program: `origin` compiled, or `hlo` / `hlo_text` where it counted the HLO
    before optimization) held against that HLO (`text_fn()`; global: divided by `partitions`): kept where it holds,
    else the FLOPs counted from that HLO (module docstring). Never raises; never negative."""
    cost = simulated(cost)
    valid = cost.flops is not None and cost.flops >= 0

    def keep(partial: bool) -> GraphCost:
        return _positive(replace(cost, flops_source=origin if valid else None,
                                 flops_lower_bound=cost.flops_lower_bound or partial))

    try:
        text = text_fn() or ""
        mod = parse(text)
        dots = dot_flops(mod)
    except Exception:  # no HLO to hold it against: what it says, less any negative figure
        return keep(False)
    parts = split_over(text, partitions)
    implied = dots.flops / parts
    if valid and cost.flops >= implied * (1 - SLACK) and not dots.loops:
        return keep(bool(dots.unknown_loops or dots.opaque_calls))
    try:
        props, unknown = loop_cost(mod, hlo_cost.xla_text_cost)
        counted = props["flops"] / parts
    except Exception:  # jaxlib's entry points missing: the dots alone
        props, unknown, counted = None, dots.unknown_loops, None
    if valid and counted is not None and cost.flops >= counted * (1 - SLACK):
        return keep(bool(unknown or dots.opaque_calls))  # the compiler counted the loops' repeats itself
    if valid and counted is None and cost.flops >= implied * (1 - SLACK):
        return keep(True)  # it may count a loop body once: nothing better to offer
    why = (_why(cost, implied, "the program's own dots and convolutions") if counted is None or implied > counted
           else _why(cost, counted, "the program with each loop body times its trip count"))
    split = f", divided over the {parts} devices it is partitioned across" if parts > 1 else ""
    loops = f", {unknown} loop(s) of unknown trip count counted once" if unknown else ""
    if dots.opaque_calls:
        loops += (f", {dots.opaque_calls} custom call(s) whose work XLA cannot count (a kernel of its own) left out")
    if props is not None:
        out = replace(cost, flops=counted, transcendentals=props["transcendentals"] / parts, flops_source=HLO,
                      flops_lower_bound=bool(unknown or dots.opaque_calls),
                      note=_join(cost.note, f"{why}: FLOPs from XLA's cost analysis of the HLO before "
                                            f"optimization, each loop body times its trip count{split}{loops}"))
    else:
        out = replace(cost, flops=implied, flops_source=TEXT, flops_lower_bound=True,
                      note=_join(cost.note, f"{why}: FLOPs of the program's dots and convolutions only (a lower "
                                            f"bound), each loop body times its trip count{split}{loops}"))
    if out.bytes_accessed is not None and out.bytes_accessed >= 0:
        out.bytes_lower_bound = True  # the bytes miss what the FLOPs missed (custom calls, loop repeats)
    else:
        out.bytes_accessed, out.bytes_lower_bound = None, False
        out.note = _join(out.note, "bytes unknown (the cost analysis gave none, or a negative figure)")
    return _positive(out)


_MANUAL = re.compile(r"manual_computation_body|GlobalToLocalShape|SPMDFullToShardShape")


def split_over(text: str, partitions: int | None) -> int:
    """The devices the HLO's global count is divided over: `partitions`, except in a program whose work is in a
    shard_map (or pmap, which JAX builds as one) body - its shapes are already one device's."""
    parts = max(int(partitions or 1), 1)
    return 1 if parts > 1 and _MANUAL.search(text) else parts


def text_cost(text: str, partitions: int = 1) -> GraphCost:
    """hlo_cost.text_cost (dot/convolution FLOPs, inputs + outputs as bytes) with each loop body's dots times its
    trip count, divided over the devices a partitioned program is split across. Raises on unreadable text."""
    cost = hlo_cost.text_cost(text)
    parts = split_over(text, partitions)
    try:
        cost.flops = dot_flops(parse(text)).flops / parts
    except ValueError:  # no computations to walk: the flat count
        cost.flops /= parts
    if parts > 1:
        cost.note += f"; FLOPs divided over the {parts} devices the program is partitioned across"
    return cost


def _positive(cost: GraphCost) -> GraphCost:
    """No negative figure is kept: a negative FLOP or transcendental count is unknown, negative bytes unknown."""
    if cost.flops is not None and cost.flops < 0:
        cost.note = _join(cost.note, f"FLOPs {cost.flops:g} from the cost analysis: unknown")
        cost.flops, cost.flops_source = None, None
    if cost.bytes_accessed is not None and cost.bytes_accessed < 0:
        cost.bytes_accessed, cost.bytes_lower_bound = None, False
    if cost.transcendentals is not None and cost.transcendentals < 0:
        cost.transcendentals = None
    return cost


def _join(a: str | None, b: str) -> str:
    return f"{a}; {b}" if a else b
