"""Load an XSpace into per-thread numpy arrays: what the analyses need, read once.

Host threads (`/host:CPU` lines) carry the framework's annotations (StepTrace / StepTraceAnnotation with a
`step_num` stat, `StepMarker`, compiles, transfers) and, on CPU, the XLA CPU executor's HLO op events (stats
`hlo_op`, `hlo_module`, and with JAX `device_ordinal`). Device planes (`/device:TPU:0`, `/device:GPU:0`) exist on
accelerators; their op lines are read too. Timestamps are int64 picoseconds relative to the capture's first line."""
from __future__ import annotations

import operator
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .locate import TraceError
from .xplane_pb import parse_xspace

COMPILE_RE = re.compile(r"(^|::)Compile$|^backend_compile(_and_load)?$|^XlaCompile|^PjitCompile|^pjit_compile$")
TRANSFER_RE = re.compile(
    r"Transfer(To|From)(Device|Server|Host)|TransferToInfeed|BufferFromPyval|DevicePut|device_put|CopyToDevice|"
    r"ToLiteral$|CopyRawToHost|dataloader|data_load|DataLoader|next_batch|load_batch|get_batch|input_pipeline|"
    r"ParallelLoader|MpDeviceLoader|infeed", re.IGNORECASE)
# events that mean "the host waits for the device"; they are not host work
WAIT_RE = re.compile(r"^Wait for|block_until_ready|WaitDeviceOps|wait_device_ops|TensorCollectionBarrier$")
DEVICE_OP_LINES = ("XLA Ops", "XLA TraceMe", "Ops")
_FIELDS = operator.attrgetter("offset_ps", "duration_ps", "metadata_id")
_CHUNK = 1 << 16


@dataclass
class Line:
    host: str
    plane: str
    name: str
    start: np.ndarray  # int64 ps
    end: np.ndarray
    mid: np.ndarray  # metadata ids
    names: dict  # metadata id -> name (the plane's)
    is_device_plane: bool = False
    op_idx: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # indices of HLO op events
    op_device: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # -1 = not recorded
    modules: dict = field(default_factory=dict)  # op metadata id -> HLO module name
    step_idx: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    step_num: list = field(default_factory=list)

    @property
    def is_executor(self) -> bool:
        return len(self.op_idx) > 0

    def name_of(self, i: int) -> str:
        return self.names.get(int(self.mid[i]), "?")


@dataclass
class Capture:
    files: list[Path]
    hosts: list[str]
    lines: list[Line]
    t0_ns: int  # absolute time of ps 0
    window: tuple[int, int]  # span of the events (ps)
    profile_ms: float | None  # session length from the Task Environment plane
    device_planes: list[str]
    size_bytes: int
    errors: list[str]


def _stat_value(stat, ref_names):
    kind = stat.WhichOneof("value")
    if kind is None:
        return None
    v = getattr(stat, kind)
    if kind == "ref_value":
        return ref_names.get(v)
    return v


def _first_occurrence(mid: np.ndarray) -> dict[int, int]:
    uniq, first = np.unique(mid, return_index=True)
    return dict(zip(uniq.tolist(), first.tolist()))


def _ordinal_of(event, dev_ord: int, hint: list) -> int:
    stats = event.stats
    h = hint[0]
    if h < len(stats) and stats[h].metadata_id == dev_ord:
        return stats[h].int64_value
    for j, st in enumerate(stats):
        if st.metadata_id == dev_ord:
            hint[0] = j
            return st.int64_value or st.uint64_value
    return -1


def _device_ordinals(events, line: "Line", op_idx: np.ndarray, dev_ord: int) -> np.ndarray:
    """`device_ordinal` of each op event. A thread-pool task (between `ThreadpoolListener::StartRegion` events)
    runs thunks of one executor, i.e. one device, so the stat is read at the first and last op of each task and
    per event only where those two disagree (or where the line has no task markers)."""
    hint = [0]
    dev = np.full(len(op_idx), -1, dtype=np.int64)
    region_mids = [m for m, n in line.names.items() if n == "ThreadpoolListener::StartRegion"]
    starts = line.start[op_idx]
    if region_mids:
        marks = np.sort(line.start[np.isin(line.mid, region_mids)])
        region = np.searchsorted(marks, starts, side="right")
    else:
        region = np.arange(len(op_idx))
    order = np.lexsort((starts, region))
    bounds = np.flatnonzero(np.diff(region[order])) + 1
    for grp in np.split(order, bounds):
        first = _ordinal_of(events[int(op_idx[grp[0]])], dev_ord, hint)
        last = first if len(grp) == 1 else _ordinal_of(events[int(op_idx[grp[-1]])], dev_ord, hint)
        if first == last:
            dev[grp] = first
        else:
            for k in grp.tolist():
                dev[k] = _ordinal_of(events[int(op_idx[k])], dev_ord, hint)
    return dev


