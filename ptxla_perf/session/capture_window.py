"""A session's step-window capture: the trace of steps [start, start + n) written while the run goes, closed at
the end of the run (also on Ctrl-C or a crash), analysed once and related to the report's steps. The session
owns one of these at most (Session.open_capture); its analysis becomes the report's `trace` section."""
from __future__ import annotations

import os
from typing import Any, Callable

from ..trace.capture import StepWindowCapture
from ..model import fmt
from ..trace.section import TraceSection


def traced_line(first: int, n: int, path, logdir) -> str:
    """The console's confirmation of a capture: which steps (the loop's 0-based numbers) and where the trace is."""
    def rel(p) -> str:
        p = os.path.abspath(p)
        try:
            r = os.path.relpath(p)
        except ValueError:  # another drive
            return p
        return p if r.startswith("..") else r
    steps = fmt.steps(range(first, first + max(1, n)))
    return f"ptxla_perf: traced {steps} into {rel(path)} (tensorboard --logdir {rel(logdir)}: Profile)"


class CaptureWindow:
    def __init__(self, logdir: str, start_step: int, num_steps: int, backend: str, analyze: bool):
        self.window = StepWindowCapture(logdir, int(start_step), int(num_steps), backend, tail_steps=1)
        self.into_report = analyze  # its analysis is the report's trace section (else only the caller's)
        self.done = False
        self.trace: TraceSection | None = None

    def on_step(self, rec) -> None:
        self.window.on_step_end(rec.index)

    def close(self, captures: list[dict], say: Callable[[str], None], analysis: Callable[[], Any],
              notes: list[str]) -> TraceSection | None:
        """Close the window (idempotent) and analyze it, once. `captures`: the report's `profiler.captures`,
        which records the window whatever happened; `analysis()`: the session's analysis, to number the traced
        steps as the report does."""
        if self.done:
            return self.trace
        self.done = True
        path = self.window.close()
        captures.append(self.window.to_json())
        if path is None:
            say(f"ptxla_perf: no capture: {self.window.error or 'the run ended before the capture window'}")
            return None
        say(traced_line(self.window.first_step, self.window.steps_captured, path, self.window.logdir))
        from ..trace import analyze_trace  # heavy (numpy, protobuf): only a session with a capture window
        try:
            trace = analyze_trace(path)
        except Exception as exc:  # the report still goes out without its trace section
            say(f"ptxla_perf: could not analyze {path}: {exc}")
            return None
        self._relate(trace, analysis(), notes)
        self.trace = trace
        return trace

    def close_unanalysed(self, captures: list[dict]) -> None:
        if not self.done:
            self.done = True
            self.window.close()
            captures.append(self.window.to_json())

    def _relate(self, trace: TraceSection, a, notes: list[str]) -> None:
        """Number the window's steps as the report does, keep phases apart, and compare traced with untraced step
        time (trace/relate.py)."""
        from ..trace.relate import boundary_owners, relate  # the trace package: heavy, as above
        first = self.window.first_step
        owners = boundary_owners(a.iterations)
        traced = set(owners[first:first + len(trace.steps)])
        rest = a.figures.steady_its.of(s for s in a.steady if s.index not in traced).stats("step")
        untraced = rest["p50"] if rest else None  # as the summary's step time is taken
        try:
            relate(trace, a.iterations, first, untraced)
        except Exception as exc:  # a diagnostic of a diagnostic: never lose the report for it
            notes.append(f"could not relate the capture to the steps: {exc}")
