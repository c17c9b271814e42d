"""The largest buffers of a compiled program at its peak, from XLA's own buffer assignment.

XLA's `CompiledMemoryStats` (JAX: `compiled.memory_analysis()`; a jaxlib loaded executable:
`get_compiled_memory_stats()`) carries `serialized_buffer_assignment_proto`: the serialized `BufferAssignmentProto`
(xla/service/hlo.proto) of the program - its logical buffers (id, size, the instruction that defines each), its
allocations (size, parameter / output / constant / temporary, the logical buffers assigned into each) and the heap
simulator's trace of each temporary allocation (ALLOC / FREE / SHARE_WITH events in program order). The optimized
module (`HloModuleProto`, from the executable's `hlo_modules()`) names each instruction's opcode, shape and
metadata: its `source_file`/`source_line`, or (JAX) a `stack_frame_id` into the module's stack-frame index.

No protobuf dependency: a small reader of the protobuf wire format (varints and length-delimited fields) and the
field numbers of the few messages read here.

"At the peak": a program holds its argument allocations, its output allocations and its temporaries at once (the
figure memory.py calls its peak). A parameter, output or constant allocation is one row (held the whole program).
Inside a temporary allocation, the logical buffers live at the moment it holds the most bytes: by the heap
simulator's trace where XLA kept one, else by the module's schedule (schedule_peak: XLA's CPU compiler keeps no
trace), else its largest logical buffers in distinct bytes of it (`at_peak` None on the row). The rows never add up
to more than the program holds. Pure logic; `largest()` never raises.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator
from ..model import fmt

MAX_ROWS = 5
MAX_BYTES = 32 << 20  # a buffer assignment above this is not read (pure-Python decoding)
MAX_MODULE_BYTES = 16 << 20  # nor an optimized module above this (~0.1-0.3 s per MB here): rows without ops

# --- the protobuf wire format ------------------------------------------------------------------------------------
_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5


def _varint(buf: bytes | memoryview, i: int) -> tuple[int, int]:
    if i < len(buf) and buf[i] < 0x80:  # one byte: most keys and small values
        return buf[i], i + 1
    shift = result = 0
    while True:
        if i >= len(buf):
            raise ValueError("truncated varint")
        b = buf[i]
        i += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, i
        shift += 7
        if shift > 70:
            raise ValueError("varint too long")


def fields(buf: bytes | memoryview) -> Iterator[tuple[int, int, Any]]:
    """(field number, wire type, value) of each field of a message: an int for varints and fixed-width fields (raw),
    a memoryview for length-delimited ones (a nested message, a string, or a packed repeated field: no copy)."""
    buf = memoryview(buf)
    i, n = 0, len(buf)
    while i < n:
        key, i = _varint(buf, i)
        num, wire = key >> 3, key & 7
        if wire == _VARINT:
            value, i = _varint(buf, i)
        elif wire == _I64:
            value, i = int.from_bytes(buf[i:i + 8], "little"), i + 8
        elif wire == _I32:
            value, i = int.from_bytes(buf[i:i + 4], "little"), i + 4
        elif wire == _LEN:
            size, i = _varint(buf, i)
            if i + size > n:
                raise ValueError("truncated field")
            value, i = buf[i:i + size], i + size
        else:
            raise ValueError(f"unsupported wire type {wire}")
        yield num, wire, value


def _signed(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


def _ints(wire: int, value: Any) -> list[int]:
    """A repeated int64 field's values: packed (length-delimited) or one varint."""
    if wire == _VARINT:
        return [_signed(value)]
    out, i = [], 0
    while i < len(value):
        v, i = _varint(value, i)
        out.append(_signed(v))
    return out


