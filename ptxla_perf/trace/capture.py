"""Profile capture: on demand from a running job's profiler server, or in-process for a window of steps.

Both write TensorBoard's standard layout, `LOGDIR/plugins/profile/<run>/<host>.xplane.pb`, so
`tensorboard --logdir LOGDIR` (profile plugin), `xprof LOGDIR` and `python -m ptxla_perf analyze LOGDIR` read it.

`capture()` is what TensorBoard's "Capture Profile" button does (it calls the same xprof client), with clear
outcomes instead of upstream's: nothing listening -> CaptureError at once; a server that answers but records no
events -> CaptureError saying the job must be running steps during the window; never minutes of silent retries.
See docs/capture.md.
"""
from __future__ import annotations

import contextlib
import os
import re
import socket
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from ..runner.which_backend import detect_backend

PROFILE_SUBDIR = Path("plugins") / "profile"


class CaptureError(RuntimeError):
    """A capture that could not be made; the message is one line, meant for the user."""


@dataclass
class CaptureResult:
    path: Path  # the .xplane.pb written; the run folder when several hosts were captured
    run: str  # the run folder's name under plugins/profile
    logdir: Path
    duration_ms: int
    size_bytes: int
    seconds: float  # wall time of the capture call
    files: list[Path] | None = None  # one .xplane.pb per host


# ---------------------------------------------------------------------------------------------- addresses

def parse_services(service_addr: str) -> list[tuple[str, int]]:
    """'HOST:PORT,HOST:PORT,...' (XProf captures several hosts at once) -> [(host, port), ...]."""
    parts = [p for p in (service_addr or "").split(",") if p.strip()]
    if not parts:
        raise ValueError(f"expected HOST:PORT, got {service_addr!r}")
    out = [parse_service_addr(p) for p in parts]
    if len(set(out)) != len(out):
        raise ValueError(f"an address is listed twice in {service_addr!r}")
    return out


def parse_service_addr(service_addr: str) -> tuple[str, int]:
    """'HOST:PORT', 'grpc://HOST:PORT', '[::1]:PORT' or a bare 'PORT' (localhost) -> (host, port)."""
    addr = (service_addr or "").strip()
    addr = addr.removeprefix("grpc://")
    if "," in addr:
        raise ValueError(f"one address at a time, got {service_addr!r}")
    if re.fullmatch(r"\d+", addr):
        host, port = "localhost", addr
    else:
        m = re.fullmatch(r"\[([^\]]+)\]:(\d+)", addr) or re.fullmatch(r"([^:\s]+):(\d+)", addr)
        if not m:
            raise ValueError(f"expected HOST:PORT, got {service_addr!r}")
        host, port = m.group(1), m.group(2)
    port_i = int(port)
    if not 0 < port_i < 65536:
        raise ValueError(f"port out of range in {service_addr!r}")
    return host, port_i


