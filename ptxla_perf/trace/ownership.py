"""Does a capture belong to a report's run? `analyze --report` merges a trace's findings into a report; a capture of
another run (another script, an earlier run) would put findings there that contradict the report's own (an
`input_bound` for a loop that loads no data). What the two record to tell: the report's `profiler.captures` (the
windows its session traced), its run's `started_at`/`ended_at`, run id and host; the capture's profiling start and
stop times (the XSpace's `Task Environment` plane, epoch ns; the files' modification time where that is missing)
and its hosts; and, for a capture `ptxla_perf capture` took from a local job's profiler server, the run id of the
session that served it (the session publishes it per port, `capture` records it beside the xplane)."""
from __future__ import annotations

import json
import os
import re
import socket
import tempfile
from datetime import datetime, timezone
from pathlib import Path

from .section import TraceSection

SLACK_S = 2.0  # the report's times are whole seconds; a capture is written just after it stops
RECORD = "ptxla_perf_run.json"  # beside a capture's xplanes: which run's server it came from
_LOCAL = re.compile(r"(localhost|127\.0\.0\.1|\[?::1\]?)(_\d+)?")  # a host name that names no machine


def _registry(port: int) -> str:
    uid = os.getuid() if hasattr(os, "getuid") else 0
    return os.path.join(tempfile.gettempdir(), f"ptxla_perf-servers-{uid}", f"{int(port)}.json")


def publish(port: int, run_id: str, run: dict) -> None:
    """Say which run serves the profiler on this port (each session using the server, a sweep's later jobs too), so
    that `capture --service localhost:PORT` can record whose capture it is. Best effort: never fails the run."""
    if not run_id:
        return
    entry = {"run_id": run_id, "pid": os.getpid(), "script": run.get("script"), "recipe": run.get("recipe"),
             "host": socket.gethostname()}
    try:
        path = _registry(port)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.{os.getpid()}"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(entry, f)
        os.replace(tmp, path)
    except OSError:
        pass


def _alive(pid) -> bool:
    try:
        os.kill(int(pid), 0)
    except (OSError, ValueError, TypeError):
        return False
    return True


def record(run_folder, services: list[tuple[str, int]]) -> None:
    """After a capture: write which runs served it (local services whose session published itself and still
    runs) into the capture's run folder. Nothing is written when none is known."""
    here = {"localhost", "127.0.0.1", "::1", socket.gethostname()}
    found = []
    for host, port in services:
        if host not in here:
            continue
        try:
            with open(_registry(port), encoding="utf-8") as f:
                entry = json.load(f)
        except (OSError, ValueError):
            continue
        if isinstance(entry, dict) and _alive(entry.get("pid")):
            found.append({**entry, "service": f"{host}:{port}"})
    if found:
        try:
            with open(os.path.join(str(run_folder), RECORD), "w", encoding="utf-8") as f:
                json.dump({"runs": found}, f, indent=1)
        except OSError:
            pass


def recorded(files: list[str]) -> list[dict]:
    """The runs `record` wrote beside these capture files."""
    for folder in dict.fromkeys(os.path.dirname(os.path.abspath(f)) for f in files):
        try:
            with open(os.path.join(folder, RECORD), encoding="utf-8") as f:
                runs = json.load(f).get("runs")
        except (OSError, ValueError, AttributeError):
            continue
        return [r for r in runs or [] if isinstance(r, dict)]
    return []


def capture_times(files: list[str]) -> tuple[float, float] | None:
    """(start, stop) of a capture in epoch seconds: the profiler's own record, else the files' modification times
    (a copied capture loses those: then there is nothing to tell, and None)."""
    from .events import _stat_value  # the trace stack is heavy (protobuf, numpy): only to read a capture
    from .xplane_pb import parse_xspace

    lo = hi = None
    for f in files:
        if not str(f).endswith(".xplane.pb"):
            continue
        try:
            space = parse_xspace(Path(f).read_bytes())
        except Exception:  # noqa: BLE001 - the analysis already read it; a second read failing tells nothing
            continue
        for plane in space.planes:
            if plane.name != "Task Environment":
                continue
            names = {k: v.name for k, v in plane.stat_metadata.items()}
            vals = {names.get(s.metadata_id): _stat_value(s, names) for s in plane.stats}
            start, stop = vals.get("profile_start_time"), vals.get("profile_stop_time")
            if start and stop:
                lo = min(lo if lo is not None else float("inf"), int(start) / 1e9)
                hi = max(hi if hi is not None else 0.0, int(stop) / 1e9)
    return (lo, hi) if lo is not None else None


def _epoch(stamp) -> float | None:
    if not isinstance(stamp, str):
        return None
    try:
        t = datetime.fromisoformat(stamp)
    except ValueError:
        return None
    return (t if t.tzinfo else t.replace(tzinfo=timezone.utc)).timestamp()


def _clock(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.abspath(a) == os.path.abspath(b)


def mismatch(report: dict, trace: TraceSection) -> str | None:
    """Why the capture analysed in `trace` is not of the report's run, or None when it is (or nothing tells)."""
    source = trace.source
    files = [str(f) for f in source.files or [source.path] if f]
    prof = report.get("profiler") if isinstance(report.get("profiler"), dict) else {}
    for cap in prof.get("captures") or []:  # a window this run's session traced: its own
        if isinstance(cap, dict) and cap.get("path") and any(_same_file(cap["path"], f) for f in files):
            return None
    run = report.get("run") if isinstance(report.get("run"), dict) else {}
    if run.get("kind") == "trace":  # a report analyze wrote from a capture alone: no run to contradict
        return None
    what = run.get("script") or run.get("recipe") or "?"
    ident = f"run {run.get('run_id')} of {what}" if run.get("run_id") else f"the run of {what}"
    env = report.get("environment") if isinstance(report.get("environment"), dict) else {}
    hosts = {p.get("host") for p in report.get("processes") or [] if isinstance(p, dict)} | {env.get("hostname")}
    hosts.discard(None)
    served = recorded(files)
    if served and run.get("run_id"):
        if any(r.get("run_id") == run.get("run_id") for r in served):
            return None
        r = served[0]
        return (f"the capture is of run {r.get('run_id')} of {r.get('script') or r.get('recipe') or '?'} (its "
                f"profiler server {r.get('service')}), the report of {ident}")
    cap_hosts = {h for h in source.hosts if not _LOCAL.fullmatch(h)}
    if hosts and cap_hosts and not hosts & cap_hosts:
        return (f"the capture is of host(s) {', '.join(sorted(cap_hosts))}, the report's run ({ident}) ran on "
                f"{', '.join(sorted(hosts))}")
    started, ended = _epoch(run.get("started_at")), _epoch(run.get("ended_at"))
    if started is None:
        return None
    if ended is None or run.get("status") == "running":
        ended = float("inf")  # still going (a periodic flush): any later capture may be of it
    span = capture_times(files)
    if span is None:
        mtimes = [os.path.getmtime(f) for f in files if os.path.exists(f)]
        if not mtimes:
            return None
        span = (min(mtimes) - (trace.window.profile_ms or 0) / 1e3, max(mtimes))
    if span[1] < started - SLACK_S or span[0] > ended + SLACK_S:
        until = "" if ended == float("inf") else f" to {_clock(ended)[11:]}"
        return (f"the capture was taken at {_clock(span[0])}, outside the report's run ({ident}, "
                f"{_clock(started)}{until})")
    return None
