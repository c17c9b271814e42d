"""Why a graph compiled again: diff the HLO text of two graphs built at the same step site.

Pure text logic, so it works on any HLO torch_xla prints (`_get_xla_tensors_hlo` with IR debug on carries
`source_file`/`source_line` metadata per instruction)."""
from __future__ import annotations

import difflib
from collections import Counter
import re
from dataclasses import dataclass, field
from typing import Callable

_INSTR = re.compile(r"^\s*(?:ROOT\s+)?%?(?P<name>[\w.\-]+)\s*=\s*(?P<shape>[^=\s][^=]*?)\s+(?P<op>[\w\-]+)\((?P<rest>.*)$")
_META = re.compile(r",?\s*metadata=\{(?P<meta>[^}]*)\}")
_FILE = re.compile(r'source_file="(?P<f>[^"]*)"')
_LINE = re.compile(r"source_line=(?P<l>\d+)")
_OPTYPE = re.compile(r'op_type="(?P<t>[^"]*)"')
_NAMEREF = re.compile(r"%[\w.\-]+")
_SHAPE_IN_OPERANDS = re.compile(r"\b[a-z]+\d*\[[\d,]*\](\{[\d,]*\})?\s*")


@dataclass
class Instr:
    op: str
    shape: str
    attrs: str  # operands stripped of names, plus attributes; metadata removed
    source_file: str | None
    source_line: int | None
    op_type: str | None
    text: str
    value: str | None = None  # a constant's literal ("0", "2531011", "{1, 2}")
    attributes: tuple[tuple[str, str], ...] = ()  # (name, value) after the operands, metadata left out
    operand_shapes: tuple[str, ...] = ()  # the operands' shapes, layouts left out

    @property
    def full(self) -> str:
        return f"{self.op} {self.shape} {self.attrs}"


@dataclass
class GraphDiff:
    same: bool
    input_shapes: list[tuple[str, str]] = field(default_factory=list)  # (old, new) parameter shapes
    changed: list[tuple[Instr, Instr]] = field(default_factory=list)  # aligned instructions that differ
    added: list[Instr] = field(default_factory=list)
    removed: list[Instr] = field(default_factory=list)
    size: tuple[int, int] = (0, 0)
    input_count: tuple[int, int] = (0, 0)  # number of graph parameters, old and new
    new_params: list[Instr] = field(default_factory=list)  # the new graph's parameters, in order
    inputs_gone: list[str] = field(default_factory=list)  # input shapes only the old graph has (a multiset)
    inputs_came: list[str] = field(default_factory=list)  # input shapes only the new graph has

    @property
    def cause(self) -> str:
        if self.same:
            return "identical"
        rebuilt = len(self.added) + len(self.removed)
        scalar_trade = all(x.endswith("[]") for x in self.inputs_came + self.inputs_gone)
        if scalar_trade and self.shape_roots() and rebuilt <= 0.25 * max(self.size):
            # the same ops on inputs of the same shapes, yet shapes inside changed: a size made in Python (a resize's
            # output size) is part of the graph - even where a scalar input came or went with it (a new tensor
            # input is a new argument structure: DDP's bucket views, optimizer state)
            return "internal_shapes"
        if self.input_count[0] != self.input_count[1]:
            return "argument_structure"  # a new input (optimizer state appearing), not a new shape
        if self.input_shapes and rebuilt <= 0.25 * max(self.size):
            return "input_shapes"  # the same ops on inputs of other shapes
        if rebuilt:
            return "graph_structure"  # other ops (e.g. a first graph that also ran initialisation: randn's seed)
        if self.input_shapes:
            return "input_shapes"
        if all(a.op == b.op and a.shape == b.shape for a, b in self.changed):
            return "constant"  # same ops, same shapes, other literals: a Python value baked into the graph
        return "attributes"

    @property
    def distance(self) -> int:
        """How far apart the two graphs are (0 = identical): to pick the closest earlier graph."""
        return len(self.input_shapes) + len(self.changed) + len(self.added) + len(self.removed)

    @property
    def reshaped_inputs(self) -> list[tuple[str, str]]:
        """(old, new) shapes of inputs that changed shape; `input_shapes` without its "N inputs -> M inputs"."""
        return [p for p in self.input_shapes if not p[0].endswith(" inputs")]

    def shape_roots(self) -> list[Instr]:
        """Where shapes inside the graph start to differ (new side, graph order): changed instructions whose
        result shape changed while their operands kept their shapes (a resize, an iota or broadcast to a new size,
        a reshape to a computed size) - not the ops downstream that only follow them."""
        roots = [b for a, b in self.changed if a.op != "parameter" and a.shape != b.shape
                 and a.operand_shapes == b.operand_shapes]
        # a broadcast of a scalar or bias is sized to fit where it is used (an add, a mean's gradient): it follows
        # the change; an iota, a slice, a reshape or a gather sized from Python starts it
        return [i for i in roots if i.op != "broadcast"] or roots

    def changed_inputs(self) -> list[Instr]:
        """The new graph's parameters whose shapes the old graph did not have (in parameter order): the inputs that
        changed shape. With IR debug on, each one's metadata names the line that put its data on the device."""
        came = Counter(b for _, b in self.input_shapes)
        out = []
        for i in self.new_params:
            if came[i.shape] > 0:
                came[i.shape] -= 1
                out.append(i)
        return out

    def first_changed_sources(self) -> list[Instr]:
        """Instructions that introduce the difference, in graph order (new side)."""
        out = [b for a, b in self.changed if b.op != "parameter"]
        out += [i for i in self.added if i.op != "parameter"]
        return out

    def summary_lines(self, limit: int = 4, place: Callable[[Instr], str | None] | None = None) -> list[str]:
        """The differences as a person reads them: `input shape f32[2,16] -> f32[3,16]`, `slice f32[1,4]:
        slice={[1:2], [0:4]} -> {[2:3], [0:4]}`, `constant f32[]: 0 -> 0.5`. `place(instr)`: where the new side's
        op was built, to add as "at ..." (None: say nothing)."""
        lines = [f"input shape {a} -> {b}" for a, b in self.input_shapes[:limit]]
        roots = {id(i) for i in self.shape_roots()} if not self.input_shapes else set()
        pairs = [(a, b) for a, b in self.changed if a.op != "parameter"]
        pairs.sort(key=lambda ab: id(ab[1]) not in roots)  # where shapes start to change first (a stable sort)
        for a, b in pairs[:limit]:
            at = place(b) if place else None
            lines.append(describe(a, b) + (f" (at {at})" if at else ""))
        if self.added or self.removed:
            lines.append(f"graph size {self.size[0]} -> {self.size[1]} instructions "
                         f"(+{len(self.added)} / -{len(self.removed)})")
        return lines[: limit * 2]


