"""Which backend a run uses when none is named: the framework a script imports (`profile --backend auto`), or
the one this process has already imported (an in-process capture window). torch_xla wins when both are there, as
a torch_xla script may import JAX for a utility. One detector, so the two never disagree."""
from __future__ import annotations

import re
import sys

_JAX = re.compile(r"^\s*(import\s+jax|from\s+jax[\s.]|import\s+flax|from\s+flax)", re.M)
_TORCH_XLA = re.compile(r"^\s*(import\s+torch_xla|from\s+torch_xla)", re.M)


def detect_backend(source: str | None = None) -> str | None:
    """"torch_xla" or "jax": the one `source` (a script's text) imports, or without it the one already imported
    in this process; None when neither is."""
    if source is None:
        torch_xla, jax = "torch_xla" in sys.modules, "jax" in sys.modules
    else:
        torch_xla, jax = bool(_TORCH_XLA.search(source)), bool(_JAX.search(source))
    return "torch_xla" if torch_xla else "jax" if jax else None
