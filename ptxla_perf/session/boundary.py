"""The session's step-boundary path (session/__init__.py): a short list of stages chosen at start, each (rec) -> None,
run at every boundary the adapter reports: first the session's own (number, label, keep, guard), then every step
sink's `on_step` (sinks.py: the outputs). A mixin of Session: the stages read and write the run's state there (the
steps, the stop); each stage is guarded (faults.py), so one that fails leaves the others running."""
from __future__ import annotations

import sys
from typing import Callable

from ..model import faults
from ..model.faults import FAULTS, check, guarded
from ..analysis.fold import Folded
from ..model.records import StepRecord
from ..model.training_thread import TRAINING


class BoundaryPath:
    def _boundary_stages(self) -> list[tuple[str, Callable[[StepRecord], None]]]:
        """The boundary path, chosen at start (again when a sink is added later), each stage with its fault point's
        name (made here once, not at every boundary): the session's own stages, then each sink's `on_step` in the
        order of `sinks`; an output that is off (no progress, no flush, no steps file) is not a sink at all."""
        stages = [self._number]
        if self.sampler is not None:
            stages.append(self._sampled)
        stages += [self._label, self._keep, self._check_guard]
        return ([(f"boundary.{stage.__name__.lstrip('_')}", stage) for stage in stages]
                + [(f"boundary.{sink.name}", sink.on_step) for sink in self.sinks])

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
        if len(self.steps) >= max(self.retention.fold_after, self._fold_next):
            guarded("boundary.fold", self._fold)

    def _fold(self) -> None:
        """A long run: the iterations of all but the latest `fold_window` boundaries go to the folded part
        (fold.py), which keeps the plain ones as repeat-counted records; the boundaries held stay bounded."""
        if self._folded is None:
            self._folded = Folded(self.retention.fold_records, self.retention.outlier_ratio)
        self.steps = self._folded.take(self.steps, self.retention.fold_window)
        self._fold_next = 2 * len(self.steps)  # where little could fold (one long iteration), not at every boundary

    def _check_guard(self, rec: StepRecord) -> None:
        decision = self.guard.check(rec)
        if decision.warn:
            self.say(decision.warn)
        if decision.stop:
            self.request_stop(decision.stop)

