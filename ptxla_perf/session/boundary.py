"""The session's step-boundary path (session/__init__.py): a short list of stages chosen at start, each (rec) -> None,
run at every boundary the adapter reports. A mixin of Session: the stages read and write the run's state there
(the steps, the clock, the stop); each stage is guarded (faults.py), so one that fails leaves the others running."""
from __future__ import annotations

import sys
import time
from typing import Callable

from ..model import faults
from ..model.faults import FAULTS, check, guarded
from ..analysis.fold import Folded
from ..model.outcome import Outcome
from ..model.records import StepRecord
from .steps_file import StepsFile
from ..model.training_thread import TRAINING


FLUSH_SHARE = 0.02  # the most of the run's time the periodic flush may take


class BoundaryPath:
    def _boundary_stages(self) -> list[tuple[str, Callable[[StepRecord], None]]]:
        """The boundary path, chosen once at start, each stage with its fault point's name (made here once, not
        at every boundary): a stage that is off (no sampler, no progress, no flush) is not in the list."""
        stages = [self._number]
        if self.sampler is not None:
            stages.append(self._sampled)
        stages += [self._label, self._keep]
        if self.out.steps_file:
            stages.append(self._stream)
        stages += [self._check_guard, self._tick]
        if self.progress_every_s:
            stages.append(self._progress)
        if self.flush_every_s and self.report_path:
            stages.append(self._flush)
        return [(f"boundary.{stage.__name__.lstrip('_')}", stage) for stage in stages]

    def _on_boundary(self, rec: StepRecord) -> None:
        """Each stage guarded (faults.py): one that fails is a profiler error, and the others still run; a stop
        (guard, signal) is raised here, at the user's step boundary."""
        if not self._up:
            if not TRAINING.settled:  # the thread that calls the first boundary trains (training_thread.py)
                guarded("boundary.training_thread", TRAINING.settle)
            guarded("boundary.runtime_up", self._runtime_up)
            self._up = True
        for where, stage in self._stages:  # faults.guarded, inlined: this loop runs at every step
            try:
                if faults._INJECT:
                    check(where)
                stage(rec)
            except Exception as exc:
                FAULTS.record(where, exc)
        if self._stop is not None:
            stop, self._stop = self._stop, None
            raise stop

    def _number(self, rec: StepRecord) -> None:
        """The boundary's index, and the data_wait() time since the previous one."""
        rec.index = self._boundary_count
        self._boundary_count += 1
        if self._data_wait is not None:
            rec.data_wait_s, self._data_wait_mark = self._data_wait - self._data_wait_mark, self._data_wait

    def _sampled(self, rec: StepRecord) -> None:
        """The lines sampled since the previous boundary, and the data time among them (session/data_charge.py)."""
        if self.sampler.learning:
            self.sampler.learn_loop(sys._getframe(2))  # the frame that called _on_boundary (the adapter's hook)
        self._data_charge.charge(rec, self.sampler)

    def _label(self, rec: StepRecord) -> None:
        """The recipe's sticky step facts (set_step_info)."""
        info = self._step_info
        if info:
            rec.samples = info.get("samples", rec.samples)
            rec.tokens = info.get("tokens", rec.tokens)
            rec.phase = info.get("phase", rec.phase)
            rec.model_flops = info.get("model_flops", rec.model_flops)

    def _keep(self, rec: StepRecord) -> None:
        self.steps.append(rec)
        self._compiles += rec.compiles
        for fn in self._callbacks:
            fn(rec)
        if len(self.steps) >= max(self.retention.fold_after, self._fold_next):
            guarded("boundary.fold", self._fold)

    def _fold(self) -> None:
        """A long run: the iterations of all but the latest `fold_window` boundaries go to the folded part
        (fold.py), which keeps the plain ones as repeat-counted records; the boundaries held stay bounded."""
        if self._folded is None:
            self._folded = Folded(self.retention.fold_records, self.retention.outlier_ratio)
        self.steps = self._folded.take(self.steps, self.retention.fold_window)
        self._fold_next = 2 * len(self.steps)  # where little could fold (one long iteration), not at every boundary

    def _stream(self, rec: StepRecord) -> None:
        """The step's record to the steps file (opened at the first step: the rank is known by then)."""
        if self._steps_file is None:
            self._steps_file = StepsFile(self.out.path(self.rank, self.out.steps_file))
            self._steps_path = self._steps_file.path
        self._steps_file.write(rec)

    def _tick(self, rec: StepRecord) -> None:
        self._clock += rec.wall_time_s  # no clock call of our own per step

    def _progress(self, rec: StepRecord) -> None:
        if self._clock - self._last_progress >= self.progress_every_s:
            self._last_progress = self._clock
            self.say(f"ptxla_perf: step {rec.index}, last {rec.wall_time_s * 1e3:.1f} ms, "
                     f"{self._compiles} compiles so far")

    def _flush(self, rec: StepRecord) -> None:
        """The report of the steps so far, every `flush_every_s` of steps - or less often where writing it takes
        longer than FLUSH_SHARE of that time (a report is written in the training thread: never more than about
        2 % of the run goes to it)."""
        if self._clock - self._last_flush >= self._flush_gap:
            self._last_flush = self._clock
            began = time.perf_counter()
            try:  # a hard kill (SIGKILL, OOM) still leaves the report of the steps so far
                self.output.write(self.report(Outcome("running", None, None)), self.rank, final=False,
                                  rows=self._rows)
                self._rows = None
            except Exception:
                pass
            self._flush_gap = max(self.flush_every_s, (time.perf_counter() - began) / FLUSH_SHARE)

    def _check_guard(self, rec: StepRecord) -> None:
        decision = self.guard.check(rec)
        if decision.warn:
            self.say(decision.warn)
        if decision.stop:
            self.request_stop(decision.stop)

