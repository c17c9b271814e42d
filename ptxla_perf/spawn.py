"""Following spawned children: each process that trains gets its own session and writes `REPORT.rankN.json`;
the parent that only spawned writes the merged report at `REPORT` (docs/multiprocess.md).

The mechanism survives the spawn start method without touching the environment: the backend's launcher is
patched in the parent (backends/torch_xla_spawn.py) so that children receive `ChildTarget(fn, plan)` in place of
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
import threading
import time
import uuid
from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

from . import merge, report as report_mod
from .config import MAX_WARMUP
from .outcome import SessionError, call, outcome
RUN_ID_VARS = ("PTXLA_PERF_RUN_ID", "TORCHELASTIC_RUN_ID")
CHILD_PLAN_VAR = "PTXLA_PERF_CHILD_PLAN"  # a plan as JSON, for children started as plain subprocesses


@dataclass
class ChildPlan:
    """What a child needs to open a session like its parent's. Plain data: pickled or sent as JSON."""

    backend: str
    report_path: str  # the parent's report; the child writes REPORT.rankN.json next to it
    run_id: str
    port: int | None = None  # the child's server is on port + local rank
    run: dict[str, Any] = field(default_factory=dict)
    attribution: dict[str, Any] | None = None
    max_warmup: int = MAX_WARMUP
    guard: Any = "default"
    console: bool = True  # rank 0 prints (progress, server address); the parent prints the summary
    stop_file: str | None = None  # created by the parent when it is told to stop (see _Watch)

    def to_json(self) -> str:
        return json.dumps(asdict(self), default=str)

    @classmethod
    def from_json(cls, text: str) -> "ChildPlan":
        return cls(**json.loads(text))


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


# --- child side -------------------------------------------------------------------------------------------
_LOCK = threading.Lock()
_CHILD: list | None = None  # [session, active calls] of this process, when it is a followed child
_STOP: int | None = None  # a stop signal that arrived before this child's session existed


def child_main_thread() -> None:
    """In a child's main thread, before the user's code: a stop signal becomes a stop at the next boundary."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _child_signal)


def _child_signal(signum, frame) -> None:
    global _STOP
    _STOP = _STOP or signum
    if _CHILD is not None:
        _CHILD[0].stop_on_signal(signum)


def child_session(plan: ChildPlan, rank: int | None = None, local_rank: int | None = None, *, factory):
    """Open (once per process) the session of a child that trains; every call must be paired with
    `child_done`. `rank` None: asked of the runtime at the first step boundary. `factory`: the session class
    (session.Session; passed in, so that this module never imports the session that imports it)."""
    global _CHILD
    with _LOCK:
        if _CHILD is None:
            local = local_rank if local_rank is not None else int(os.environ.get("PJRT_LOCAL_PROCESS_RANK") or
                                                                  os.environ.get("LOCAL_RANK") or rank or 0)
            port = plan.port + local if plan.port else None
            kwargs = dict(report_path=plan.report_path,
                          run=dict(plan.run, run_id=plan.run_id, parent_pid=os.getppid(), local_rank=local),
                          attribution=plan.attribution, max_warmup=plan.max_warmup, guard=plan.guard,
                          console=plan.console, handle_signals=False, rank=rank, rank_suffix=True, summary=False)
            try:
                session = factory(plan.backend, port=port, **kwargs).start()
            except SessionError as exc:  # e.g. port + local rank taken: no server, still a report
                session = factory(plan.backend, port=None, **kwargs).start()
                session.adapter.notes.append(f"profiler server not started: {exc}")
            if _STOP:
                session.stop_on_signal(_STOP)
            if plan.stop_file:
                _Watch(session, plan.stop_file).start()
            _CHILD = [session, 0]
        _CHILD[1] += 1
        return _CHILD[0]


def child_done(status: str, code: int | None, reason: str | None = None) -> None:
    """The last call of this process to finish writes its report."""
    global _CHILD
    with _LOCK:
        if _CHILD is None:
            return
        _CHILD[1] -= 1
        if _CHILD[1] > 0:
            return
        session, _CHILD = _CHILD[0], None
    session.finish(status, code, reason)


class _Watch(threading.Thread):
    """Polls the parent's stop file (a stat every 0.2 s, off the step path). A child waiting inside the runtime
    never runs its Python signal handler until the wait ends: when told to stop, it asks for a stop at the next
    boundary, and if the session has not finished `GRACE_S` later it writes the report of the steps so far
    (`interrupted`) from this thread; a boundary reached later still finishes the session and rewrites it. A
    wait that holds the GIL (a JAX rank blocked dispatching into a collective whose peer already stopped) stops
    this thread too: that rank keeps its last periodic flush (`running`), docs/multiprocess.md."""

    GRACE_S = 2.0

    def __init__(self, session, path: str):
        super().__init__(name="ptxla_perf-stop-watch", daemon=True)
        self.session = session
        self.path = path

    def run(self) -> None:
        while not self.session.finished:
            if os.path.exists(self.path):
                break
            time.sleep(0.2)
        else:
            return
        try:
            signum = int(open(self.path).read().strip() or signal.SIGINT)
        except (OSError, ValueError):
            signum = signal.SIGINT
        self.session.stop_on_signal(signum)
        deadline = time.monotonic() + self.GRACE_S
        while not self.session.finished and time.monotonic() < deadline:
            time.sleep(0.05)
        if not self.session.finished:
            try:
                self.session.write_interim("interrupted", 128 + signum,
                                           "stopped by the parent; this process did not reach another step "
                                           "boundary (e.g. waiting in a collective for a peer that stopped)")
            except Exception:
                pass


class ChildTarget:
    """Stands in for the user's spawned function: same call, inside a session of the child's own."""

    def __init__(self, fn, plan: ChildPlan, factory):
        self.fn = fn
        self.plan = plan
        self.factory = factory  # the session class, pickled by reference like fn
        self.__wrapped__ = fn

    def __call__(self, index, *args, **kwargs):
        if threading.current_thread() is threading.main_thread():  # torch.multiprocessing runs fn right here
            child_main_thread()
        child_session(self.plan, rank=index, factory=self.factory)
        result, exc = call(lambda: self.fn(index, *args, **kwargs))  # the path of Session.run
        end = outcome(exc)
        child_done(end.status, end.exit_code, end.reason)
        if exc is not None:
            raise exc
        return result