def _clip(text: str, most: int = 60) -> str:
    return text if len(text) <= most else text[:most - 3] + "..."


def describe(a: Instr, b: Instr) -> str:
    """One changed instruction, old -> new: the op, its shape, and only what changed (the shape, a constant's
    value, an attribute), never the raw HLO text."""
    if a.op == "constant" and (a.value is not None or b.value is not None):
        if a.shape != b.shape:
            return f"constant {a.shape} {_clip(a.value or '?')} -> {b.shape} {_clip(b.value or '?')}"
        if a.value != b.value:
            return f"constant {a.shape}: {_clip(a.value or '?')} -> {_clip(b.value or '?')}"
    parts = [f"{a.shape} -> {b.shape}"] if a.shape != b.shape else []
    old, new = dict(a.attributes), dict(b.attributes)
    for k in list(old) + [k for k in new if k not in old]:
        if old.get(k) != new.get(k):
            parts.append(f"{k}={_clip(old.get(k, '(none)'))} -> {_clip(new.get(k, '(none)'))}")
    if not parts:
        parts.append("other operands")
    head = b.op if a.shape != b.shape else f"{b.op} {b.shape}:"
    return f"{head} {'; '.join(parts)}"


def _close(text: str, start: int = 0) -> int:
    """Index just past the bracket that closes the one open before `start` (parentheses, braces, brackets;
    quoted strings skipped); len(text) if it never closes."""
    depth, quote, k = 1, False, start
    while k < len(text):
        c = text[k]
        if quote:
            if c == "\\":
                k += 1  # an escaped character inside the string
            quote = c != '"'
        elif c == '"':
            quote = True
        elif c in "({[":
            depth += 1
        elif c in ")}]":
            depth -= 1
            if depth == 0:
                return k + 1
        k += 1
    return len(text)


def _attributes(text: str) -> tuple[tuple[str, str], ...]:
    """`, dimensions={1,0}, to_apply=%add.6, metadata={...}` -> (("dimensions", "{1,0}"), ("to_apply", "%add"))."""
    out, k = [], 0
    while k < len(text):
        m = re.compile(r"\s*,?\s*(?P<k>[\w.\-]+)=").match(text, k)
        if not m:
            break
        v0 = m.end()
        j = v0
        while j < len(text) and text[j] != ",":
            j = _close(text, j + 1) if text[j] in "({[" else (
                text.index('"', j + 1) + 1 if text[j] == '"' and '"' in text[j + 1:] else j + 1)
        if m.group("k") != "metadata":
            out.append((m.group("k"), re.sub(r"(%[\w\-]+?)(\.\d+)+\b", r"\1", text[v0:j].strip())))
        k = j
    return tuple(out)