def _decode(buf: bytes, spec: dict[int, tuple]) -> dict[str, Any]:
    """A message as a dict by `spec`: field number -> (name, kind[, nested spec]); kinds: int, bool, str, msg,
    ints (repeated int64), msgs / strs (repeated). Unknown fields are skipped."""
    out: dict[str, Any] = {}
    for num, wire, value in fields(buf):
        f = spec.get(num)
        if f is None:
            continue
        name, kind = f[0], f[1]
        if kind == "int":
            out[name] = _signed(value) if wire == _VARINT else value
        elif kind == "bool":
            out[name] = bool(value)
        elif kind == "str":
            out[name] = bytes(value).decode("utf-8", "replace")
        elif kind == "strs":
            out.setdefault(name, []).append(bytes(value).decode("utf-8", "replace"))
        elif kind == "ints":
            out.setdefault(name, []).extend(_ints(wire, value))
        elif kind == "msg":
            out[name] = _decode(value, f[2])
        elif kind == "msgs":
            out.setdefault(name, []).append(_decode(value, f[2]))
        elif kind == "raw":
            out.setdefault(name, []).append(value)
    return out


# field numbers of xla/service/hlo.proto and xla/xla_data.proto (only what is read here)
_LOCATION = {2: ("instruction_name", "str"), 3: ("shape_index", "ints"), 4: ("instruction_id", "int")}
_LOGICAL_BUFFER = {1: ("id", "int"), 2: ("size", "int"), 3: ("defined_at", "msg", _LOCATION), 4: ("color", "int")}
_ASSIGNED = {1: ("logical_buffer_id", "int"), 2: ("offset", "int"), 3: ("size", "int")}
_ALLOCATION = {1: ("index", "int"), 2: ("size", "int"), 3: ("is_thread_local", "bool"), 5: ("is_parameter", "bool"),
               6: ("parameter_number", "int"), 7: ("maybe_live_out", "bool"), 8: ("color", "int"),
               9: ("assigned", "msgs", _ASSIGNED), 11: ("is_tuple", "bool"), 12: ("is_constant", "bool")}
_EVENT = {1: ("kind", "int"), 2: ("buffer_id", "int"), 3: ("computation_name", "str"),
          4: ("instruction_name", "str"), 5: ("share_with_canonical_id", "int")}
_TRACE = {1: ("events", "msgs", _EVENT), 2: ("whole_module_simulation", "bool"),
          3: ("buffer_allocation_index", "int")}
BUFFER_ASSIGNMENT = {1: ("logical_buffers", "msgs", _LOGICAL_BUFFER), 3: ("buffer_allocations", "msgs", _ALLOCATION),
                     4: ("heap_simulator_traces", "msgs", _TRACE)}
ALLOC, FREE, SHARE_WITH = 0, 1, 2

_SHAPE: dict[int, tuple] = {2: ("element_type", "int"), 3: ("dimensions", "ints")}
_SHAPE[4] = ("tuple_shapes", "msgs", _SHAPE)
_METADATA = {1: ("op_type", "str"), 2: ("op_name", "str"), 3: ("source_file", "str"), 4: ("source_line", "int"),
             15: ("stack_frame_id", "int")}
_INSTRUCTION = {1: ("name", "str"), 2: ("opcode", "str"), 3: ("shape", "msg", _SHAPE),
                7: ("metadata", "msg", _METADATA),
                9: ("parameter_number", "int"), 35: ("id", "int")}
_COMPUTATION = {1: ("name", "str"), 2: ("instructions", "msgs", _INSTRUCTION), 5: ("id", "int")}
_FILE_LOCATION = {1: ("file_name_id", "int"), 2: ("function_name_id", "int"), 3: ("line", "int")}
_FRAME = {1: ("file_location_id", "int"), 2: ("parent_frame_id", "int")}
_FRAMES = {1: ("file_names", "strs"), 2: ("function_names", "strs"), 3: ("file_locations", "msgs", _FILE_LOCATION),
           4: ("stack_frames", "msgs", _FRAME)}
_SCHEDULE = {1: ("sequences", "msgs", {1: ("computation_id", "int"), 2: ("sequence", "msg", {1: ("ids", "ints")})})}
HLO_MODULE = {1: ("name", "str"), 3: ("computations", "msgs", _COMPUTATION), 6: ("entry_computation_id", "int"),
              7: ("schedule", "msg", _SCHEDULE), 17: ("stack_frame_index", "msg", _FRAMES)}

