"""What torch_xla's other execution modes record about themselves, read without changing them (docs/modes.md).

- `DynamoWatch`: torch.compile's own evidence. Dynamo keeps it whatever its logging says, so reading it turns no
  logging on, prints nothing and adds no hook to dynamo's path: `torch._dynamo.utils.get_compilation_metrics()`
  (one entry per frame compile: the function, the guard that failed when it is a recompile, its compile seconds,
  its graph breaks), `torch._dynamo.utils.graph_break_reasons` (each graph break's reason and user stack) and
  `counters["stats"]["unique_graphs"]`. Polled at each step boundary once the script called torch.compile: a few
  list lengths, so the events land on the step in which dynamo compiled.
"""
from __future__ import annotations

import gc
import linecache
import os
import re
from typing import Any

from ...xla import hlo_cost
from ...frames import USER, classify
from ...model.records import Event, Location
from . import _private as P


def _dynamo_utils():
    return P.dynamo_utils()


def _first_line(text: str | None, limit: int = 300) -> str:
    text = (text or "").strip()
    return text.splitlines()[0][:limit] if text else ""


def _strip_id(reason: str) -> str:
    """'0/1: L['n'] == 3' -> "L['n'] == 3" (dynamo prefixes each guard failure with its compile id)."""
    head, sep, rest = reason.partition(": ")
    return rest if sep and "/" in head and head.replace("/", "").isdigit() else reason


class DynamoWatch:
    """Polls dynamo's records for frame compiles, recompiles and graph breaks since the last poll."""

    def __init__(self) -> None:
        self.on = False
        self._last: Any = None  # the newest compilation-metrics entry seen (held, so its identity stays unique)
        self._breaks = 0  # graph_break_reasons seen
        self._graphs = 0  # counters["stats"]["unique_graphs"] seen
        self.sites: list[tuple[Location | None, Any]] = []  # (torch.compile's call line, what it compiled)

    def compiled(self, target: Any, site: Location | None) -> None:
        """The script called torch.compile at `site` (before dynamo compiles anything: it compiles on first call)."""
        if not self.on:
            self.on = True
            _skip_our_files()
            du = _dynamo_utils()
            if du is not None:
                try:
                    metrics = du.get_compilation_metrics()
                    self._last = metrics[-1] if metrics else None
                    self._breaks = len(du.graph_break_reasons)
                    self._graphs = int(du.counters["stats"]["unique_graphs"])
                except Exception:
                    pass
        self.sites.append((site, _code_of(target)))

    def poll(self) -> list[Event]:
        """Events for what dynamo compiled since the last poll: `dynamo_compile` per frame compile (its recompile
        reason), `dynamo_graph_break` per graph break (its user line). Never raises."""
        du = _dynamo_utils()
        if not self.on or du is None or not P.CAPS.dynamo_records:
            return []
        try:
            return self._poll(du)
        except Exception:  # dynamo moved its records: no evidence, never a broken step
            return []

    def _poll(self, du) -> list[Event]:
        events: list[Event] = []
        metrics = du.get_compilation_metrics()
        new = []
        for m in reversed(metrics):
            if m is self._last:
                break
            new.append(m)
        if metrics:
            self._last = metrics[-1]
        limit = _recompile_limit()
        for m in reversed(new):
            if not m.co_name:  # not a frame compile (a backward graph compiled at run time, autotuning)
                continue
            reason, guard_line = _guard(_strip_id(_first_line(m.recompile_reason, 1000)), m.co_filename)
            detail: dict[str, Any] = {
                "key": f"dynamo:{m.co_filename}:{m.co_firstlineno}:{m.co_name}", "first": not reason,
                "seconds": float(m.entire_frame_compile_time_s or 0.0), "call": m.co_name,
                "compile_id": m.compile_id, "function": f"{m.co_name} ({_short(m.co_filename)}:{m.co_firstlineno})"}
            if reason:
                detail["cause"] = guard_cause(reason)
                detail["differences"] = [reason]
            if m.fail_type:
                detail["cause"] = "compile_failed"
                detail["differences"] = [_first_line(f"{m.fail_type}: {m.fail_reason}")]
            for key, value in (("graph_ops", m.graph_op_count), ("graph_breaks", m.num_graph_breaks),
                               ("guarded", m.has_guarded_code)):
                if value is not None:
                    detail[key] = value
            if limit:
                detail["recompile_limit"] = limit
            loc = guard_line or self._location(m.co_filename, m.co_firstlineno, m.co_name)
            events.append(Event("dynamo_compile", loc, detail))
        graphs = int(du.counters["stats"]["unique_graphs"])
        if graphs < self._graphs:  # torch._dynamo.reset() cleared the counters
            self._graphs = 0
        if events and graphs > self._graphs:
            events[-1].detail.extra["graphs"] = graphs - self._graphs
        if events:
            self._graphs = graphs
        reasons = du.graph_break_reasons
        if len(reasons) < self._breaks:
            self._breaks = 0
        for r in reasons[self._breaks:]:
            loc, via = _user_line(getattr(r, "user_stack", None) or [])
            detail = {"reason": _first_line(getattr(r, "reason", ""))}
            if via is not None:
                detail["via"] = via.short()
            events.append(Event("dynamo_graph_break", loc, detail))
        self._breaks = len(reasons)
        return events

    def _location(self, filename: str | None, line: int | None, name: str | None) -> Location | None:
        """The compiled function's own line when it is the user's; else the line that called torch.compile on it
        (a library module's forward, nn.Module's call), or the only torch.compile line of the script."""
        if filename and classify(filename) == USER:
            path = os.path.abspath(filename)
            return Location(path, _def_line(path, int(line or 0)), name or "?")
        sites = [s for s, code in self.sites if s is not None]
        matching = [s for s, code in self.sites if s is not None and code == (filename, line)]
        if matching:
            return matching[-1]
        return sites[0] if len({(s.file, s.line) for s in sites}) == 1 else None