def _read_line(line, names, stat_ids, host, plane_name, is_device, base_ns):
    events = line.events
    n = len(events)
    if n == 0:
        return None
    raw = np.empty((n, 3), dtype=np.int64)
    for lo in range(0, n, _CHUNK):  # chunks bound the temporary Python tuples
        part = events[lo:lo + _CHUNK]
        raw[lo:lo + len(part)] = list(map(_FIELDS, part))
    shift = (line.timestamp_ns - base_ns) * 1000
    start = raw[:, 0] + shift
    out = Line(host=host, plane=plane_name, name=line.display_name or line.name, start=start,
               end=start + raw[:, 1], mid=raw[:, 2], names=names, is_device_plane=is_device)
    first = _first_occurrence(out.mid)
    hlo_op, hlo_module, dev_ord, r_id, step_id = (stat_ids.get(k) for k in
                                                  ("hlo_op", "hlo_module", "device_ordinal", "_r", "step_num"))
    op_mids, step_mids = set(), set()
    for m, i in first.items():
        sids = {s.metadata_id for s in events[i].stats}
        if hlo_op is not None and hlo_op in sids:
            op_mids.add(m)
        elif r_id is not None and r_id in sids:
            step_mids.add(m)
        elif is_device and plane_name and line.name in DEVICE_OP_LINES:
            op_mids.add(m)  # device planes: every event on the ops line is an HLO op
    if op_mids:
        op_idx = np.flatnonzero(np.isin(out.mid, np.fromiter(op_mids, np.int64)))
        dev = np.full(len(op_idx), -2 if is_device else -1, dtype=np.int64)
        if dev_ord is not None and not is_device:  # per-event device ordinal (JAX / PJRT CPU client)
            dev[:] = _device_ordinals(events, out, op_idx, dev_ord)
        ref = stat_ids["_ref_names"]
        for m in op_mids:  # module name, from the first event of each op
            for s in events[first[m]].stats:
                if s.metadata_id == hlo_module:
                    out.modules[m] = _stat_value(s, ref)
        out.op_idx, out.op_device = op_idx, dev
    if step_mids:
        idx = np.flatnonzero(np.isin(out.mid, np.fromiter(step_mids, np.int64)))
        nums = []
        for i in idx.tolist():
            v = None
            for s in events[i].stats:
                if s.metadata_id == step_id:
                    v = s.int64_value or s.uint64_value
            nums.append(v)
        out.step_idx, out.step_num = idx, nums
    return out


def load_capture(files: list[Path]) -> Capture:
    lines: list[Line] = []
    hosts: list[str] = []
    device_planes: list[str] = []
    errors: list[str] = []
    size = 0
    spaces = []
    for f in files:
        try:
            data = f.read_bytes()
            space = parse_xspace(data)
        except Exception as exc:  # noqa: BLE001 - a corrupt/truncated file
            raise TraceError(f"{f}: cannot read as an XSpace protobuf ({type(exc).__name__}: {exc})") from None
        size += len(data)
        del data
        spaces.append((f, space))
    base_ns = None
    for _f, space in spaces:
        for plane in space.planes:
            for line in plane.lines:
                if line.events and (base_ns is None or line.timestamp_ns < base_ns):
                    base_ns = line.timestamp_ns
    if base_ns is None:
        raise TraceError(f"{files[0]}: the capture holds no trace events (was the job running steps during "
                         f"the capture window?)")
    profile_ps = None
    for f, space in spaces:
        host = (list(space.hostnames) or [f.name.split(".xplane.pb")[0]])[0]
        hosts.append(host)
        errors.extend(space.errors)
        for plane in space.planes:
            stat_names = {k: v.name for k, v in plane.stat_metadata.items()}
            stat_ids = {v: k for k, v in stat_names.items()}
            stat_ids["_ref_names"] = stat_names
            if plane.name == "Task Environment":
                vals = {stat_names.get(s.metadata_id): _stat_value(s, stat_names) for s in plane.stats}
                if vals.get("profile_start_time") and vals.get("profile_stop_time"):
                    # epoch ns; host lines may use another clock, so only the duration is used
                    dur_ps = (int(vals["profile_stop_time"]) - int(vals["profile_start_time"])) * 1000
                    profile_ps = max(profile_ps or 0, dur_ps)
                continue
            is_device = plane.name.startswith("/device:") and not plane.name.startswith("/device:CUSTOM")
            if not plane.lines:
                continue
            if is_device:
                device_planes.append(plane.name)
            names = {k: v.name for k, v in plane.event_metadata.items()}
            for line in plane.lines:
                if is_device and line.name not in DEVICE_OP_LINES and "Steps" not in line.name:
                    continue
                got = _read_line(line, names, stat_ids, host, plane.name, is_device, base_ns)
                if got is not None:
                    lines.append(got)
    del spaces
    ev_lo = min(int(l.start.min()) for l in lines)
    ev_hi = max(int(l.end.max()) for l in lines)
    return Capture(files=list(files), hosts=hosts, lines=lines, t0_ns=base_ns, window=(ev_lo, ev_hi),
                   profile_ms=profile_ps / 1e9 if profile_ps else None,
                   device_planes=device_planes, size_bytes=size, errors=errors)