# xla_data.proto's PrimitiveType -> the dtype name HLO text prints
DTYPES = {1: "pred", 2: "s8", 3: "s16", 4: "s32", 5: "s64", 6: "u8", 7: "u16", 8: "u32", 9: "u64", 10: "f16",
          11: "f32", 12: "f64", 13: "tuple", 14: "opaque", 15: "c64", 16: "bf16", 17: "token", 18: "c128",
          19: "f8e5m2", 20: "f8e4m3fn", 21: "s4", 22: "u4", 23: "f8e4m3b11fnuz", 24: "f8e5m2fnuz",
          25: "f8e4m3fnuz", 26: "s2", 27: "u2", 28: "f8e4m3", 29: "f8e3m4", 30: "s1", 31: "u1", 32: "f4e2m1fn",
          33: "f8e8m0fnu"}


def decode_buffer_assignment(data: bytes) -> dict[str, Any]:
    return _decode(data, BUFFER_ASSIGNMENT)


def decode_hlo_module(data: bytes) -> dict[str, Any]:
    return _decode(data, HLO_MODULE)


# --- the module's instructions ---------------------------------------------------------------------------------
@dataclass
class Instruction:
    name: str
    opcode: str
    shape: dict[str, Any]
    metadata: dict[str, Any]
    computation: str
    parameter_number: int | None = None


@dataclass
class Module:
    """An executable's optimized modules, read once: each instruction's raw bytes (decoded whole on demand), its
    opcode, operands and called computations (the dataflow), and the schedule."""

    frames: dict[str, Any] = field(default_factory=dict)
    entry: int | None = None  # the entry computation's id
    entry_name: str | None = None
    raw: dict[int, tuple[bytes, str]] = field(default_factory=dict)  # instruction id -> (its bytes, computation)
    names: dict[str, int] = field(default_factory=dict)
    ops: dict[int, tuple[str, list[int], list[int], int]] = field(default_factory=dict)  # id -> opcode, operands,
    #                                                                       called computations, computation id
    roots: dict[int, int] = field(default_factory=dict)  # computation id -> its root instruction
    seqs: dict[int, list[int]] = field(default_factory=dict)  # computation id -> its instructions in schedule order
    _decoded: dict[int, Instruction] = field(default_factory=dict)

    def find(self, instruction_id: int | None, name: str | None) -> Instruction | None:
        iid = instruction_id if instruction_id in self.raw else self.names.get(name or "")
        if iid is None:
            return None
        if iid not in self._decoded:
            data, comp = self.raw[iid]
            i = _decode(data, _INSTRUCTION)
            self._decoded[iid] = Instruction(i.get("name", ""), i.get("opcode", ""), i.get("shape") or {},
                                             i.get("metadata") or {}, comp,
                                             i.get("parameter_number", 0) if i.get("opcode") == "parameter" else None)
        return self._decoded[iid]

    @property
    def order(self) -> dict[int, int]:
        return {i: k for k, i in enumerate(self.seqs.get(self.entry, []))} if self.entry is not None else {}


_LIGHT = {1: ("name", "str"), 2: ("opcode", "str"), 35: ("id", "int"), 36: ("operands", "ints"), 38: ("calls", "ints")}
_COMP_RAW = {1: ("name", "str"), 2: ("instructions", "raw"), 5: ("id", "int"), 6: ("root_id", "int"),
             7: ("is_fusion", "bool")}