def check_listening(host: str, port: int, timeout_s: float = 2.0) -> None:
    """One TCP connect with a short timeout; CaptureError at once when nothing answers."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return
    except socket.gaierror as exc:
        raise CaptureError(f"cannot resolve host {host!r} of {host}:{port} ({exc.strerror or exc})") from None
    except (socket.timeout, TimeoutError):
        why = f"no answer within {timeout_s:g} s"
    except ConnectionRefusedError:
        why = "connection refused"
    except OSError as exc:
        why = exc.strerror or str(exc)
    raise CaptureError(
        f"nothing is listening at {host}:{port} ({why}); start the job's profiler server there "
        f"(torch_xla.debug.profiler.start_server(PORT), jax.profiler.start_server(PORT), or a ptxla_perf session "
        f"with a profiler port) or fix the address")


# ---------------------------------------------------------------------------------------------- helpers

def _runs(logdir: Path) -> dict[Path, float]:
    root = logdir / PROFILE_SUBDIR
    if not root.is_dir():
        return {}
    return {p: p.stat().st_mtime for p in root.iterdir() if p.is_dir()}


def _xplanes(run_dir: Path) -> list[Path]:
    return sorted(run_dir.glob("*.xplane.pb"), key=lambda p: p.stat().st_mtime)


@contextlib.contextmanager
def _client_output_to(path: str | None):
    """Send fds 1 and 2 (where the C++ profiler client prints and logs) to a file for the duration; no-op when
    path is None."""
    if path is None:
        yield
        return
    import sys

    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for x in (*saved, fd):
            os.close(x)


def count_trace_events(xplane: Path) -> int:
    """Events in an .xplane.pb (all planes, all lines)."""
    from .xplane_pb import parse_xspace  # heavy (protobuf, numpy): only once a capture is written

    space = parse_xspace(xplane.read_bytes())
    return sum(len(line.events) for plane in space.planes for line in plane.lines)


def _remove_empty_run(run_dir: Path) -> None:
    for f in run_dir.iterdir():
        if f.is_file() and f.name.endswith((".xplane.pb", ".trace.json.gz")):
            f.unlink()
    with contextlib.suppress(OSError):
        run_dir.rmdir()


_NO_EVENTS_ADVICE = ("the job must be running steps during the capture window: capture while it trains, "
                     "with a longer --duration-ms, or start the capture later (after compilation/warm-up)")


# ---------------------------------------------------------------------------------------------- capture

def capture(service_addr: str, logdir: str | os.PathLike = "profiles", duration_ms: int = 2000,
            host_tracer_level: int = 2, device_tracer_level: int = 1, attempts: int = 1, *,
            python_tracer_level: int = 0, delay_ms: int = 0, connect_timeout_s: float = 2.0,
            grace_s: float = 30.0, quiet: bool = True) -> CaptureResult:
    """Capture `duration_ms` of a running job's profile from its profiler server at `service_addr`.

    Writes `logdir/plugins/profile/<run>/<host>_<port>.xplane.pb` and returns where. Raises CaptureError with a
    one-line message: nothing listening (at once, after a TCP connect of `connect_timeout_s`); the server answered
    but no events were recorded (the empty run folder upstream leaves behind is removed); the server did not
    answer within duration + `grace_s` per attempt. `quiet` keeps the C++ client's output off the terminal.
    """
    if duration_ms <= 0:
        raise ValueError("duration_ms must be > 0")
    if attempts < 1:
        raise ValueError("attempts must be >= 1")
    for name, level in (("host_tracer_level", host_tracer_level), ("device_tracer_level", device_tracer_level),
                        ("python_tracer_level", python_tracer_level)):
        if not 0 <= int(level) <= 3:
            raise ValueError(f"{name} must be 0..3, got {level}")
    services = parse_services(service_addr)
    for host, port in services:
        check_listening(host, port, connect_timeout_s)
    host, port = services[0]

    try:
        from xprof.convert import _pywrap_profiler_plugin as client  # the client TensorBoard's button uses
    except ModuleNotFoundError:  # an optional part (extra [capture])
        raise CaptureError("capture needs xprof, not installed here: pip install 'ptxla_perf[capture]'") from None

    logdir = Path(logdir).resolve()
    logdir.mkdir(parents=True, exist_ok=True)
    before = _runs(logdir)
    options = {"host_tracer_level": int(host_tracer_level), "device_tracer_level": int(device_tracer_level),
               "python_tracer_level": int(python_tracer_level), "delay_ms": int(delay_ms)}
    addr = ",".join(f"[{h}]:{p}" if ":" in h else f"{h}:{p}" for h, p in services)
    limit = attempts * (duration_ms / 1000.0 + delay_ms / 1000.0 + grace_s)
    err, seconds, client_log = _trace(client, addr, logdir, int(duration_ms), int(attempts), options, limit, quiet,
                                      f"{host}:{port}")
    new_runs = [p for p in _runs(logdir) if p not in before]
    if err is not None:
        for run_dir in new_runs:
            _remove_empty_run(run_dir)
        raise _client_error(err, client_log, f"{host}:{port}", duration_ms)
    return _written(logdir, new_runs, services, seconds, int(duration_ms))


def _trace(client, addr: str, logdir: Path, duration_ms: int, attempts: int, options: dict, limit: float, quiet: bool,
           where: str) -> tuple[BaseException | None, float, str]:
    """Run the xprof client (in a thread, so that a server that never answers costs `limit` seconds, not more):
    what it raised, how long it took, and its own output when `quiet` kept that off the terminal."""
    outcome: dict = {}

    def _call():
        try:
            client.trace(addr, str(logdir), None, True, duration_ms, attempts, options)
        except Exception as exc:  # noqa: BLE001 - reported by the caller
            outcome["error"] = exc

    log = tempfile.NamedTemporaryFile(prefix="ptxla_perf_capture_", suffix=".log", delete=False) if quiet else None
    if log:
        log.close()
    t0 = time.monotonic()
    try:
        with _client_output_to(log.name if log else None):
            worker = threading.Thread(target=_call, name="ptxla_perf-capture", daemon=True)
            worker.start()
            worker.join(limit)
        seconds = time.monotonic() - t0
        client_log = Path(log.name).read_text(errors="replace") if log else ""
    finally:
        if log:
            with contextlib.suppress(OSError):
                os.unlink(log.name)
    if worker.is_alive():
        raise CaptureError(f"the server at {where} accepted the connection but returned no profile within "
                           f"{limit:.0f} s; is it a profiler server (torch_xla/jax start_server)?")
    return outcome.get("error"), seconds, client_log


def _client_error(err: BaseException, client_log: str, where: str, duration_ms: int) -> CaptureError:
    """What the client's failure means, in one line."""
    msg = str(err)
    if "failed to connect" in client_log.lower() or "failed to connect" in msg.lower():
        m = re.search(r"Failed (?:parsing|to connect)[^\n]*", client_log)
        detail = f" ({m.group(0).strip()})" if m else ""
        return CaptureError(f"{where} is listening but is not a profiler server{detail}")
    if "no trace event" in msg.lower():
        return CaptureError(f"the profiler server at {where} answered but recorded no trace events in "
                            f"{duration_ms} ms: {_NO_EVENTS_ADVICE}")
    return CaptureError(f"capture from {where} failed: {msg.splitlines()[0] if msg else type(err).__name__}")