def parse_hlo(text: str) -> list[Instr]:
    out = []
    for line in text.splitlines():
        m = _INSTR.match(line)
        if not m:
            continue
        rest = m.group("rest")
        end = _close(rest)  # rest = "operands), attributes": the operands end at the bracket that closes them
        value = rest[:end - 1].strip() if m.group("op") == "constant" else None
        operand_shapes = () if value is not None else tuple(
            re.sub(r"\{[\d,]*\}", "", x.group(0)).strip() for x in _SHAPE_IN_OPERANDS.finditer(rest[:end - 1]))
        attributes = _attributes(rest[end:])
        meta = _META.search(rest)
        source_file = source_line = op_type = None
        if meta:
            body = meta.group("meta")
            f, ln, t = _FILE.search(body), _LINE.search(body), _OPTYPE.search(body)
            source_file = f.group("f") if f else None
            source_line = int(ln.group("l")) if ln else None
            op_type = t.group("t") if t else None
            rest = rest[: meta.start()] + rest[meta.end():]
        attrs = _NAMEREF.sub("%", rest)
        attrs = _SHAPE_IN_OPERANDS.sub("", attrs)
        shape = re.sub(r"\{[\d,]*\}", "", m.group("shape"))  # layouts are noise
        out.append(Instr(m.group("op"), shape, attrs.strip(), source_file, source_line, op_type, line.strip(), value,
                         attributes, operand_shapes))
    return out


def diff_hlo(old_text: str, new_text: str) -> GraphDiff:
    old, new = parse_hlo(old_text), parse_hlo(new_text)
    old_params = [i.shape for i in old if i.op == "parameter"]
    new_params = [i.shape for i in new if i.op == "parameter"]
    result = GraphDiff(same=False, size=(len(old), len(new)), input_count=(len(old_params), len(new_params)),
                       new_params=[i for i in new if i.op == "parameter"])
    gone = sorted((Counter(old_params) - Counter(new_params)).elements())
    came = sorted((Counter(new_params) - Counter(old_params)).elements())
    result.inputs_gone, result.inputs_came = gone, came
    result.input_shapes = list(zip(gone, came))
    if len(gone) != len(came):
        result.input_shapes.append((f"{len(old_params)} inputs", f"{len(new_params)} inputs"))
    matcher = difflib.SequenceMatcher(a=[i.op for i in old], b=[i.op for i in new], autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            for a, b in zip(old[i1:i2], new[j1:j2]):
                if a.full != b.full:
                    result.changed.append((a, b))
        else:
            result.removed.extend(old[i1:i2])
            result.added.extend(new[j1:j2])
    result.same = not (result.changed or result.added or result.removed or result.input_shapes)
    return result


SPECIAL_SCALARS = {"0", "1", "0.0", "1.0", "-0", "-1"}


def special_scalar_change(d: GraphDiff) -> bool:
    """torch_xla bakes the Python scalars 0 and 1 into the graph as constants (XLA_NO_SPECIAL_SCALARS=1 turns
    that off), so a scalar that passes through 0 or 1 (a warm-up learning rate, say) compiles one extra graph."""
    consts = [(a, b) for a, b in d.changed if a.op == "constant" or b.op == "constant"]
    if consts and all(_const_value(a) in SPECIAL_SCALARS or _const_value(b) in SPECIAL_SCALARS
                      for a, b in consts) and not d.added and not d.removed:
        return True
    # baked-in 0/1 constants became scalar inputs (the value left {0, 1}), or the reverse: the only inputs that came
    # (went) are scalars, no more of them than 0/1 constants went (came). Optimizer state appearing also brings 0/1
    # constants, but its new inputs are tensors; a new input shape is no special scalar either. Other ops may
    # change with it (MMF's AdamW at lr=0 lowers to a graph with other inputs and other ops).
    gone = [i for i in d.removed if i.op == "constant" and _const_value(i) in SPECIAL_SCALARS]
    came = [i for i in d.added if i.op == "constant" and _const_value(i) in SPECIAL_SCALARS]
    scalars = lambda shapes: bool(shapes) and all(x.endswith("[]") for x in shapes)  # noqa: E731
    if scalars(d.inputs_came) and not d.inputs_gone:
        return 0 < len(d.inputs_came) <= len(gone)
    if scalars(d.inputs_gone) and not d.inputs_came:
        return 0 < len(d.inputs_gone) <= len(came)
    return False


def _const_value(i: Instr) -> str:
    m = re.search(r"constant\(([^)]*)\)", i.text)
    return m.group(1).strip() if m else ""