def module_index(modules: list[bytes]) -> Module:
    """Serialized HloModuleProtos (an executable's modules; the first gives the entry and schedule) read into a
    Module: each instruction's opcode and dataflow decoded, the rest of it on demand (`find`)."""
    out = Module()
    for data in modules:
        m = _decode(data, {**HLO_MODULE, 3: ("computations", "msgs", _COMP_RAW)})
        out.frames = out.frames or m.get("stack_frame_index") or {}
        first = out.entry is None
        if first:
            out.entry = m.get("entry_computation_id")
            for seq in (m.get("schedule") or {}).get("sequences", []):
                out.seqs[seq.get("computation_id", 0)] = (seq.get("sequence") or {}).get("ids", [])
        for comp in m.get("computations", []):
            cid = comp.get("id", 0)
            if first and cid == out.entry:
                out.entry_name = comp.get("name")
            if first and "root_id" in comp:
                out.roots[cid] = comp["root_id"]
            for raw in comp.get("instructions", []):
                i = _decode(raw, _LIGHT)
                iid = i.get("id")
                if iid is None or iid in out.raw:
                    continue
                out.raw[iid] = (raw, comp.get("name", ""))
                out.names.setdefault(i.get("name", ""), iid)
                if first and not comp.get("is_fusion"):
                    out.ops[iid] = (i.get("opcode", ""), i.get("operands", []), i.get("calls", []), cid)
    return out


# ops whose result is (part of) an operand's buffer, not a buffer of their own: a use of them is a use of it
FORWARDING = {"get-tuple-element", "bitcast", "tuple", "opt-barrier"}


def schedule_peak(assigned: list[dict[str, Any]], defined: dict[int, int], mod: Module
                  ) -> tuple[int, set[int]] | None:
    """The logical buffers of a temporary allocation live at the moment it holds the most bytes, by the module's
    schedule (for an allocation XLA kept no heap trace of): (bytes, their ids), like heap_peak. `assigned`: the
    allocation's slices ({logical_buffer_id, offset, size}); `defined`: buffer id -> the instruction that defines
    it. A buffer lives from its instruction (an instruction that calls computations - a while, a call - from the
    first of theirs) to its last use, through the ops that forward it (get-tuple-element, bitcast, tuple) and out
    of a called computation's root to its caller. Buffers live at once must occupy distinct bytes - or the same bytes exactly
    (one value in place of another, the same HloBuffer): anything else means this reading of the liveness is not
    XLA's, and the answer is None (as it is when a buffer's instruction is not in the schedule)."""
    if mod.entry is None or mod.entry not in mod.seqs:
        return None
    pos: dict[int, int] = {}
    first: dict[int, int] = {}
    callers: dict[int, int] = {}
    walked: set[int] = set()
    t = 0

    def walk(cid: int, depth: int) -> None:
        nonlocal t
        if cid in walked or depth > 64:  # called twice (a shared reducer): its positions stay the first call's
            return
        walked.add(cid)
        for iid in mod.seqs.get(cid, []):
            begin = t
            for c in (mod.ops.get(iid) or ("", [], [], 0))[2]:
                if c in mod.seqs:
                    callers.setdefault(c, iid)
                    walk(c, depth + 1)
            first[iid], pos[iid] = begin, t
            t += 1

    walk(mod.entry, 0)
    users: dict[int, list[int]] = {}
    for iid, (_, operands, _, _) in mod.ops.items():
        for o in operands:
            users.setdefault(o, []).append(iid)

    def last_use(iid: int) -> int:
        end, todo, seen = pos[iid], [iid], {iid}
        while todo:
            x = todo.pop()
            nxt = [(u, (mod.ops.get(u) or ("",))[0] in FORWARDING) for u in users.get(x, [])]
            comp = (mod.ops.get(x) or ("", [], [], None))[3]
            if comp != mod.entry and comp in callers and mod.roots.get(comp) == x:
                nxt.append((callers[comp], True))  # a called computation's result is its caller's
            for u, follow in nxt:
                if u not in seen:
                    seen.add(u)
                    end = max(end, pos.get(u, end))
                    if follow:
                        todo.append(u)
        return end

    spans = []
    for a in assigned:
        bid = a.get("logical_buffer_id", 0)
        iid = defined.get(bid)
        if iid is None or iid not in pos:
            return None
        spans.append((first[iid], last_use(iid), bid, a.get("offset", 0), a.get("size", 0)))
    best, best_k, total = -1, -1, 0
    holders: dict[tuple[int, int], list[tuple[int, int, int]]] = {}  # (offset, size) -> [(end, start, bid)] live
    spans.sort()
    for k, (start, end, bid, off, size) in enumerate(spans):
        for key in list(holders):  # what ended before this start frees its bytes
            holders[key] = [h for h in holders[key] if h[0] >= start]
            if not holders[key]:
                del holders[key]
                total -= key[1]
        key = (off, size)
        if key not in holders:
            if any(off < o + sz and o < off + size for o, sz in holders):
                return None  # two values live at once in overlapping bytes: not XLA's liveness
            holders[key] = []
            total += size
        holders[key].append((end, start, bid))
        if total > best:
            best, best_k = total, k
    if best_k < 0:
        return 0, set()
    now = spans[best_k][0]  # the value in each range of bytes at that moment: the latest defined
    latest: dict[tuple[int, int], tuple[int, int]] = {}
    for start, end, bid, off, size in spans[:best_k + 1]:
        if end >= now and (start, bid) > latest.get((off, size), (-1, -1)):
            latest[(off, size)] = (start, bid)
    return best, {bid for _, bid in latest.values()}


