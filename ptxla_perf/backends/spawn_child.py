"""The child's side of following spawned processes (spawn.py is the parent's): the plan a child's session is opened
from, the stop handlers of its main thread, its one session per process, and `ChildTarget`, which the backends'
launcher patches hand the children in place of the user's function (docs/multiprocess.md).

Below the backends and the session: the backends' launcher code (backends/torch_xla/spawn.py) imports it, and a
child runs it without the parent's merge and report; the session class comes in as `factory`.
"""
from __future__ import annotations

import json
import os
import signal
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from ..config import MAX_WARMUP
from ..model.outcome import SessionError, call, outcome

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
