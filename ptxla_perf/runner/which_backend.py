"""Which backend a run uses when none is named, from what the program imports, never from a script's text: the
framework `profile --backend auto` sees the program import (import_watch.py, session/on_import.py), the one this
process has already imported (an in-process capture window), the modules in a notebook's namespace. One detector,
so they never disagree.

When both are imported, torch_xla wins: a torch_xla script may import JAX for a utility (and isort puts
`import jax` first). `profile` keeps JAX only where the program ran a jitted JAX function before it imported
torch_xla."""
from __future__ import annotations

import sys
from typing import Iterable

# the top-level module whose import says which framework runs -> its backend
FRAMEWORKS = {"torch_xla": "torch_xla", "jax": "jax"}
# modules that are part of a backend's framework (a notebook namespace's `nnx` or `jnp` says JAX is used)
_MODULES = {**FRAMEWORKS, "jaxlib": "jax", "flax": "jax"}


def backend_of(module: str | None) -> str | None:
    """The backend whose framework `module` (a dotted module name) belongs to, or None."""
    return _MODULES.get((module or "").partition(".")[0])


def imported() -> set[str]:
    """The backends whose framework this process has imported."""
    return {backend for name, backend in FRAMEWORKS.items() if name in sys.modules}


def detect_backend(found: Iterable[str] | None = None) -> str | None:
    """"torch_xla" or "jax": the one among the backends `found` (default: those imported in this process),
    torch_xla when both are; None when neither is."""
    found = imported() if found is None else set(found)
    return "torch_xla" if "torch_xla" in found else "jax" if "jax" in found else None


def takes_over(current: str, new: str, ran: bool) -> bool:
    """Whether a framework the program imports after the session's own (`current`) becomes the run's backend:
    the detector's choice between the two, while the program has run nothing on `current` (`ran`)."""
    return not ran and new != current and detect_backend({current, new}) == new