def _sub_shape(shape: dict[str, Any], index: list[int]) -> dict[str, Any]:
    for k in index:
        tup = shape.get("tuple_shapes") or []
        if k >= len(tup):
            return {}
        shape = tup[k]
    return shape


def shape_text(shape: dict[str, Any]) -> tuple[str | None, str | None]:
    """(shape as HLO prints it, dtype): ("f32[512,512]", "f32"); a tuple: ("(f32[2], s32[])", "tuple")."""
    if not shape:
        return None, None
    dtype = DTYPES.get(shape.get("element_type", 0))
    if dtype == "tuple":
        parts = [shape_text(s)[0] or "?" for s in shape.get("tuple_shapes") or []]
        return "(" + ", ".join(parts) + ")", "tuple"
    dims = ",".join(str(d) for d in shape.get("dimensions") or [])
    return f"{dtype or '?'}[{dims}]", dtype


def location(meta: dict[str, Any], frames: dict[str, Any], is_user=None) -> dict[str, Any] | None:
    """The user's line of an instruction: its metadata's `source_file`/`source_line` (where `is_user(file)`), else
    (JAX) the innermost frame of its `stack_frame_id` in the user's code, else the innermost frame. None without
    either."""
    if meta.get("source_file") and meta.get("source_line"):
        if is_user is not None and not is_user(meta["source_file"]):
            return None
        return {"file": meta["source_file"], "line": int(meta["source_line"]), "function": None}
    fid = meta.get("stack_frame_id")
    if not fid or not frames:
        return None
    stack, locs = frames.get("stack_frames") or [], frames.get("file_locations") or []
    files, funcs = frames.get("file_names") or [], frames.get("function_names") or []
    chain, seen = [], set()
    while fid and 0 < fid <= len(stack) and fid not in seen:  # 1-based ids, innermost first
        seen.add(fid)
        frame = stack[fid - 1]
        lid = frame.get("file_location_id", 0)
        if 0 < lid <= len(locs):
            loc = locs[lid - 1]
            f, fn = loc.get("file_name_id", 0), loc.get("function_name_id", 0)
            chain.append({"file": files[f - 1] if 0 < f <= len(files) else None, "line": loc.get("line"),
                          "function": funcs[fn - 1] if 0 < fn <= len(funcs) else None})
        fid = frame.get("parent_frame_id", 0)
    chain = [c for c in chain if c["file"] and c["line"]]
    if not chain:
        return None
    return next((c for c in chain if is_user is None or is_user(c["file"])), chain[0])