_GUARD_SOURCE = re.compile(r"^(?P<guard>.*?)\s+#\s(?P<code>.*?)\s+#\s*(?P<path>\S+):(?P<line>\d+) in (?P<fn>\S+)\s*$")


def _guard(reason: str, filename: str | None) -> tuple[str, Location | None]:
    """A failed guard as dynamo words it - `step == 0  # return f(x) * step  # dir/train.py:16 in loss` - split into
    the guard (`step == 0`) and the user line that made dynamo install it (where the changing value is read)."""
    m = _GUARD_SOURCE.match(reason)
    if not m:
        return reason, None
    path = m["path"]
    if filename and (filename.endswith(path) or os.path.basename(filename) == os.path.basename(path)):
        path = filename
    if not os.path.isabs(path) or classify(path) != USER:
        return m["guard"], None
    return f"{m['guard']} (at `{m['code'].strip()}`)", Location(path, int(m["line"]), m["fn"])


def _skip_our_files() -> None:
    """Dynamo compiles any Python frame a compiled region runs eagerly (after a graph break) unless its file is on
    its skip list, as torch's own files are: a hook of ours called from there would be compiled as a frame of the
    user's program (an extra compile, one more entry in dynamo's counters). Ours go on the list too."""
    if not P.CAPS.dynamo_skip_files:
        return
    try:
        P.dynamo_trace_rules().add(__name__.split(".")[0])
    except Exception:
        pass


def _code_of(target: Any) -> tuple | None:
    """(file, first line) of the code dynamo will compile for a torch.compile target: a function's, or an
    nn.Module's forward."""
    code = getattr(target, "__code__", None)
    if code is None:
        forward = getattr(type(target), "forward", None)
        code = getattr(forward, "__code__", None)
    return (code.co_filename, code.co_firstlineno) if code is not None else None


def _def_line(path: str, line: int) -> int:
    """A decorated function's code starts at its first decorator: the `def` line is the one a reader looks for."""
    if not linecache.getline(path, line).lstrip().startswith("@"):
        return line
    for n in range(line + 1, line + 20):
        if linecache.getline(path, n).lstrip().startswith(("def ", "async def ")):
            return n
    return line


def _user_line(stack: list) -> tuple[Location | None, Location | None]:
    """The innermost user frame of a graph break's user stack, and the innermost library frame below it."""
    via = None
    for fs in reversed(stack):
        filename = getattr(fs, "filename", None)
        if not filename:
            continue
        if classify(filename) == USER:
            return Location(os.path.abspath(filename), int(fs.lineno or 0), fs.name), via
        if via is None:
            via = Location(os.path.abspath(filename), int(fs.lineno or 0), fs.name)
    return None, via


def _short(path: str | None) -> str:
    return os.path.basename(path or "?")


def _recompile_limit() -> int | None:
    config = P.dynamo_config()
    for name in ("recompile_limit", "cache_size_limit"):
        value = getattr(config, name, None)
        if isinstance(value, int):
            return value
    return None


def guard_cause(reason: str) -> str:
    """Which kind of guard failed, from dynamo's own words (guards.py's failure texts)."""
    text = reason.lower()
    if "size mismatch" in text or "stride mismatch" in text or ".size()" in text or "dimension" in text:
        return "input_shapes"
    if "dtype mismatch" in text:
        return "input_dtypes"
    if "device mismatch" in text:
        return "device"
    if "requires_grad" in text or "grad_mode" in text or "grad mode" in text:
        return "grad_mode"
    if "___check_obj_id" in text or "id_match" in text or "id(" in text:
        return "object_identity"
    if "___check_type_id" in text or "type_match" in text or "type mismatch" in text:
        return "type"
    if "len(" in text or "length mismatch" in text:
        return "argument_structure"
    if "==" in text or "!=" in text:
        return "python_value"
    return "guard"