def _written(logdir: Path, new_runs: list[Path], services: list[tuple[str, int]], seconds: float,
             duration_ms: int) -> CaptureResult:
    """The profile the client wrote (one .xplane.pb, or one per host), checked to hold trace events."""
    host, port = services[0]
    candidates = [x for run_dir in new_runs for x in _xplanes(run_dir)]
    if not candidates:  # the client may reuse a run folder named by the second; take the newest xplane
        root = logdir / PROFILE_SUBDIR
        candidates = [x for x in root.glob("*/*.xplane.pb") if x.stat().st_mtime >= time.time() - seconds - 1]
    if not candidates:
        raise CaptureError(f"the capture from {host}:{port} reported success but wrote no .xplane.pb under "
                           f"{logdir / PROFILE_SUBDIR}")
    path = max(candidates, key=lambda p: p.stat().st_mtime)
    if len(services) > 1:  # one run folder, one .xplane.pb per host
        where = ", ".join(f"{h}:{p}" for h, p in services)
        files = sorted(x for x in _xplanes(path.parent))
        empty = [x.name for x in files if count_trace_events(x) == 0]
        if len(files) < len(services) or len(empty) == len(files):
            raise CaptureError(f"the capture from {where} wrote {len(files) - len(empty)} of {len(services)} "
                               f"host profiles with trace events: {_NO_EVENTS_ADVICE}")
        return CaptureResult(path=path.parent, run=path.parent.name, logdir=logdir, duration_ms=duration_ms,
                             size_bytes=sum(x.stat().st_size for x in files), seconds=seconds, files=files)
    if count_trace_events(path) == 0:
        _remove_empty_run(path.parent)
        raise CaptureError(f"the profiler server at {host}:{port} answered but recorded no trace events in "
                           f"{duration_ms} ms: {_NO_EVENTS_ADVICE}")
    return CaptureResult(path=path, run=path.parent.name, logdir=logdir, duration_ms=duration_ms,
                         size_bytes=path.stat().st_size, seconds=seconds, files=[path])


# ---------------------------------------------------------------------------------------------- step window

def _detect_backend() -> str:
    backend = detect_backend()
    if backend is None:
        raise ValueError("backend not given and neither torch_xla nor jax is imported")
    return backend