# --- the buffers at the peak -----------------------------------------------------------------------------------
def heap_peak(trace: dict[str, Any], sizes: dict[int, int]) -> tuple[int, set[int]]:
    """(bytes, ids of the logical buffers live) at the moment a heap simulator trace holds the most bytes. A buffer
    shared with another (SHARE_WITH) takes no bytes of its own."""
    live: dict[int, int] = {}
    total = best = 0
    best_set: set[int] = set()
    for ev in trace.get("events", []):
        kind, bid = ev.get("kind", ALLOC), ev.get("buffer_id")
        if bid is None:
            continue
        if kind == ALLOC:
            live[bid] = sizes.get(bid, 0)
            total += live[bid]
        elif kind == SHARE_WITH:
            live[bid] = 0
        elif kind == FREE:
            total -= live.pop(bid, 0)
        if total > best:
            best, best_set = total, {b for b, s in live.items() if s}
    return best, best_set


def _kind(alloc: dict[str, Any]) -> str:
    if alloc.get("is_parameter"):
        return "parameter"
    if alloc.get("is_constant"):
        return "constant"
    if alloc.get("maybe_live_out"):
        return "output"
    return "temp"


def largest(assignment: bytes, modules: list[bytes], n: int = MAX_ROWS, is_user=None) -> dict[str, Any]:
    """Up to `n` buffers the program holds at its peak, largest first: {bytes, shape, dtype, kind (parameter |
    output | temp | constant), op (the defining instruction's opcode), instruction, op_name (its metadata's: the
    framework's op, JAX: an argument's path), location {file, line, function} or None, at_peak (True: held at the
    peak; None: a temporary listed by size, neither a heap trace nor the schedule could say)}. Returns
    {"rows": [...], "note": str | None, "temps_at_peak": how the temporaries were found}; never raises."""
    if len(assignment) > MAX_BYTES:
        return {"rows": [], "note": f"buffer assignment of {len(assignment) >> 20} MiB not read"}
    try:
        ba = decode_buffer_assignment(assignment)
    except Exception as exc:  # noqa: BLE001 - a format this reader does not know: no rows, said
        return {"rows": [], "note": f"buffer assignment unreadable ({type(exc).__name__}: {exc})"}
    try:
        return _rows(ba, modules, n, is_user)
    except Exception as exc:  # noqa: BLE001
        return {"rows": [], "note": f"largest buffers failed ({type(exc).__name__}: {exc})"}


