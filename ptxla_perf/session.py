"""A profiling session: backend adapter + profiler server + signals + report, for one training run.

    with Session(report_path="report.json") as session:
        train()                      # every torch_xla.sync() is a step boundary

Ctrl-C / SIGTERM stop the run at the next step boundary and still write the report; a crash in the user's code
writes it too, then the exception goes on.

Nothing here touches the runtime before the user's code does: the profiler server, the rank and the console
owner are settled at the first step boundary, where the runtime is known to be up (a script that calls
`torch_xla.launch` or `jax.distributed.initialize` must find it untouched). Children spawned by the script get
sessions of their own (spawn.py); the parent then writes the merged report (merge.py).
"""
from __future__ import annotations

import contextlib
import datetime as _dt
import os
import signal
import socket
import sys
import threading
import time
from typing import Any, Callable

from . import spawn
from .backends.base import Adapter
from .findings import Analysis, Finding, analyze
from .guard import Guard
from .memory_rules import RULES as MEMORY_RULES  # memory_growth, missing_donation (memory_rules.py)
from .outcome import Outcome, RunStopped, SessionError, outcome
from .records import StepRecord
from .sampler import DATA, StackSampler
from .session_report import ReportOutput

__all__ = ["Session", "RunStopped", "SessionError"]


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


def make_adapter(backend: str, attribution: dict | None) -> Adapter:
    if backend == "torch_xla":
        from .backends.torch_xla import TorchXlaAdapter
        return TorchXlaAdapter(attribution)
    if backend == "jax":
        try:
            from .backends.jax import JaxAdapter
        except ImportError as exc:
            raise SessionError(f"the JAX backend is not available: {exc}") from None
        return JaxAdapter(attribution)
    raise SessionError(f"unknown backend {backend!r} (torch_xla or jax)")


