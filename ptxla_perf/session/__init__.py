"""A profiling session: backend adapter + profiler server + signals + report, for one training run.

    with Session(report_path="report.json") as session:
        train()                      # every torch_xla.sync() is a step boundary

Ctrl-C / SIGTERM stop the run at the next step boundary and still write the report; a crash in the user's code
writes it too, then the exception goes on.

What the steps feed (the user's callbacks, the capture window, the steps file, the progress line, the periodic
flush) are step sinks (sinks.py): one list, `sinks`, fed at every boundary (boundary.py) and closed in `finish`.

Nothing here touches the runtime before the user's code does: the profiler server, the rank and the console
owner are settled at the first step boundary, where the runtime is known to be up (a script that calls
`torch_xla.launch` or `jax.distributed.initialize` must find it untouched). Children spawned by the script get
sessions of their own (spawn.py); the parent then writes the merged report (merge.py).
"""
from __future__ import annotations

import contextlib
import dataclasses
import datetime as _dt
import os
import signal
import socket
import sys
import threading
import time
from typing import Any, Callable

from ..analysis import roofline
from .. import spawn
from ..backends.base import Adapter, Capabilities
from ..config import DEFAULT_PORT, MAX_WARMUP
from ..model.faults import FAULTS, guarded
from ..rules.iteration import Analysis, Finding, analyze
from .guard import Guard
from ..rules.memory import RULES as MEMORY_RULES  # memory_growth, missing_donation (rules/memory.py)
from ..model.outcome import Outcome, RunStopped, SessionError, call, outcome
from ..analysis.fold import Folded
from ..model.records import StepRecord
from ..report.assemble import environment
from .data_charge import DataCharge
from ..backends.sampler import StackSampler
from ..model.training_thread import TRAINING
from .capture_window import CaptureWindow
from ..report.retention import Retention
from .steps_file import StepsFile
from . import sinks as _sinks
from .sinks import StepSink
from ..report.outputs import OutputConfig, ReportOutput, RunFacts, device_memory, minimal_report, report_of, sections_of
from ..trace.ownership import publish
from .boundary import BoundaryPath
from ..trace.section import TraceSection

__all__ = ["Session", "RunStopped", "SessionError", "open_session"]


# Profiler servers by port, kept for the life of the process: torch_xla's server stops when its object is
# collected (pytorch/xla#7841), and a Hydra -m sweep runs several sessions in one process on the same port.
_SERVERS: dict[tuple[int, str], Any] = {}


def process_index() -> int:
    """The rank from the launcher's environment: a fallback until the runtime itself says (first boundary)."""
    for var in ("RANK", "PJRT_LOCAL_PROCESS_RANK", "LOCAL_RANK", "JAX_PROCESS_ID"):
        if os.environ.get(var, "").isdigit():
            return int(os.environ[var])
    return 0


def check_port(port: int) -> None:
    if not 0 < port < 65536:
        raise SessionError(f"profiler port {port} is out of range (1-65535)")
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("0.0.0.0", port))
        except OSError:
            raise SessionError(f"profiler port {port} is already in use; pass another port (or turn the server off: "
                               "the profiler server)") from None


def _roofline_cfg(cfg: dict | None) -> dict[str, Any]:
    """`peak_tflops` / `peak_gbps` overrides (null = from the device): positive numbers, or a SessionError."""
    cfg = dict(cfg or {})
    for key in ("peak_tflops", "peak_gbps", "device_memory_gb", "model_flops_per_step"):
        v = cfg.get(key)
        if v is None:
            continue
        try:
            ok = float(v) > 0 and not isinstance(v, bool)
        except (TypeError, ValueError):
            ok = False
        if not ok:
            raise SessionError(f"roofline {key} must be a positive number (or null), not {v!r}")
        cfg[key] = float(v)
    return cfg