class StepWindowCapture:
    """In-process trace of a window of steps: starts after step `start_step - 1` ends (after pending device work
    is done, so the window holds whole steps) and stops after `num_steps` steps.

    Use: `window = StepWindowCapture(logdir, start_step=5, num_steps=3)`; call `window.on_step_end(i)` after each
    step (e.g. `session.add_step_callback(window.on_step_end)`); `window.close()` at the end (also on Ctrl-C: it
    stops a trace still open and keeps what was captured). Writes `logdir/plugins/profile/<run>/<host>.xplane.pb`.
    Step indices are 0-based; `start_step=0` starts the trace at construction (`start()`), before step 0.
    """

    def __init__(self, logdir: str | os.PathLike, start_step: int, num_steps: int, backend: str | None = None,
                 *, sync_outputs=None, tail_steps: int = 0):
        if start_step is None or num_steps is None:
            raise ValueError("start_step and num_steps are required (None means: no window)")
        if int(start_step) < 0 or int(num_steps) < 1:
            raise ValueError(f"need start_step >= 0 and num_steps >= 1, got {start_step}, {num_steps}")
        self.logdir = Path(logdir).resolve()
        self.start_step = int(start_step)
        self.num_steps = int(num_steps)
        self.backend = backend or _detect_backend()
        if self.backend not in ("torch_xla", "jax"):
            raise ValueError(f"backend must be torch_xla or jax, got {self.backend!r}")
        self.sync_outputs = sync_outputs  # jax: callable returning arrays to block on before start/stop
        # boundaries to wait before stopping: 1 when on_step_end runs inside the step's own sync (a session
        # callback runs inside StepTrace's exit, before its annotation closes): the last step stays whole
        self.tail_steps = int(tail_steps)
        self.active = False
        self.done = False
        self.steps_captured = 0
        self.path: Path | None = None
        self.error: str | None = None
        self._before: dict[Path, float] = {}
        self._lock = threading.Lock()
        if self.start_step == 0:
            self.start()

    @classmethod
    def from_config(cls, cfg, logdir, backend: str | None = None):
        """`profiler.capture.start_step` / `num_steps` (null = off) -> a window or None."""
        cap = None
        try:
            cap = cfg["profiler"]["capture"] if "profiler" in cfg else cfg.get("capture")
        except (KeyError, TypeError, AttributeError):
            cap = None
        if not cap:
            return None
        start, num = cap.get("start_step"), cap.get("num_steps")
        if start is None or num is None:
            return None
        return cls(logdir, int(start), int(num), backend)

    # -- backend hooks
    def _wait_device(self) -> None:
        if self.backend == "torch_xla":
            import torch_xla.core.xla_model as xm

            xm.wait_device_ops()
        else:
            import jax

            if self.sync_outputs is not None:
                jax.block_until_ready(self.sync_outputs())
            jax.effects_barrier()

    def _start_trace(self) -> None:
        if self.backend == "torch_xla":
            import torch_xla.debug.profiler as xp

            xp.start_trace(str(self.logdir))
        else:
            import jax

            jax.profiler.start_trace(str(self.logdir))

    def _stop_trace(self) -> None:
        if self.backend == "torch_xla":
            import torch_xla.debug.profiler as xp

            xp.stop_trace()
        else:
            import jax

            jax.profiler.stop_trace()

    # -- public
    def start(self) -> None:
        with self._lock:
            if self.active or self.done:
                return
            self.logdir.mkdir(parents=True, exist_ok=True)
            self._before = _runs(self.logdir)
            self._wait_device()
            try:
                self._start_trace()
            except RuntimeError as exc:  # another trace is already running in this process
                self.done = True
                self.error = f"step-window capture not started: {exc}"
                return
            self.active = True

    def stop(self) -> Path | None:
        with self._lock:
            if not self.active:
                return self.path
            try:
                self._wait_device()
            finally:
                self._stop_trace()
                self.active = False
                self.done = True
            new = [x for run_dir in _runs(self.logdir) if run_dir not in self._before for x in _xplanes(run_dir)]
            if not new:
                new = sorted((self.logdir / PROFILE_SUBDIR).glob("*/*.xplane.pb"), key=lambda p: p.stat().st_mtime)
            self.path = new[-1] if new else None
            return self.path

    def on_step_end(self, step_index: int, *_args, **_kwargs) -> None:
        """Call after step `step_index` (0-based) has ended."""
        if self.done:
            return
        if not self.active:
            if step_index == self.start_step - 1:
                self.start()
            elif step_index >= self.start_step:  # started late (callback added after start_step): start now
                self.start()
                self._late_start = step_index + 1
            return
        self.steps_captured = min(self.steps_captured + 1, self.num_steps)
        first = getattr(self, "_late_start", self.start_step)
        if step_index >= first + self.num_steps - 1 + self.tail_steps:
            self.stop()

    def close(self) -> Path | None:
        """Stop a trace still open (keeps what was captured); returns the xplane path or None."""
        return self.stop()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    @property
    def first_step(self) -> int:
        """The first step (boundary index) whose work the trace holds whole."""
        return getattr(self, "_late_start", self.start_step)

    def to_json(self) -> dict:
        return {"kind": "step_window", "start_step": self.start_step, "num_steps": self.num_steps,
                "first_step": self.first_step,
                "steps_captured": self.steps_captured, "path": str(self.path) if self.path else None,
                "run": self.path.parent.name if self.path else None, "error": self.error}