class Session:
    def __init__(self, backend: str = "torch_xla", *, report_path: str | None = "ptxla_perf_report.json",
                 port: int | None = 9012, run: dict[str, Any] | None = None, attribution: dict | None = None,
                 max_warmup: int = 5, guard: dict | None | str = "default", progress_every_s: float | None = 10.0,
                 flush_every_s: float | None = 30.0, console: bool = True, handle_signals: bool = True,
                 rank: int | None = None, rank_suffix: bool = False, summary: bool = True,
                 tensorboard_dir: str | None = None, roofline: dict | None = None, port_fallback: bool = False,
                 sample_hz: float = 100.0):
        self.backend = backend
        self.report_path = report_path
        self.port = port
        self.port_fallback = port_fallback  # `port` is a default: a taken one gives way to the next free one
        self.run_info = {"kind": "api", "argv": list(sys.argv), **(run or {})}
        self.max_warmup = max_warmup
        self.progress_every_s = progress_every_s
        self.flush_every_s = flush_every_s
        self.rank = process_index() if rank is None else int(rank)
        self._rank_known = rank is not None  # else asked of the runtime at the first boundary
        self.console_wanted = console  # asked for; `console` is whether this process prints (rank 0)
        self.console = console and self.rank == 0
        self.rank_suffix = rank_suffix  # a spawned child writes REPORT.rankN.json even as rank 0
        self.print_summary = summary
        self.handle_signals = handle_signals
        self.adapter = make_adapter(backend, attribution)
        self.guard_cfg = guard  # as given: children spawned by the script get the same
        self.roofline_cfg = _roofline_cfg(roofline)  # peak overrides (peaks.py); checked here, used at the end
        # guard=None turns it off; "default" (or a dict of overrides) keeps it on (guard.py)
        self.guard = Guard(None if guard is None else ({} if guard == "default" else dict(guard)),
                           self.adapter.runaway)
        self.steps: list[StepRecord] = []  # every step boundary, as the adapter saw it (iterations: analysis())
        self.extra: dict[str, Any] = {}
        self.extra_findings: list[Finding] = []
        self.profiler: dict[str, Any] = {"server_port": None, "address": None}
        self._server = None  # kept alive for the whole run: torch_xla's server stops when collected
        self.server_port: int | None = None  # the profiler server to start at the first boundary
        self._up = False  # the first boundary has been seen: the runtime is initialised
        self.child_reports: list[str] = []  # per-process reports of followed children: finish() merges them
        self.run_id: str = str(self.run_info.get("run_id") or "")
        self._on_stop: list[Callable[[int], None]] = []  # told of a signal (on_stop: spawn.py forwards it)
        self._data_wait: float | None = None  # cumulative data_wait() time; None until it is used
        self._data_wait_mark = 0.0
        self.follower: spawn.Follower | None = None  # following the children the script spawns (spawn.py)
        self._callbacks: list[Callable[[StepRecord], None]] = []
        self._closers: list[Callable[[], None]] = []
        self._step_info: dict[str, Any] = {}
        if self.roofline_cfg.get("model_flops_per_step"):  # --model-flops-per-step: every step's model FLOPs
            self._step_info["model_flops"] = float(self.roofline_cfg["model_flops_per_step"])
        self._stop: RunStopped | None = None
        self._old_handlers: dict[int, Any] = {}
        self.started_at = None
        self._clock = self._last_progress = self._last_flush = 0.0
        self._finished: dict[str, Any] | None = None
        self.tail: StepRecord | None = None
        self.trace: dict[str, Any] | None = None  # a capture's analysis (ptxla_perf.trace), merged into the report
        self._capture = None  # the step-window capture this session owns (open_capture), closed in finish
        self.tensorboard_dir = tensorboard_dir  # per-step scalars go here (tb_scalars.py); None: not written
        self.output = ReportOutput(self)  # report assembly, its page, TensorBoard scalars, the console summary
        self.sample_hz = sample_hz  # the main thread's stack sampler (sampler.py); 0: off
        self.sampler: StackSampler | None = None
        self._sampled_data = 0.0
        self._data_carry = 0.0  # sampled data time not yet given to a step (a sample can span a boundary)

    # --- public API -------------------------------------------------------------------------------
    def start(self) -> "Session":
        try:
            port = None if self.port is None else int(self.port)
        except (TypeError, ValueError):
            raise SessionError(f"profiler port must be a number from 1 to 65535 or null, not {self.port!r}") from None
        if port is not None and (port, self.backend) not in _SERVERS:
            port = self._free_port(port)  # a plain socket bind: no runtime
        self.server_port = port
        self.started_at = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
        if self.handle_signals and threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._old_handlers[sig] = signal.signal(sig, self._on_signal)
        self.follower = spawn.follow(self)  # children the script spawns get sessions of their own
        if self.tensorboard_dir:
            self.profiler["scalars"] = self.output.open_scalars(self.tensorboard_dir, self.rank, self.started_at)
        if self.sample_hz and self.sample_hz > 0:
            codes = getattr(self.adapter, "sampler_codes", None)
            self.sampler = StackSampler(codes() if codes else None, 1.0 / float(self.sample_hz)).start()
        self.adapter.start(self._on_boundary)
        return self

    def _free_port(self, port: int) -> int:
        """The port asked for; a default port that is taken (a second job, a notebook) gives way to the next free
        one (`port_fallback`), said on the console. A port the user chose fails with a one-line error."""
        try:
            check_port(port)
            return port
        except SessionError:
            if not self.port_fallback:
                raise
        for other in range(port + 1, min(port + 50, 65535)):
            try:
                check_port(other)
            except SessionError:
                continue
            self.adapter.notes.append(f"profiler port {port} was in use: the server is on port {other}")
            return other
        raise SessionError(f"profiler ports {port}-{port + 49} are all in use; pass a free port (or turn the "
                           "server off)")

    def _runtime_up(self) -> None:
        """First boundary: the user's code has initialised the runtime, so now ask it for the rank and start
        the profiler server (both would initialise it, which must not happen before the script does)."""
        self._up = True
        if not self._rank_known:
            rank = self.adapter.process_index()
            if rank is not None and (rank or not self.rank):  # a runtime that says 0 where the launcher says
                self.rank = rank  # otherwise (torchrun + xla on the CPU: one-process worlds) is not the run's
            self.console = self.console_wanted and self.rank == 0
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
        from .capture_owner import publish
        publish(port, self.run_id, self.run_info)  # so `capture --service` can record whose capture it is
        self.say(f"ptxla_perf: profiler server at localhost:{port} - TensorBoard > Profile > "
                 f"Capture Profile, or: python -m ptxla_perf capture --service localhost:{port}")

    def set_step_info(self, *, samples: int | None = None, tokens: int | None = None,
                      phase: str | None = None, model_flops: float | None = None) -> None:
        """Sticky per-step facts from a recipe (batch size, tokens, train/eval) for throughput and labels;
        `model_flops`: the model's FLOPs per step (6·N·tokens for a transformer) for model-FLOPs MFU."""
        self._step_info.update({k: v for k, v in (("samples", samples), ("tokens", tokens), ("phase", phase),
                                                  ("model_flops", model_flops)) if v is not None})

    def add_step_callback(self, fn: Callable[[StepRecord], None], close: Callable[[], None] | None = None) -> None:
        self._callbacks.append(fn)
        if close:
            self._closers.append(close)

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
        """Trace the steps [start_step, start_step + num_steps) into `logdir` (profiler.capture.*). The session owns
        the window (session_capture.py): it follows the steps, is closed in `finish` (also on Ctrl-C or a crash),
        and, with `analyze`, its analysis becomes the report's `trace` section (`analyze=False`: only
        `capture_analysis()` analyzes it, for the caller alone). One window per session."""
        if self._capture is not None:
            raise SessionError("a capture window is already open for this session")
        from .session_capture import CaptureWindow
        self._capture = CaptureWindow(logdir, start_step, num_steps, self.backend, analyze)
        self.add_step_callback(self._capture.on_step)

    @property
    def has_capture(self) -> bool:
        return self._capture is not None

    def capture_analysis(self) -> dict[str, Any] | None:
        """Close the capture window (idempotent) and analyze it, once: recipes that read the trace and the report's
        `trace` section share one analysis. None when there was no capture (the reason is in `profiler.captures`)."""
        if self._capture is None:
            return None
        trace = self._capture.close(self.profiler.setdefault("captures", []), self.say, self.analysis,
                                    self.adapter.notes)
        if trace is not None and self._capture.into_report:
            self.trace = trace  # the report's `trace` section (and its verdicts) come from this analysis
        return trace

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
        for close in self._closers:
            try:
                close()
            except Exception as exc:
                self.say(f"ptxla_perf: could not close a step callback: {exc}")
        if self._capture is not None:
            if self._capture.into_report:
                self.capture_analysis()
            else:
                self._capture.close_unanalysed(self.profiler.setdefault("captures", []))
        if self.sampler is not None:
            self.sampler.stop()
        self.tail = self.adapter.stop()
        for sig, handler in self._old_handlers.items():
            signal.signal(sig, handler)
        self._old_handlers.clear()
        if self.follower is not None:
            self.follower.unfollow()
        report = self.output.build(status, exit_code, stop_reason)
        if not self.steps and self.follower is not None:  # a parent that only spawned: the merged report
            report = self.follower.merged(report)
        self._finished = report
        self.output.write(report, final=True)
        return report

    def run(self, body: Callable[[], Any], on_end: Callable[[Outcome, BaseException | None], None] | None = None
            ) -> tuple[Outcome, BaseException | None]:
        """Run `body()` inside this session and finish it: the one run-and-finish path of the runner and
        `profile`. What `body` raises is caught and returned with the run's outcome (outcome.py), so the caller
        decides what goes on (re-raise a crash, exit with the code); `on_end(outcome, exc)` runs before the
        report is written (the user's own traceback prints before the summary)."""
        try:
            body()
            exc = None
        except BaseException as caught:  # the script's own end, whatever it is: the report is written all the same
            exc = caught
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
            self.output.write(self.output.build(status, exit_code, reason), final=False, scalars=False)

    def analysis(self, status: str | None = None) -> Analysis:
        """The analysis of the boundaries so far (iterations, compile classes, findings): what the report says.
        A run that crashed before its first step gets no `no_steps` finding: the crash is the story."""
        return analyze(self.steps, advice=self.adapter.advice, max_warmup=self.max_warmup,
                       expect_steps=self.run_info.get("kind") != "trace" and status != "crashed", tail=self.tail,
                       rules=(*self.adapter.rules, *MEMORY_RULES), host_to_device_bytes=self._h2d_bytes(),
                       attribution=self.adapter.cfg.get("mode") != "off")

    def _h2d_bytes(self) -> int | None:
        try:
            return self.adapter.host_to_device_bytes() if self.steps else None
        except Exception:  # noqa: BLE001 - a whole-run figure; the report goes out without it
            return None

    def __enter__(self) -> "Session":
        return self.start()

    def __exit__(self, exc_type, exc, tb) -> bool:
        end = outcome(exc)
        self.finish(end.status, end.exit_code, end.reason)
        return isinstance(exc, RunStopped) and exc.signum is None  # a guard stop is handled; the rest goes on

    # --- internals --------------------------------------------------------------------------------
    def _on_boundary(self, rec: StepRecord) -> None:
        if not self._up:
            self._runtime_up()
        rec.index = len(self.steps)
        if self._data_wait is not None:
            rec.data_wait_s, self._data_wait_mark = self._data_wait - self._data_wait_mark, self._data_wait
        sampler = self.sampler
        if sampler is not None:  # the lines sampled since the previous boundary, and the data time among them
            if sampler.learning:
                sampler.learn_loop(sys._getframe(1))
            data = sampler.seconds[DATA]
            # a sample charges the interval since the previous one, which can reach into the step before: what
            # does not fit in this step (its wall time less what was measured exactly) goes to the next one
            carry = self._data_carry + data - self._sampled_data
            if carry == 0.0:  # no data time sampled (most boundaries): min(carry, room) is 0.0
                rec.sampled_data_s = 0.0
            else:
                room = max(rec.wall_time_s - rec.compile_time_s - (rec.launch_time_s or 0.0)
                           - (rec.device_wait_s or 0.0) - (rec.device_to_host_time_s or 0.0), 0.0)
                rec.sampled_data_s = min(carry, room)
            self._sampled_data, self._data_carry = data, carry - rec.sampled_data_s
            rec.hot_lines = sampler.take()
        for key, value in self._step_info.items():
            setattr(rec, key, value)
        self.steps.append(rec)
        for fn in self._callbacks:
            fn(rec)
        self._check_guard(rec)
        now = self._clock = self._clock + rec.wall_time_s  # no clock call of our own per step
        if self.progress_every_s and now - self._last_progress >= self.progress_every_s:
            self._last_progress = now
            self.say(f"ptxla_perf: step {rec.index + 1}, last {rec.wall_time_s * 1e3:.1f} ms, "
                     f"{sum(s.compiles for s in self.steps)} compiles so far")
        if self.flush_every_s and self.report_path and now - self._last_flush >= self.flush_every_s:
            self._last_flush = now
            try:  # a hard kill (SIGKILL, OOM) still leaves the report of the steps so far
                self.output.write(self.output.build("running", None, None), final=False)
            except Exception:
                pass
        if self._stop is not None:
            stop, self._stop = self._stop, None
            raise stop

    def _check_guard(self, rec: StepRecord) -> None:
        decision = self.guard.check(rec)
        if decision.warn:
            self.say(decision.warn)
        if decision.stop:
            self.request_stop(decision.stop)

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
