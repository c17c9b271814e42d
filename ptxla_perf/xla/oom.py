"""Out-of-memory messages of XLA, read: a run that dies with `RESOURCE_EXHAUSTED` / "Ran out of memory" keeps its
report (status `crashed`) with an `oom` finding that says what XLA said - memory used against capacity, by what
kind of allocation, and the largest allocations with their size, shape, HLO op and, where the op's metadata
carries it, the user's line.

Two formats are read (the text XLA prints when it cannot fit a program or an allocation):
- TPU: "Ran out of memory in memory space hbm. Used 20.58G of 15.48G hbm. Exceeded hbm capacity by 5.10G.",
  the usage by kind ("Total hbm usage >= ...": reserved / program / arguments) and "Largest program allocations in
  hbm:", numbered entries with `Size:`, `Operator:` (op_type, op_name, source_file, source_line), `Shape:`,
  `XLA label:`, `Allocation type:`.
- GPU / CPU: "Out of memory while trying to allocate N bytes." followed by "BufferAssignment stats:" (parameter /
  constant / maybe_live_out / preallocated temp / total allocation) and "Peak buffers:", entries `Buffer N:` with
  `Size:`, `Operator:`, `XLA Label:`, `Shape:`.
Sizes are read as XLA prints them (`4.00G`, `4.00GiB`, `512.0M`, `300B`, a plain byte count).
"""
from __future__ import annotations

import os
import re
from dataclasses import asdict, dataclass, field
from typing import Any

_UNITS = {"": 1, "B": 1, "K": 2**10, "KB": 2**10, "KIB": 2**10, "M": 2**20, "MB": 2**20, "MIB": 2**20,
          "G": 2**30, "GB": 2**30, "GIB": 2**30, "T": 2**40, "TB": 2**40, "TIB": 2**40}
_SIZE = r"(\d+(?:\.\d+)?)\s*([KMGT]?i?B?)"
_MARKERS = ("RESOURCE_EXHAUSTED", "Ran out of memory", "Out of memory while trying to allocate")


def size_bytes(text: str) -> int | None:
    """"4.00G" / "4.00GiB" / "512.0M" / "300B" / "17179869184" -> bytes (binary units, as XLA prints them)."""
    m = re.fullmatch(r"\s*" + _SIZE + r"\s*", text, re.I)
    if not m:
        return None
    unit = m.group(2).upper()
    return int(float(m.group(1)) * _UNITS.get(unit, 1)) if unit in _UNITS else None


@dataclass
class Allocation:
    size_bytes: int | None
    shape: str | None = None
    op_type: str | None = None
    op_name: str | None = None
    source_file: str | None = None
    source_line: int | None = None
    label: str | None = None
    allocation_type: str | None = None


@dataclass
class OomReport:
    memory_space: str | None = None  # "hbm", where XLA says
    used_bytes: int | None = None
    capacity_bytes: int | None = None
    exceeded_bytes: int | None = None
    requested_bytes: int | None = None  # GPU: the allocation that failed
    usage: dict[str, int] = field(default_factory=dict)  # by kind: program, arguments, HLO temp, parameter, ...
    largest: list[Allocation] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def is_oom(text: str | None) -> bool:
    return bool(text) and any(m in text for m in _MARKERS)