def free_port(port: int, fallback: bool, notes: list[str]) -> int:
    """The port asked for; a default port that is taken (a second job, a notebook) gives way to the next free one
    (`fallback`), said in `notes`. A port the user chose fails with a one-line error."""
    try:
        check_port(port)
        return port
    except SessionError:
        if not fallback:
            raise
    for other in range(port + 1, min(port + 50, 65535)):
        try:
            check_port(other)
        except SessionError:
            continue
        notes.append(f"profiler port {port} was in use: the server is on port {other}")
        return other
    raise SessionError(f"profiler ports {port}-{port + 49} are all in use; pass a free port (or turn the "
                       "server off)")


def _h2d_bytes(adapter: Adapter) -> int | None:
    try:
        return adapter.host_to_device_bytes()
    except Exception:  # noqa: BLE001 - a whole-run figure; the report goes out without it
        return None


def _plain(cfg: Any) -> Any:
    """A typed config (config.py) as the plain dict the adapter, the guard and a child's plan take."""
    return dataclasses.asdict(cfg) if dataclasses.is_dataclass(cfg) and not isinstance(cfg, type) else cfg


def make_adapter(backend: str, attribution: dict | None) -> Adapter:
    if backend == "torch_xla":
        from ..backends.torch_xla import TorchXlaAdapter  # the framework: imported only for its backend
        return TorchXlaAdapter(attribution)
    if backend == "jax":
        try:
            from ..backends.jax import JaxAdapter  # the framework: imported only for its backend
        except ImportError as exc:
            raise SessionError(f"the JAX backend is not available: {exc}") from None
        return JaxAdapter(attribution)
    raise SessionError(f"unknown backend {backend!r} (torch_xla or jax)")


def check_options(*, server_off: str, port: int | None, port_fallback: bool = False) -> None:
    """What a session opened later (at the framework's import: session/on_import.py) would fail on, checked before
    the program runs: a port the user chose that is taken (a default port gives way when the session starts)."""
    if port is None or port_fallback:
        return
    try:
        check_port(int(port))
    except SessionError as exc:
        raise SessionError(str(exc).replace("turn the server off", f"turn the server off: {server_off}")) from None


def open_session(backend: str, *, server_off: str, **options: Any) -> "Session":
    """Make and start a session (the runner's and `profile`'s one way in). A set-up problem is a SessionError
    whose message says how to turn the profiler server off in the caller's own terms (`server_off`)."""
    try:
        return Session(backend, **options).start()
    except SessionError as exc:
        raise SessionError(str(exc).replace("turn the server off", f"turn the server off: {server_off}")) from None


