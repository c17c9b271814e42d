"""Why a graph compiled again: diff the HLO text of two graphs built at the same step site.

Pure text logic, so it works on any HLO torch_xla prints (`_get_xla_tensors_hlo` with IR debug on carries
`source_file`/`source_line` metadata per instruction)."""
from __future__ import annotations

import difflib
from collections import Counter
import re
from dataclasses import dataclass, field

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

    @property
    def cause(self) -> str:
        if self.same:
            return "identical"
        if self.input_count[0] != self.input_count[1]:
            return "argument_structure"  # a new input (optimizer state appearing), not a new shape
        rebuilt = len(self.added) + len(self.removed)
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

    def first_changed_sources(self) -> list[Instr]:
        """Instructions that introduce the difference, in graph order (new side)."""
        out = [b for a, b in self.changed if b.op != "parameter"]
        out += [i for i in self.added if i.op != "parameter"]
        return out

    def summary_lines(self, limit: int = 4) -> list[str]:
        lines = [f"input shape {a} -> {b}" for a, b in self.input_shapes[:limit]]
        for a, b in self.changed[:limit]:
            if a.op == "parameter":
                continue
            lines.append(f"{a.op}: {_short(a)} -> {_short(b)}")
        if self.added or self.removed:
            lines.append(f"graph size {self.size[0]} -> {self.size[1]} instructions "
                         f"(+{len(self.added)} / -{len(self.removed)})")
        return lines[: limit * 2]


def _short(i: Instr) -> str:
    text = f"{i.shape} {i.attrs}".strip()
    return text if len(text) <= 100 else text[:97] + "..."


def parse_hlo(text: str) -> list[Instr]:
    out = []
    for line in text.splitlines():
        m = _INSTR.match(line)
        if not m:
            continue
        rest = m.group("rest")
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
        out.append(Instr(m.group("op"), shape, attrs.strip(), source_file, source_line, op_type, line.strip()))
    return out


def diff_hlo(old_text: str, new_text: str) -> GraphDiff:
    old, new = parse_hlo(old_text), parse_hlo(new_text)
    old_params = [i.shape for i in old if i.op == "parameter"]
    new_params = [i.shape for i in new if i.op == "parameter"]
    result = GraphDiff(same=False, size=(len(old), len(new)), input_count=(len(old_params), len(new_params)))
    gone = sorted((Counter(old_params) - Counter(new_params)).elements())
    came = sorted((Counter(new_params) - Counter(old_params)).elements())
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
                      for a, b in consts):
        return not d.added and not d.removed
    # a baked-in 0/1 constant became a scalar parameter (the value left {0, 1}), or the reverse
    gone = [i for i in d.removed if i.op == "constant" and _const_value(i) in SPECIAL_SCALARS]
    came = [i for i in d.added if i.op == "constant" and _const_value(i) in SPECIAL_SCALARS]
    params = [i for i in d.added + d.removed if i.op == "parameter" and i.shape.endswith("[]")]
    return bool((gone or came) and params)


def _const_value(i: Instr) -> str:
    m = re.search(r"constant\(([^)]*)\)", i.text)
    return m.group(1).strip() if m else ""
