"""The torch_xla backend, one module per signal; `TorchXlaAdapter` (adapter.py) composes them.

Importing the package itself loads no torch_xla: the adapter and its parts load on first use, so its rules
(rules.py) can be read without the framework.
"""
from __future__ import annotations

from typing import Any

_LAZY = {"TorchXlaAdapter": ".adapter", "X": "._private", "CAPS": "._private", "DeviceTimes": ".device_time",
         "_DeviceTimes": ".device_time"}

__all__ = ["TorchXlaAdapter"]


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib  # (PEP 562 lazy attribute: the heavy framework loads only here)
    value = getattr(importlib.import_module(_LAZY[name], __name__), name)
    globals()[name] = value
    return value
