"""Showing things in a Jupyter kernel: whether one runs us, a page as an isolated iframe, a display call that
falls back to the console outside a kernel."""
from __future__ import annotations

import sys
from html import escape
from typing import Any


def in_kernel() -> bool:
    """True inside a Jupyter kernel (ipykernel), where rich output reaches the notebook; False in a terminal
    IPython or plain Python."""
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return False
    try:
        shell = ipython.get_ipython()
    except Exception:  # noqa: BLE001 - an odd IPython: treat as a terminal
        return False
    return shell is not None and getattr(shell, "kernel", None) is not None


def iframe(page: str, height: int = 720) -> str:
    """The whole page in an iframe's srcdoc: its style and script stay inside it (nothing leaks into the
    notebook's own CSS) and it stays self-contained (the page's policy forbids any request)."""
    return (f"<iframe class=\"ptxla-perf-report\" srcdoc=\"{escape(page, quote=True)}\" "
            f"style=\"width:100%;height:{int(height)}px;border:1px solid #ccc;resize:vertical\"></iframe>")


def show(obj: Any, console_text: str) -> None:
    """`obj` as the kernel displays it; outside a kernel `console_text` on stderr (where the CLI prints)."""
    if in_kernel():
        from IPython.display import display
        display(obj)
    else:
        print(console_text, file=sys.stderr, flush=True)
