"""ptxla_perf: why is my XLA training step slow, and which line of my code is to blame."""
from ._meta import SCHEMA_ID, __version__  # said in _meta, which the package's own modules import

_NOTEBOOK = ("profile", "load", "compare", "Report")  # the notebook API (docs/notebook.md), imported on first use


def __getattr__(name: str):
    if name in _NOTEBOOK:
        from . import notebook
        return getattr(notebook, name)
    raise AttributeError(f"module 'ptxla_perf' has no attribute {name!r}")