class Session(BoundaryPath):
    def __init__(self, backend: str = "torch_xla", *, report_path: str | None = "ptxla_perf_report.json",
                 port: int | None = DEFAULT_PORT, run: dict[str, Any] | None = None, attribution: Any = None,
                 max_warmup: int = MAX_WARMUP, guard: Any = "default", progress_every_s: float | None = 10.0,
                 flush_every_s: float | None = 30.0, console: bool = True, handle_signals: bool = True,
                 rank: int | None = None, rank_suffix: bool = False, summary: bool = True,
                 tensorboard_dir: str | None = None, roofline: Any = None, port_fallback: bool = False,
                 sample_hz: float = 100.0, retention: Any = None, steps_file: str | None = None):
        """`attribution`, `guard` and `roofline` are the typed configs of config.py (AttributionConfig,
        GuardConfig, RooflineConfig) or dicts of their fields; guard None turns it off, "default" keeps it on.
        `retention`: which steps a long run's report keeps (retention.Retention or a dict of its fields; None: the
        defaults); `steps_file`: stream every step's record to this JSON-lines file (steps_file.py)."""
        run_info = {"kind": "api", "argv": list(sys.argv), **(run or {})}
        self.facts = RunFacts(backend, str(run_info.get("run_id") or ""),
                              process_index() if rank is None else int(rank), "", run_info)
        self.out = OutputConfig(report_path, rank_suffix, console, summary, tensorboard_dir, steps_file)
        self.retention = Retention.of(_plain(retention))  # which steps a long run's report keeps (retention.py)
        self._rows: list | None = None  # the last report's StepRows (every iteration): its scalars
        self.port = port
        self.port_fallback = port_fallback  # `port` is a default: a taken one gives way to the next free one
        self.max_warmup = max_warmup
        self.progress_every_s = progress_every_s
        self.flush_every_s = flush_every_s
        self._rank_known = rank is not None  # else asked of the runtime at the first boundary
        self.handle_signals = handle_signals
        self.adapter = make_adapter(backend, _plain(attribution))
        self.caps = Capabilities.of(self.adapter)  # its optional members, asked once
        guard = _plain(guard)
        self.guard_cfg = guard  # as given: children spawned by the script get the same
        self.roofline_cfg = _roofline_cfg(_plain(roofline))  # peak overrides (peaks.py); checked here
        self.guard = Guard(None if guard is None else ({} if guard == "default" else dict(guard)),
                           self.adapter.runaway)
        self.steps: list[StepRecord] = []  # the step boundaries as the adapter saw them, the latest ones in a long
        #                                   run (the older ones are in _folded: fold.py); iterations: analysis()
        self._folded: Folded | None = None
        self._fold_next = 0  # boundary_path._fold: the boundaries held before the next fold is tried
        self._boundary_count = 0
        self.extra: dict[str, Any] = {}
        self.extra_findings: list[Finding] = []
        self.profiler: dict[str, Any] = {"server_port": None, "address": None}
        self._server = None  # kept alive for the whole run: torch_xla's server stops when collected
        self.server_port: int | None = None  # the profiler server to start at the first boundary
        self._up = False  # the first boundary has been seen: the runtime is initialised
        self.child_reports: list[str] = []  # reports of children started by other means: finish() merges them
        self._on_stop: list[Callable[[int], None]] = []  # told of a signal (the follower forwards it)
        self._data_wait: float | None = None  # cumulative data_wait() time; None until it is used
        self._data_wait_mark = 0.0
        self.follower: spawn.Follower | None = None  # following the children the script spawns (spawn.py)
        self.plan: spawn.ChildPlan | None = None  # what a child's session takes (start)
        self._step_info: dict[str, Any] = {}
        if self.roofline_cfg.get("model_flops_per_step"):  # --model-flops-per-step: every step's model FLOPs
            self._step_info["model_flops"] = float(self.roofline_cfg["model_flops_per_step"])
        self._stop: RunStopped | None = None
        self._old_handlers: dict[int, Any] = {}
        self._finished: dict[str, Any] | None = None
        self.tail: StepRecord | None = None
        self.trace: TraceSection | None = None  # a capture's analysis (ptxla_perf.trace), merged into the report
        self._capture: CaptureWindow | None = None  # the step window this session owns, closed in finish
        self.output = ReportOutput(self.out, self.say)  # the report, its page, TensorBoard scalars, the summary
        self.sample_hz = sample_hz  # the main thread's stack sampler (sampler.py); 0: off
        self.sampler: StackSampler | None = None
        self._data_charge = DataCharge()  # the sampled data time, given to the steps it fell in
        self._steps_file: StepsFile | None = None
        self._flush: _sinks.Flush | None = None
        self.sinks: list[StepSink] = self._output_sinks()  # every output the boundaries feed (sinks.py)
        self._added = 0  # the sinks added (add_sink): the first ones in `sinks`, before the session's own
        self._stages: list[tuple[str, Callable[[StepRecord], None]]] = []  # the boundary path (_on_boundary),
        #                                                                     set by start
        self._faults_mark = FAULTS.mark()  # our own failures from here on are this session's (faults.py)

    # --- the run's facts, read by the session's users ------------------------------------------------------
    @property
    def backend(self) -> str:
        return self.facts.backend

    @property
    def rank(self) -> int:
        return self.facts.rank

    @property
    def run_id(self) -> str:
        return self.facts.run_id

    @property
    def report_path(self) -> str | None:
        return self.out.report_path

    @property
    def console(self) -> bool:
        """Whether this process prints: asked for, and rank 0."""
        return self.out.prints(self.facts.rank)

    def report_file(self) -> str | None:
        """Where this process's report goes (REPORT.rankN.json for a rank other than an unsuffixed 0)."""
        return self.out.path(self.facts.rank)

    # --- public API -------------------------------------------------------------------------------
    def start(self) -> "Session":
        try:
            port = None if self.port is None else int(self.port)
        except (TypeError, ValueError):
            raise SessionError(f"profiler port must be a number from 1 to 65535 or null, not {self.port!r}") from None
        if port is not None and (port, self.backend) not in _SERVERS:
            port = free_port(port, self.port_fallback, self.adapter.notes)  # a plain socket bind: no runtime
        self.server_port = port
        info = dict(self.facts.info)
        run_id = self.facts.run_id
        if not run_id:  # a run id every process of the run shares
            run_id, info["run_id_source"] = spawn.new_run_id()
        self.facts = dataclasses.replace(self.facts, run_id=run_id, info=info, started_at=_dt.datetime.now(
            _dt.timezone.utc).isoformat(timespec="seconds"))
        if self.handle_signals and threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                if signal.getsignal(sig) is signal.SIG_IGN:  # the program ignores it (nohup, a background job of
                    continue  # a script): the profiled one does too, as the plain run would
                self._old_handlers[sig] = signal.signal(sig, self._on_signal)
        self.plan = spawn.plan_of(self.facts, self.out, port=port, attribution=self.adapter.cfg,
                                  max_warmup=self.max_warmup, guard=self.guard_cfg)  # what a child's session takes
        # children spawned through the backend's launcher get sessions of their own (none without a report)
        self.follower = spawn.Follower(self.plan if self.report_path else None, self.adapter, type(self))
        self.on_stop(self.follower.forward_stop)
        scalars = self.output.open_scalars(self.rank, self.facts.started_at)
        if scalars is not None:
            self.profiler["scalars"] = scalars
        guarded("start.training_thread", TRAINING.reset)  # the thread that starts the session, until a boundary
        if self.sample_hz and self.sample_hz > 0:
            codes = self.caps.sampler_codes
            self.sampler = StackSampler(codes() if codes else None, 1.0 / float(self.sample_hz)).start()
        self._stages = self._boundary_stages()
        self._faults_mark = FAULTS.mark()
        FAULTS.say = self.say
        guarded("adapter.start", self.adapter.start, self._on_boundary)  # failed: the program runs unmeasured
        return self

    def _runtime_up(self) -> None:
        """First boundary: the user's code has initialised the runtime, so now ask it for the rank and start
        the profiler server (both would initialise it, which must not happen before the script does)."""
        self._up = True
        if not self._rank_known:
            rank = self.adapter.process_index()
            if rank is not None and (rank or not self.rank):  # a runtime that says 0 where the launcher says
                self.facts = dataclasses.replace(self.facts, rank=rank)  # otherwise (torchrun + xla on the CPU:
                # one-process worlds) is not the run's
        port = self.server_port
        if port is None:
            return
        try:
            if (port, self.backend) not in _SERVERS:
                _SERVERS[(port, self.backend)] = self.adapter.start_server(port)
            self._server = _SERVERS[(port, self.backend)]
        except Exception as exc:  # never break the user's step for the server (e.g. a child's port taken)
            self.adapter.notes.append(f"profiler server on port {port} not started: {str(exc).splitlines()[0]}")
            return
        self.profiler = {"server_port": port, "address": f"{socket.gethostname()}:{port}"}
        publish(port, self.run_id, dict(self.facts.info))  # so `capture --service` can record whose capture it is
        self.say(f"ptxla_perf: profiler server at localhost:{port} - TensorBoard > Profile > "
                 f"Capture Profile, or: python -m ptxla_perf capture --service localhost:{port}")

    def set_step_info(self, *, samples: int | None = None, tokens: int | None = None,
                      phase: str | None = None, model_flops: float | None = None) -> None:
        """Sticky per-step facts from a recipe (batch size, tokens, train/eval) for throughput and labels;
        `model_flops`: the model's FLOPs per step (6·N·tokens for a transformer) for model-FLOPs MFU."""
        self._step_info.update({k: v for k, v in (("samples", samples), ("tokens", tokens), ("phase", phase),
                                                  ("model_flops", model_flops)) if v is not None})

    def add_step_callback(self, fn: Callable[[StepRecord], None], close: Callable[[], None] | None = None) -> None:
        """`fn(record)` at every step boundary, `close()` at finish: a step sink of two functions."""
        self.add_sink(_sinks.Callback(fn, close, self.say))

    def add_sink(self, sink: StepSink) -> None:
        """A step sink (sinks.StepSink: `name`, `on_step(record)`, `close()`): fed every boundary from now on, in
        the order added and before the session's own outputs (steps file, progress, flush), closed at finish."""
        self.sinks.insert(self._added, sink)
        self._added += 1
        if self._stages:  # started: the boundary path takes it from the next boundary
            self._stages = self._boundary_stages()

    def _output_sinks(self) -> list[StepSink]:
        """The session's own outputs of the steps, in the order they are fed: the steps file, the progress line,
        the periodic report flush; one that is off is not made."""
        out: list[StepSink] = []
        if self.out.steps_file:  # named when it opens, at the first boundary: the rank is known by then
            self._steps_file = StepsFile(lambda: self.out.path(self.rank, self.out.steps_file))
            out.append(self._steps_file)
        if self.progress_every_s:
            out.append(_sinks.Progress(self.progress_every_s, self.say))
        if self.flush_every_s and self.report_path:
            self._flush = _sinks.Flush(self.flush_every_s, self._write_running)
            out.append(self._flush)
        return out

    def _write_running(self) -> None:
        """The periodic flush's report (sinks.Flush): the steps so far, the run still `running`."""
        self.output.write(self.report(Outcome("running", None, None)), self.rank, final=False, rows=self._rows)
        self._rows = None

    def _close_sinks(self) -> None:
        """Every sink closed once, in order, after the adapter's last boundary: one that fails is a profiler error
        (`finish.<name>`) and the others still close, the report still goes out."""
        for sink in self.sinks:
            guarded(f"finish.{sink.name}", sink.close)

    @contextlib.contextmanager
    def data_wait(self):
        """Time spent waiting for input data (`with session.data_wait(): batch = next(it)`): the step's
        `data_wait_s`, and the phase a straggler is found in when collectives make every rank's step as long."""
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self._data_wait = (self._data_wait or 0.0) + time.perf_counter() - t0

    def request_stop(self, reason: str) -> None:
        """Stop the run at the next step boundary (e.g. a recipe's own guard)."""
        self._stop = self._stop or RunStopped(None, reason)

    def pending_stop(self) -> RunStopped | None:
        """A stop requested (signal, guard) and not raised yet: a parent that only waits for its children has no
        step boundary to raise it at."""
        return self._stop

    def open_capture(self, logdir: str, start_step: int, num_steps: int, *, analyze: bool = True) -> None:
        """Trace the steps [start_step, start_step + num_steps) into `logdir` (profiler.capture.*): the session owns
        the window (session/capture_window.py), closes it in `finish` (also on Ctrl-C or a crash) and, with `analyze`, makes
        its analysis the report's `trace` section (else only `capture_analysis()` analyzes it). One per session."""
        if self._capture is not None:
            raise SessionError("a capture window is already open for this session")
        self._capture = CaptureWindow(logdir, start_step, num_steps, self.backend, analyze)
        self.add_sink(_sinks.Capture(self._capture.on_step, self._end_capture))

    @property
    def has_capture(self) -> bool:
        return self._capture is not None

    def capture_analysis(self) -> TraceSection | None:
        """Close the capture window (idempotent) and analyze it, once: recipes that read the trace and the report's
        `trace` section share one analysis. None when there was no capture (the reason is in `profiler.captures`)."""
        if self._capture is None:
            return None
        trace = self._capture.close(self.profiler.setdefault("captures", []), self.say, self.analysis,
                                    self.adapter.notes)
        if trace is not None and self._capture.into_report:
            self.trace = trace  # the report's `trace` section (and its verdicts) come from this analysis
        return trace

    def _end_capture(self) -> None:
        """Close the capture window (idempotent): analysed into the report's `trace` section, or only recorded
        under `profiler.captures`."""
        if self._capture.into_report:
            self.capture_analysis()
        else:
            self._capture.close_unanalysed(self.profiler.setdefault("captures", []))

    def on_stop(self, hook: Callable[[int], None]) -> None:
        """Tell `hook(signum)` when a stop signal arrives (spawn.py forwards it to the children)."""
        self._on_stop.append(hook)

    @property
    def finished(self) -> bool:
        return self._finished is not None

    def add_finding(self, finding: Finding) -> None:
        self.extra_findings.append(finding)

    def say(self, msg: str) -> None:
        if self.console:
            print(msg, file=sys.stderr, flush=True)

    def finish(self, status: str = "completed", exit_code: int | None = 0, stop_reason: str | None = None
               ) -> dict[str, Any]:
        if self._finished is not None:
            return self._finished
        if self._capture is not None:  # by hand, before the sampler and the adapter stop: as it always was
            guarded("finish.capture", self._end_capture)
        if self.sampler is not None:
            guarded("finish.sampler", self.sampler.stop)
        self.tail = guarded("adapter.stop", self.adapter.stop)  # may still give the last boundary (JAX)
        self._close_sinks()  # after that last boundary: every output has had every step
        self._release()
        end = Outcome(status, exit_code, stop_reason)
        report = guarded("report", self.report, end)
        if report is not None and self.follower and not self.steps:  # a parent that only spawned: its children's
            report, self._rows = guarded("report.merge", self.follower.merged, report, self.child_reports) or report, None
        if report is None:  # assembling failed: the run's facts and our failures, still written
            report = minimal_report(self.facts, end, FAULTS.since(self._faults_mark))
        self._finished = report
        self.output.write(report, self.rank, final=True, faults=lambda: FAULTS.since(self._faults_mark),
                          rows=self._rows)
        self._rows = None  # every iteration's row: only the scalars needed them
        return report

    def _release(self) -> None:
        """Give back what start took from the process: the signal handlers, the launcher's patch."""
        for sig, handler in self._old_handlers.items():
            signal.signal(sig, handler)
        self._old_handlers.clear()
        if self.follower is not None:
            guarded("finish.unfollow", self.follower.unfollow)

    @property
    def ran(self) -> bool:
        """Whether the program has run work on this session's backend: a step boundary, or the adapter says so."""
        return self._boundary_count > 0 or bool(self.caps.ran is not None and guarded("adapter.ran", self.caps.ran))

    def discard(self) -> None:
        """Undo `start` before the program ran anything on this backend (`ran`), writing nothing: `profile` saw the
        program import the framework that is its backend after this one's (session/on_import.py)."""
        if self._finished is not None:
            return
        if self.sampler is not None:
            guarded("finish.sampler", self.sampler.stop)
        guarded("adapter.stop", self.adapter.stop)
        self._release()
        self._finished = {}

    def run(self, body: Callable[[], Any], on_end: Callable[[Outcome, BaseException | None], None] | None = None
            ) -> tuple[Outcome, BaseException | None]:
        """Run `body()` inside this session and finish it: the one run-and-finish path of the runner and
        `profile`. What `body` raises is caught and returned with the run's outcome (outcome.py), so the caller
        decides what goes on (re-raise a crash, exit with the code); `on_end(outcome, exc)` runs before the
        report is written (the user's own traceback prints before the summary)."""
        _, exc = call(body)  # the script's own end, whatever it is: the report is written all the same
        return self.end(exc, on_end)

    def end(self, exc: BaseException | None, on_end: Callable[[Outcome, BaseException | None], None] | None = None
            ) -> tuple[Outcome, BaseException | None]:
        """Finish the session with what the run raised (None: it completed); Session.run's path, and the context
        manager's."""
        if isinstance(exc, RunStopped):
            exc = self.pending_stop() or exc  # a spawned child's stop coming back: the parent's own signal
        end = outcome(exc)
        if on_end is not None:
            on_end(end, exc)
        self.finish(end.status, end.exit_code, end.reason)
        return end, exc

    def write_interim(self, status: str, exit_code: int | None, reason: str | None) -> None:
        """Write the report of the steps so far without finishing (hooks stay): a stopped child that may never
        reach another boundary (spawn.py)."""
        if self.report_path:
            self.output.write(self.report(Outcome(status, exit_code, reason)), self.rank, final=False,
                              scalars=False)

    def report(self, end: Outcome) -> dict[str, Any]:
        """The report of the boundaries so far (session_report.report_of), `end` being how the run ended so far
        (`running` at a periodic flush)."""
        final = end.status != "running"
        if self.caps.settle is not None:  # measurements the adapter completes in batches (torch_xla's device times)
            guarded("adapter.settle", self.caps.settle, final=final)
        env = environment(self.adapter.environment())
        device = device_memory(self.caps, env, self.roofline_cfg)  # the capacity, once: memory_growth and the section
        analysis = self.analysis(end.status, device.capacity)
        sinks = roofline.sinks(self.extra_findings + analysis.findings + (self.trace.findings if self.trace else []))
        sections = sections_of(analysis, self.adapter, self.caps, env, self.trace, sinks, self.roofline_cfg,
                               final, device)
        self._rows = analysis.figures.rows()  # every iteration: the TensorBoard scalars', where steps[] is trimmed
        return report_of(analysis, self.facts, sections, end=end, adapter=self.adapter, env=env, steps=self.steps,
                         tail=self.tail, extra_findings=self.extra_findings, profiler=self.profiler,
                         extra=self.extra, trace=self.trace, faults=FAULTS.since(self._faults_mark),
                         rows=self._rows, retention=self.retention,
                         steps_file=self._steps_file.path if self._steps_file else None)

    def analysis(self, status: str | None = None, capacity: dict[str, Any] | None = None) -> Analysis:
        """The analysis of the boundaries so far (iterations, compile classes, findings): what the report says.
        A run that crashed before its first step gets no `no_steps` finding: the crash is the story. `capacity`:
        the device's memory as the memory section knows it (memory.capacity), for memory_growth's rating."""
        return analyze(self.steps, advice=self.adapter.advice, max_warmup=self.max_warmup, capacity=capacity,
                       expect_steps=self.facts.kind != "trace" and status != "crashed", tail=self.tail,
                       rules=(*self.adapter.rules, *MEMORY_RULES),
                       host_to_device_bytes=_h2d_bytes(self.adapter) if self.steps else None,
                       attribution=self.adapter.cfg.get("mode") != "off", folded=self._folded)

    def __enter__(self) -> "Session":
        return self.start()

    def __exit__(self, exc_type, exc, tb) -> bool:
        self.end(exc)
        return isinstance(exc, RunStopped) and exc.signum is None  # a guard stop is handled; the rest goes on

    def _on_signal(self, signum, frame) -> None:
        if self._stop is not None and self._stop.signum:
            signal.signal(signum, signal.SIG_DFL)
            raise KeyboardInterrupt  # second signal: stop now
        self.stop_on_signal(signum)
        self.say(f"ptxla_perf: {signal.Signals(signum).name}: stopping at the next step boundary and writing the "
                 "report (again to stop now)")
        for hook in self._on_stop:
            hook(signum)

    def stop_on_signal(self, signum: int) -> None:
        """Stop at the next boundary as if `signum` had arrived here (a spawned child told by its parent)."""
        if self._stop is None or not self._stop.signum:
            self._stop = RunStopped(signum, f"{signal.Signals(signum).name} received")
