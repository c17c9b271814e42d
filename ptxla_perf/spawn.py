"""Following spawned children: each process that trains gets its own session and writes `REPORT.rankN.json`;
the parent that only spawned writes the merged report at `REPORT` (docs/multiprocess.md). This module is the
parent's side: the run id, the children's plan, the launcher patch, the stop forwarding and the merge. The child's
side (the plan's type, its session, `ChildTarget`) is spawn_child.py, below the backends; its public names are
re-exported here (`ptxla_perf.spawn.child_session`, docs/api.md).

The mechanism survives the spawn start method without touching the environment: the backend's launcher is
patched in the parent (backends/torch_xla/spawn.py) so that children receive `ChildTarget(fn, plan)` in place of
the user's `fn`. It is pickled by reference like `fn` itself; in the child it opens a session from the plan
(report path, port, attribution, run id) around the call. A process that starts its workers by other means (a
recipe's `subprocess`, `torchrun`, one host of a pod) opens its session from a plan with `child_session` or runs
`profile` itself, and `merge` joins the reports.

Stopping: the parent's session forwards SIGINT/SIGTERM to its children (as SIGINT); a child turns it into a stop
at its next step boundary (the handler is installed in the child's main thread, where signals arrive), writes
its report and re-raises the stop, which comes back to the parent through the launcher; the parent reports its
own signal.
"""
from __future__ import annotations

import glob
import json
import multiprocessing
import os
import signal
import uuid
from typing import Any, Sequence

from .pods import merge
from .report import assemble as report_mod
from .backends.spawn_child import CHILD_PLAN_VAR, ChildPlan, ChildTarget, child_done, child_main_thread, child_session

RUN_ID_VARS = ("PTXLA_PERF_RUN_ID", "TORCHELASTIC_RUN_ID")


def new_run_id() -> tuple[str, str]:
    """A run id every process of one run shares: from the launcher's environment when it sets one, else new."""
    for var in RUN_ID_VARS:
        if os.environ.get(var):
            return os.environ[var], f"env:{var}"
    return uuid.uuid4().hex[:12], "local"


def plan_of(facts, output, *, port: int | None, attribution: dict[str, Any], max_warmup: int, guard: Any
            ) -> ChildPlan:
    """The plan of a session's children, from its facts (session_report.RunFacts) and output settings."""
    run = {k: v for k, v in facts.info.items()
           if k in ("kind", "script", "recipe", "argv", "backend_choice", "backend_detection")}
    report = os.path.abspath(output.report_path or "ptxla_perf_report.json")
    return ChildPlan(backend=facts.backend, report_path=report, run_id=facts.run_id, port=port, run=run,
                     attribution=dict(attribution), max_warmup=max_warmup, guard=guard, console=output.console,
                     stop_file=f"{os.path.splitext(report)[0]}.{facts.run_id}.{os.getpid()}.stop")


# --- parent side ------------------------------------------------------------------------------------------
class Follower:
    """A parent session's following of its spawned children: the launcher patch, the stop forwarding
    (`forward_stop`, which the session calls on a signal), and the children's reports merged at the end."""

    def __init__(self, plan: ChildPlan | None, adapter, factory=None):
        self.plan = plan
        self.spawned = False  # the script spawned children through the backend's launcher
        self._undo = None
        if plan is None:
            return

        def wrap(fn):
            self.spawned = True
            return ChildTarget(fn, plan, factory)
        self._undo = adapter.follow_spawn(wrap)

    def forward_stop(self, signum: int) -> None:
        if self.plan is not None:
            _forward_stop(signum, self.plan.stop_file)

    def unfollow(self) -> None:
        undo, self._undo = self._undo, None
        if undo:
            undo()
        if self.plan is not None:
            try:
                os.unlink(self.plan.stop_file)
            except OSError:
                pass

    def child_paths(self, named: Sequence[str] = ()) -> list[str]:
        """The reports the children wrote: `named` explicitly (a recipe that starts its own processes), or found
        next to the report by run id."""
        if named:
            return list(named)
        if not self.spawned or self.plan is None:
            return []
        root, ext = os.path.splitext(self.plan.report_path)
        found = []
        for path in sorted(glob.glob(f"{glob.escape(root)}.rank*{ext or '.json'}")):
            try:
                with open(path) as f:
                    if json.load(f).get("run", {}).get("run_id") == self.plan.run_id:
                        found.append(path)
            except (OSError, ValueError):
                continue
        return found

    def merged(self, own: dict[str, Any], named: Sequence[str] = ()) -> dict[str, Any]:
        """The parent's report: its children's merged, with the parent's own run outcome; `own` when there are
        none."""
        paths = self.child_paths(named)
        if not paths:
            return own
        try:
            reports = [report_mod.load(p) for p in paths]
            return merge.merge(reports, paths, outcome_of=own["run"])
        except (OSError, ValueError, merge.MergeError) as exc:
            own.setdefault("run", {}).setdefault("attribution", {}).setdefault("notes", []).append(
                f"children's reports not merged: {exc}")
            return own


def _forward_stop(signum: int, stop_file: str | None = None) -> None:
    """The parent got SIGINT/SIGTERM: each child stops at its next step boundary. Always SIGINT: once
    `jax.distributed.initialize` has run, JAX's preemption notifier owns SIGTERM in the child (a C++ handler
    that only records a preemption notice). A terminal's Ctrl-C may reach the children too; a second signal to a
    child changes nothing. The stop file reaches the children a signal cannot (see _Watch)."""
    if stop_file and multiprocessing.active_children():
        try:
            with open(stop_file, "w") as f:
                f.write(str(signum))
        except OSError:
            pass
    for child in multiprocessing.active_children():
        try:
            os.kill(child.pid, signal.SIGINT)
        except OSError:
            pass
