"""`with ptxla_perf.profile() as prof:` around training code in a notebook cell (or any Python code): a Session
made for a kernel. No signal handlers (the kernel's interrupt stays a KeyboardInterrupt raised in the cell: the
report is built, then it goes on), no profiler server and nothing written unless asked, a progress bar that
fits a notebook, and at the end the summary shown in the cell; `prof.report` is the `Report`."""
from __future__ import annotations

import sys
import types
from typing import Any

from ..model.outcome import SessionError
from ..runner.which_backend import backend_of, imported
from . import inline
from .report import Report
from .jax_adopt import adopt
from .jax_adopt import restore


def detect_backend(namespace: dict[str, Any] | None) -> str:
    """The backend the code around us uses: the modules imported into the caller's namespace (a notebook's
    globals), else the one of torch_xla / jax that is imported at all (which_backend.py, the detector `profile`
    and capture use). Both, or neither: name it (a cell's code does not say which one its loop runs)."""
    found = set()
    for value in list((namespace or {}).values()):
        try:
            mod = value.__name__ if isinstance(value, types.ModuleType) else getattr(value, "__module__", None)
        except Exception:  # noqa: BLE001 - an object whose attributes raise says nothing about the backend
            continue
        if isinstance(mod, str) and backend_of(mod):
            found.add(backend_of(mod))
    found = found or imported()
    if len(found) == 1:
        return found.pop()
    if found:
        raise SessionError("both torch_xla and jax are imported here: name the backend, "
                           "e.g. ptxla_perf.profile('jax')")
    raise SessionError("no backend found: import torch_xla or jax before profiling, or name it "
                       "(ptxla_perf.profile('torch_xla'))")


class _Progress:
    """Steps so far and the last step's time: tqdm's notebook bar where ipywidgets is there, else its text bar
    on stderr (a kernel shows it in the cell). Refreshed at most twice a second, never per step."""

    def __init__(self):
        self.bar = None
        try:
            if inline.in_kernel():
                try:
                    import ipywidgets  # noqa: F401 - tqdm.notebook needs it
                    from tqdm.notebook import tqdm
                except ImportError:
                    from tqdm.std import tqdm
            else:
                from tqdm.std import tqdm
            self.bar = tqdm(desc="ptxla_perf", unit="step", mininterval=0.5, file=sys.stderr, leave=True)
        except Exception:  # noqa: BLE001 - progress is a view: never fail the run for it
            self.bar = None

    def step(self, rec) -> None:
        if self.bar is not None:
            self.bar.update(1)
            self.bar.set_postfix_str(f"last {rec.wall_time_s * 1e3:.1f} ms", refresh=False)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


class Profile:
    """A profiling session around a block of code (see `profile`)."""

    def __init__(self, backend: str | None = None, *, report_path: str | None = None, display: bool = True,
                 progress: bool | None = None, port: int | None = None, **session_kwargs: Any):
        self.backend = backend
        self.report_path = report_path
        self.display = display
        self.progress = inline.in_kernel() if progress is None else progress
        self.port = port
        self.session_kwargs = session_kwargs
        self.session = None
        self.report: Report | None = None  # set when the block ends
        self._bar: _Progress | None = None
        self._namespace: dict[str, Any] = {}
        self._adopted: list = []

    def __enter__(self) -> "Profile":
        from ..session import Session  # load() and compare() need no session stack: only a profiled cell
        self._namespace = sys._getframe(1).f_globals
        backend = self.backend or detect_backend(self._namespace)
        kwargs = dict(report_path=self.report_path, port=self.port, console=False, handle_signals=False,
                      progress_every_s=None, summary=False)
        kwargs.update(self.session_kwargs)
        self.session = Session(backend, **kwargs)
        self.session.start()
        if self.progress:  # after start: a session that could not start leaves no bar behind
            self._bar = _Progress()
            self.session.add_step_callback(self._bar.step, self._bar.close)
        if backend == "jax":  # step functions jitted in an earlier cell (jax_adopt.py)
            self._adopted = adopt(self._namespace, self.session.adapter)
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        session = self.session
        if self._adopted:
            restore(self._namespace, self._adopted)
            self._adopted = []
        handled = session.__exit__(exc_type, exc, tb)  # builds (and, asked, writes) the report; a guard stop is
        data = session.finish()  # handled, anything else (an interrupt, a crash) goes on after the report
        self.report = Report(data, session.report_file() if self.report_path else None)
        if self.display:
            try:
                inline.show(_SummaryView(self.report), self.report.summary_text())
            except Exception:  # noqa: BLE001 - the view must not hide the cell's own exception
                pass
        return handled


class _SummaryView:
    """What the cell shows at the end: the console summary, as text (the full page: display `prof.report`)."""

    def __init__(self, report: Report):
        self.report = report

    def __repr__(self) -> str:
        return self.report.summary_text()

    def _repr_html_(self) -> str:
        from html import escape
        return f"<pre class=\"ptxla-perf-summary\">{escape(self.report.summary_text())}</pre>"


def profile(backend: str | None = None, *, report_path: str | None = None, display: bool = True,
            progress: bool | None = None, port: int | None = None, **session_kwargs: Any) -> Profile:
    """Profile the code in a `with` block: `with ptxla_perf.profile() as prof: train()`; then `prof.report`.

    backend: "torch_xla" | "jax" | None (from what the caller's namespace imported); report_path: write the
    report JSON (and report.html) there (None: nothing is written); display: show the summary when the block ends
    (in a kernel as rich output, else on stderr); progress: a step counter (default: in a kernel); port: a
    profiler server (None: none). Other keywords go to `Session` (attribution, max_warmup, guard, roofline,
    sample_hz, tensorboard_dir, ...). A KeyboardInterrupt or crash inside the block still builds the report
    (status interrupted / crashed), then goes on."""
    return Profile(backend, report_path=report_path, display=display, progress=progress, port=port,
                   **session_kwargs)