# --- SPMD ---------------------------------------------------------------------------------------------------------
def spmd_meshes() -> list[dict[str, Any]]:
    """The `xs.Mesh` objects the script made (shape, axis names, device count), found on the heap once the script
    used SPMD: a mesh is a plain Python object that `mark_sharding` only reads, so nothing is hooked. Also the
    global mesh (`xs.set_global_mesh`)."""
    mod = P.xla_sharding()
    cls = getattr(mod, "Mesh", None)
    if cls is None:
        return []
    found: dict[tuple, dict[str, Any]] = {}
    meshes = [o for o in gc.get_objects() if issubclass(type(o), cls)]
    try:
        g = mod.get_global_mesh()
        if g is not None:
            meshes.insert(0, g)
    except Exception:
        pass
    for m in meshes:
        try:
            shape = [int(d) for d in m.mesh_shape]
            names = [str(a) for a in m.axis_names] if m.axis_names is not None else None
            devices = [int(d) for d in list(m.device_ids)]
        except Exception:
            continue
        key = (tuple(shape), tuple(names or ()), tuple(devices))
        if key not in found:
            found[key] = {"shape": shape, "axis_names": names, "devices": len(devices)}
    return list(found.values())[:8]


def partitioned_cost(proto: bytes, devices: int):
    """What one device runs of an SPMD step graph: XLA's SPMD partitioner (GSPMD, as torch_xla's runtime uses) and
    optimization pipeline run on the graph's HLO by a standalone jaxlib CPU client with `devices` devices (never
    the runtime's own client), outputs sharded as propagation says (a tensor passed through keeps its sharding).
    Returns (GraphCost of the partitioned module: XLA's HloCostAnalysis, per device; its HLO text). Raises when
    jaxlib's private entry points are missing."""
    import numpy as np

    hlo, xla = P.jaxlib_hlo_and_client()
    client = hlo_cost.cpu_client(xla, devices)
    module = xla.mlir.xla_computation_to_mlir_module(hlo.XlaComputation(proto))
    options = hlo_cost.analysis_options(xla)
    build = options.executable_build_options
    build.num_replicas, build.num_partitions = 1, devices
    build.use_spmd_partitioning = True
    build.allow_spmd_sharding_propagation_to_output = [True]
    build.device_assignment = xla.DeviceAssignment.create(np.arange(devices).reshape(1, devices))
    executable = hlo_cost.compile_for_analysis(client, module, client.devices()[:devices], options)
    done = executable.hlo_modules()[0]
    cost = hlo_cost.from_properties(xla.hlo_module_cost_analysis(client, done),
                                    f"SPMD: the partitioned module one of the {devices} devices runs (XLA's CPU "
                                    "pipeline: after partitioning and fusion)")
    return cost, done.to_string()


PARTITION_MAX_HLO_CHARS = 8_000_000  # larger step graphs are not partitioned on the host (minutes of CPU compile)
_SHARDED_PARAM = re.compile(r"\bparameter\(\d+\).*sharding=\{devices=")


def spmd_graph(text: str, proto_fn, devices: int, meshes: list[dict[str, Any]]):
    """The SPMD evidence of one step graph: how many of its inputs are sharded (the HLO torch_xla builds carries
    each input's sharding), and the collectives of its partitioned module with their bytes and share of the
    module's bytes (the roofline's bytes of this graph). Returns (cost or None, evidence)."""
    params = [line for line in text.splitlines() if " parameter(" in line]
    info: dict[str, Any] = {"devices": devices, "meshes": meshes, "inputs": len(params),
                            "sharded_inputs": sum(bool(_SHARDED_PARAM.search(p)) for p in params)}
    cost = None
    if len(text) > PARTITION_MAX_HLO_CHARS:
        info["collectives_error"] = (f"not partitioned: the graph's HLO is {len(text) / 1e6:.0f} MB of text, above "
                                     f"{PARTITION_MAX_HLO_CHARS / 1e6:.0f} MB (a host compile that long is not spent "
                                     "on a diagnostic); its cost is the unpartitioned graph's")
        return None, info
    try:
        cost, partitioned = partitioned_cost(proto_fn(), devices)
        found = hlo_cost.collectives(partitioned)
        total = sum(c["bytes"] for c in found.values())
        info["collectives"] = {op: {"count": int(c["count"]), "bytes": int(c["bytes"])} for op, c in found.items()}
        info["collective_bytes"] = int(total)
        info["bytes_accessed"] = cost.bytes_accessed
        info["collective_share_of_bytes"] = round(total / cost.bytes_accessed, 4) if cost.bytes_accessed else None
    except Exception as exc:  # the partitioner is jaxlib's private API: without it, no collectives (said)
        info["collectives_error"] = f"{type(exc).__name__}: {_first_line(str(exc), 160)}"
    return cost, info
