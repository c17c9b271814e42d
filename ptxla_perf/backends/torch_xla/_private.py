"""Every private or version-dependent torch / torch_xla name the backend uses, in one place.

A release can rename or drop any of these. Each feature of the backend names what it needs here; `probe()` looks
them up once (no call, no runtime start) and a missing name turns that one feature off, with a note
(`not measured: <feature> (needs <name>)`) in the report's attribution notes, never an exception. The other
modules reach these names only through this module. All present in torch / torch_xla 2.9 (the tested pair; a
test checks that none is missing there); 2.8 not verified name by name: what it lacks shows up as notes.

`X` is the `torch_xla._XLAC` module itself, not copies of its functions: the backend installs its wrappers by
assigning to it (the sync's step marker, the device wait), and tests replace its metric reader.
"""
from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass, field, fields
from typing import Any, Callable

import torch
import torch_xla

from ...model import versions

X = torch_xla._XLAC

# feature -> the names it needs ("X.<name>" is a torch_xla._XLAC binding; "module:attr.attr" any other)
NEEDS: dict[str, tuple[str, ...]] = {
    "steps": ("X._xla_step_marker", "X._xla_counter_value", "X._xla_metric_data"),
    "fallback_ops": ("X._xla_counter_names",),
    "eager_mode": ("X._get_use_eager_mode",),
    "graph_capture": ("X._get_ir_debug", "X._set_ir_debug", "X._get_graph_hash", "X._get_xla_tensors_hlo",
                      "X._get_xla_tensors_hlo_proto", "X._xla_get_tensor_id", "X._get_xla_tensor_debug_info",
                      "torch:Tensor._fix_weakref"),
    "closure_reads": ("torch_xla.core.xla_model:_run_step_closures", "torch_xla.core.xla_model:_get_device_context"),
    "loader_shapes": ("torch_xla.distributed.parallel_loader:PerDeviceLoader.next",),
    "data_wait": ("torch.utils.data.dataloader:_BaseDataLoaderIter.__next__",),
    "device_wait": ("X._xla_wait_device_ops",),
    "optimizer_steps": ("torch.optim.optimizer:register_optimizer_step_post_hook",),
    "dynamo_graphs": ("X._run_cached_graph",),
    "dynamo_skip": ("torch._dynamo.decorators:skip",),
    "fake_tensors": ("torch._C:_get_dispatch_mode", "torch._C:_TorchDispatchModeKey.FAKE"),
    "mode_stack": ("torch.overrides:_get_current_function_mode_stack",),
    "spawn": ("torch_xla._internal.pjrt:initialize_multiprocess",),
    "runtime_state": ("X._xla_runtime_is_initialized",),
    "dynamo_records": ("torch._dynamo.utils:get_compilation_metrics", "torch._dynamo.utils:graph_break_reasons",
                       "torch._dynamo.utils:counters"),
    "dynamo_skip_files": ("torch._dynamo.trace_rules:add",),
    "spmd_meshes": ("torch_xla.distributed.spmd.xla_sharding:Mesh",),
}
# not probed (a heavy import, and optional): jaxlib's `_hlo` / `_jax` for the SPMD partitioner on the host
# (modes.partitioned_cost); without them an SPMD graph is costed whole, with a note (hlo_cost.py)


@dataclass(frozen=True)
class Capabilities:
    """One flag per feature: True when every name it needs was found; `missing` says what was not, per feature."""

    steps: bool = True
    fallback_ops: bool = True
    eager_mode: bool = True
    graph_capture: bool = True
    closure_reads: bool = True
    loader_shapes: bool = True
    data_wait: bool = True
    device_wait: bool = True
    optimizer_steps: bool = True
    dynamo_graphs: bool = True
    dynamo_skip: bool = True
    fake_tensors: bool = True
    mode_stack: bool = True
    spawn: bool = True
    runtime_state: bool = True
    dynamo_records: bool = True
    dynamo_skip_files: bool = True
    spmd_meshes: bool = True
    missing: tuple[tuple[str, str], ...] = field(default=())  # (feature, the first name not found)

    def notes(self) -> list[str]:
        """The features off, then a torch_xla or torch outside the range measured here (versions.py: doctor says the
        same)."""
        outside = [versions.words(name, getattr(mod, "__version__", "?")) for name, mod in (("torch_xla", torch_xla),
                                                                                           ("torch", torch))]
        return [f"not measured: {feature} (needs {name})" for feature, name in self.missing] + \
            [w for w in outside if w]


def lookup(name: str) -> Any:
    """The object a NEEDS entry names; raises (ImportError / AttributeError) when it is not there."""
    if name.startswith("X."):
        return getattr(X, name[2:])
    module, _, path = name.partition(":")
    obj: Any = importlib.import_module(module)
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


def probe() -> Capabilities:
    """Look every needed name up once. Imports only modules torch_xla itself loads at import (no runtime start)."""
    flags: dict[str, bool] = {}
    missing: list[tuple[str, str]] = []
    for feature, names in NEEDS.items():
        for name in names:
            try:
                lookup(name)
            except Exception:
                flags[feature] = False
                missing.append((feature, name))
                break
        else:
            flags[feature] = True
    known = {f.name for f in fields(Capabilities)}
    return Capabilities(**{k: v for k, v in flags.items() if k in known}, missing=tuple(missing))


def runtime_up() -> bool:
    """The XLA runtime is initialised (asking anything else first would initialise it); False when unknown."""
    return bool(X._xla_runtime_is_initialized()) if CAPS.runtime_state else False


# --- accessors for names that are looked up when used (replaced at run time, or optional) ---------------------
def xla_model():
    import torch_xla.core.xla_model as xm
    return xm


def parallel_loader():
    import torch_xla.distributed.parallel_loader as pl
    return pl


def data_loader_iter():
    from torch.utils.data import dataloader as dl
    return dl._BaseDataLoaderIter


def pjrt_module():
    """torch_xla's private launcher module (xmp.spawn goes through its `spawn`); None when it moved."""
    try:
        from torch_xla._internal import pjrt
    except Exception:
        return None
    return pjrt


def dynamo_skip() -> Callable | None:
    try:
        from torch._dynamo.decorators import skip
    except Exception:  # no dynamo (or it moved)
        return None
    return skip


def fake_mode_active() -> bool:
    """A FakeTensorMode is active (torch.compile tracing its graphs); False when torch cannot say."""
    try:
        return torch._C._get_dispatch_mode(torch._C._TorchDispatchModeKey.FAKE) is not None
    except Exception:
        return False


def innermost_function_mode() -> list:
    """The innermost TorchFunctionMode on the stack, as a list of at most one."""
    try:
        return torch.overrides._get_current_function_mode_stack()[-1:]
    except Exception:
        return []


def dynamo_utils():
    """torch._dynamo.utils if dynamo is loaded (never imported here: the script's torch.compile loads it)."""
    return sys.modules.get("torch._dynamo.utils")


def dynamo_config():
    return sys.modules.get("torch._dynamo.config")


def dynamo_trace_rules():
    from torch._dynamo import trace_rules
    return trace_rules


def xla_sharding():
    return sys.modules.get("torch_xla.distributed.spmd.xla_sharding")


def jaxlib_hlo_and_client():
    """jaxlib's private HLO and client modules (the SPMD partitioner run on the host); raises when absent."""
    return importlib.import_module("jaxlib._hlo"), importlib.import_module("jaxlib._jax")


CAPS = probe()