def _rows(ba: dict[str, Any], modules: list[bytes], n: int, is_user) -> dict[str, Any]:
    """A parameter, output or constant allocation is held for the whole program: one row of its size, named by the
    buffer that is its value (a parameter allocation: the parameter; an output allocation: the buffer defined last
    in the entry's schedule - the others assigned there are earlier temporaries sharing its memory). A temporary
    allocation: a row per logical buffer live at its peak - by its heap trace, else by the module's schedule
    (schedule_peak); where neither can say, its largest logical buffers in distinct bytes of it, at_peak None."""
    note = None
    if sum(len(m) for m in modules) > MAX_MODULE_BYTES:
        modules, note = [], (f"optimized HLO above {MAX_MODULE_BYTES >> 20} MiB not read: buffers without their ops "
                             "or lines, temporaries by size")
    try:
        mod = module_index(modules)
        if not mod.raw and note is None:
            note = "no optimized HLO: buffers without their ops or lines"
    except Exception as exc:  # noqa: BLE001
        mod, note = Module(), f"optimized HLO unreadable ({type(exc).__name__}): buffers without their ops or lines"
    buffers = {b.get("id", 0): b for b in ba.get("logical_buffers", [])}
    sizes = {i: b.get("size", 0) for i, b in buffers.items()}
    defined = {i: (b.get("defined_at") or {}).get("instruction_id") for i, b in buffers.items()}
    traces = {t.get("buffer_allocation_index", 0): t for t in ba.get("heap_simulator_traces", [])}
    items: list[tuple[int, str, list[int], bool | None]] = []  # (bytes, kind, candidate buffer ids, at the peak)
    how: set[str] = set()
    for alloc in ba.get("buffer_allocations", []):
        if alloc.get("is_thread_local") or alloc.get("is_tuple"):
            continue
        kind = _kind(alloc)
        ids = [a.get("logical_buffer_id", 0) for a in alloc.get("assigned", [])]
        if kind != "temp":
            if alloc.get("size", 0) > 0 and ids:
                items.append((alloc["size"], kind, ids, True))
            continue
        trace = traces.get(alloc.get("index", 0))
        if trace is not None:
            live, way = heap_peak(trace, sizes)[1], "trace"
        else:
            try:
                found = schedule_peak(alloc.get("assigned", []), defined, mod)
                live, way = (found[1] if found else None), "schedule"
            except Exception:  # noqa: BLE001 - a module this reading does not follow: by size
                live = None
            if live is None:
                way = "size"
        how.add(way)
        taken: list[tuple[int, int]] = []  # by size: the largest buffers in distinct bytes of the allocation
        for a in sorted(alloc.get("assigned", []), key=lambda a: -(a.get("size") or 0)):
            bid = a.get("logical_buffer_id", 0)
            size = a.get("size") or sizes.get(bid, 0)
            lo = a.get("offset", 0)
            if size <= 0 or (live is not None and bid not in live):
                continue
            if live is None:  # a buffer in bytes another one uses is live at another time: left out
                if any(lo < hi2 and lo2 < lo + size for lo2, hi2 in taken):
                    continue
                taken.append((lo, lo + size))
            items.append((size, kind, [bid], None if live is None else True))
    top = sorted(items, key=lambda it: (-it[0], it[3] is None, it[2][0]))[:n]
    at = {bid: (buffers.get(bid) or {}).get("defined_at") or {} for it in top for bid in it[2]}
    order = mod.order

    def ins_of(bid: int) -> Instruction | None:
        return mod.find(at[bid].get("instruction_id"), at[bid].get("instruction_name"))

    def when(bid: int) -> int:
        return order.get(at[bid].get("instruction_id", -1), -1)

    rows = []
    for size, kind, ids, at_peak in top:
        if kind == "parameter":
            bid = next((b for b in ids if (ins_of(b) or Instruction("", "", {}, {}, "")).opcode == "parameter"),
                       min(ids, key=when))
        else:
            bid = max(ids, key=lambda b: (when(b), sizes.get(b, 0), b))
        loc = at[bid]
        ins = ins_of(bid)
        shape, dtype = shape_text(_sub_shape(ins.shape, loc.get("shape_index") or [])) if ins else (None, None)
        row = {"bytes": int(size), "shape": shape, "dtype": dtype, "kind": kind, "op": ins.opcode if ins else None,
               "instruction": ins.name if ins else loc.get("instruction_name"),
               "op_name": (ins.metadata.get("op_name") or None) if ins else None,
               "location": location(ins.metadata, mod.frames, is_user) if ins else None, "at_peak": at_peak}
        if ins and ins.parameter_number is not None and ins.computation == mod.entry_name:
            row["parameter_number"] = ins.parameter_number
        rows.append(row)
    if note is None and "size" in how and any(r["at_peak"] is None for r in rows):
        note = ("temporaries by size, in distinct bytes of the temp allocation: XLA kept no heap-simulator trace of "
                "it and its schedule could not say which are live at once")
    elif note is None and "schedule" in how:
        note = ("temporaries live at the temp allocation's peak by the module's schedule (XLA kept no "
                "heap-simulator trace of it)")
    return {"rows": rows, "note": note, "temps_at_peak": sorted(how)}


def describe(row: dict[str, Any]) -> str:
    """`f32[512,512] temp (dot) at train.py:12`: one buffer, short, for messages."""
    where = row.get("location") or {}
    at = f" at {where['file'].rsplit('/', 1)[-1]}:{where['line']}" if where.get("file") else ""
    return f"{fmt.nbytes(row['bytes'])} {row.get('shape') or '?'} {row['kind']} ({row.get('op') or '?'}){at}"
