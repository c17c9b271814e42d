"""ptxla_perf in a notebook (docs/notebook.md): profile a cell (`profile`), a report as pandas DataFrames with its
page inline (`load`, `Report`), runs side by side with the `diff` command's numbers and gate (`compare`).

pandas is an optional extra (`pip install 'ptxla_perf[notebook]'`): only the DataFrame views import it."""
from __future__ import annotations

from .compare import Comparison
from .profile import Profile, profile
from .report import Report, ReportLoadError, Summary, compare, load

__all__ = ["profile", "Profile", "load", "Report", "Summary", "ReportLoadError", "compare", "Comparison"]