def parse(text: str) -> OomReport | None:
    """What an XLA out-of-memory message says; None when the text is not one."""
    if not is_oom(text):
        return None
    out = OomReport()
    m = re.search(r"Ran out of memory in memory space (\w+)", text)
    if m:
        out.memory_space = m.group(1)
    m = re.search(r"Used " + _SIZE + r" of " + _SIZE, text, re.I)
    if m:
        out.used_bytes = size_bytes(m.group(1) + m.group(2))
        out.capacity_bytes = size_bytes(m.group(3) + m.group(4))
    m = re.search(r"Exceeded \w+ capacity by " + _SIZE, text, re.I)
    if m:
        out.exceeded_bytes = size_bytes(m.group(1) + m.group(2))
    m = re.search(r"trying to allocate " + _SIZE, text, re.I)
    if m:
        out.requested_bytes = size_bytes(m.group(1) + m.group(2))
    # usage by kind: indented "name   size" lines (TPU) or "name allocation: size" (BufferAssignment stats)
    for line in text.splitlines():
        u = re.fullmatch(r"\s+([A-Za-z][A-Za-z _-]*?)(?: allocation)?:?\s+" + _SIZE + r"(?:\s.*)?", line)
        if u and not re.match(r"\s*(Size|Unpadded size)\b", line):
            b = size_bytes(u.group(2) + u.group(3))
            if b is not None:
                out.usage.setdefault(u.group(1).strip(), b)
    if out.used_bytes is None and "total" in out.usage:
        out.used_bytes = out.usage["total"]
    out.largest = _allocations(text)
    return out


def _allocations(text: str) -> list[Allocation]:
    """The numbered entries of "Largest program allocations" (TPU) or "Peak buffers" (GPU/CPU)."""
    start = re.search(r"(Largest program allocations[^\n]*|Peak buffers:)", text)
    if not start:
        return []
    entries = re.split(r"\n\s*(?:\d+\.\s+|Buffer \d+:\s*)(?=\S|\n)", "\n" + text[start.end():])[1:]
    out = []
    for e in entries:
        a = Allocation(None)
        m = re.search(r"Size:\s*(\S+)", e)
        if m:
            a.size_bytes = size_bytes(m.group(1))
        m = re.search(r"(?:Shape|Subshape):\s*(\S+)", e)
        if m:
            a.shape = re.sub(r"\{.*$", "", m.group(1))
        for key in ("op_type", "op_name", "source_file"):
            m = re.search(key + r'="([^"]*)"', e)
            if m:
                setattr(a, key, m.group(1))
        m = re.search(r"source_line=(\d+)", e)
        if m:
            a.source_line = int(m.group(1))
        m = re.search(r"XLA [Ll]abel:\s*(.+)", e)
        if m:
            a.label = m.group(1).strip()[:160]
        m = re.search(r"Allocation type:\s*(.+)", e)
        if m:
            a.allocation_type = m.group(1).strip()
        if a.size_bytes is not None or a.shape:
            out.append(a)
    return out[:10]


def _gib(n: int | None) -> str:
    return "?" if n is None else (f"{n / 2**30:.2f} GiB" if n >= 2**28 else f"{n / 2**20:.1f} MiB")


def message(r: OomReport, boundaries: int) -> str:
    """The finding's words: what ran out, by how much, the largest allocations, and where in the run."""
    where = f" in memory space {r.memory_space}" if r.memory_space else ""
    parts = [f"The run died out of device memory{where}"]
    if r.used_bytes is not None and r.capacity_bytes is not None:
        parts.append(f": {_gib(r.used_bytes)} needed of {_gib(r.capacity_bytes)}")
    elif r.requested_bytes is not None:
        parts.append(f": an allocation of {_gib(r.requested_bytes)} failed")
    text = "".join(parts) + (f", after {boundaries} step boundaries" if boundaries else " before the first step")
    if r.largest:
        top = r.largest[0]
        line = (f" at {os.path.basename(top.source_file)}:{top.source_line}"
                if top.source_file and top.source_line else "")
        text += (f". Largest allocation: {_gib(top.size_bytes)} {top.shape or ''} "
                 f"({top.op_type or top.op_name or top.label or 'an XLA buffer'}{line})").rstrip()
    kinds = {k: v for k, v in r.usage.items() if v and "total" not in k.lower() and "fragmentation" not in k}
    if kinds:
        text += ". By kind: " + ", ".join(f"{k} {_gib(v)}" for k, v in list(kinds.items())[:5])
    return text + (". Reduce the batch size or the model's activations (rematerialisation, a smaller sequence), "
                   "keep fewer tensors alive across steps, and donate buffers the step replaces.")
