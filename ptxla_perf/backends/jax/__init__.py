"""The JAX backend, one module per signal (adapter.py composes them). `JaxAdapter` is imported on first use, so
that the pure parts (rules.py, ready.py) load without JAX."""
from __future__ import annotations

from typing import Any

__all__ = ["JaxAdapter"]


def __getattr__(name: str) -> Any:
    if name == "JaxAdapter":
        from .adapter import JaxAdapter  # JAX is an optional framework: imported only when the adapter is asked for
        return JaxAdapter
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
