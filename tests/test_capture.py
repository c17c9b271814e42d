"""capture against live torch_xla / JAX profiler servers in other processes, a dead port, an idle server, and
in-process step-window capture (torch_xla and JAX)."""
from __future__ import annotations

import socket
import time

import pytest

from trace_helpers import cli, free_port, run_job, start_server_job, stop, xplanes

from ptxla_perf.trace.capture import CaptureError, StepWindowCapture, capture, parse_service_addr
from ptxla_perf.trace import analyze_trace
from ptxla_perf.trace.section import TraceSection


def test_capture_live_torch_xla_job_via_cli(tmp_path):
    port = free_port()
    job = start_server_job("txla_server", port, 60)
    try:
        res = cli("capture", "--service", f"localhost:{port}", "--duration-ms", 1500, "--logdir", tmp_path)
    finally:
        stop(job)
    assert res.returncode == 0, res.stderr[-2000:]
    files = xplanes(tmp_path)
    assert len(files) == 1, res.stdout
    assert files[0].name == f"localhost_{port}.xplane.pb"  # LOGDIR/plugins/profile/<run>/<host>.xplane.pb
    assert files[0].parent.parent.name == "profile" and files[0].parent.parent.parent.name == "plugins"
    assert str(files[0]) in res.stdout
    sec = analyze_trace(tmp_path)
    trace = sec.to_json()
    assert TraceSection.from_json(trace) == sec and sec.step_summary.steps == trace["step_summary"]["steps"]
    assert trace["step_summary"]["steps"] >= 3  # the job ran StepTrace steps during the window
    assert trace["top_ops"]


def test_capture_live_jax_job(tmp_path):
    port = free_port()
    job = start_server_job("jax_server", port, 30)
    try:
        res = capture(f"localhost:{port}", tmp_path, duration_ms=800)
    finally:
        stop(job)
    assert res.path.exists() and res.path.parent.parent == tmp_path.resolve() / "plugins" / "profile"
    assert res.size_bytes > 1000


def test_dead_port_fails_at_once_with_one_line(tmp_path):
    port = free_port()  # bound then released: nothing listens there
    t0 = time.monotonic()
    res = cli("capture", "--service", f"127.0.0.1:{port}", "--logdir", tmp_path, timeout=110)
    elapsed = time.monotonic() - t0
    assert res.returncode == 1
    lines = [l for l in res.stderr.splitlines() if l.strip()]
    assert len(lines) == 1, res.stderr
    assert f"127.0.0.1:{port}" in lines[0] and "nothing is listening" in lines[0]
    # upstream's trace() takes 2+ minutes here; the CLI's own start-up (imports) takes seconds, tens of them on a
    # busy machine: a bound that tells the two apart under load
    assert elapsed < 60, elapsed
    assert not xplanes(tmp_path)


def test_dead_port_api_is_fast():
    port = free_port()
    t0 = time.monotonic()
    with pytest.raises(CaptureError, match=f"nothing is listening at localhost:{port}"):
        capture(f"localhost:{port}", "/nonexistent-never-created", duration_ms=100)
    assert time.monotonic() - t0 < 5


def test_not_a_profiler_server(tmp_path):
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)
    port = srv.getsockname()[1]
    try:
        t0 = time.monotonic()
        with pytest.raises(CaptureError, match=f"127.0.0.1:{port}"):
            capture(f"127.0.0.1:{port}", tmp_path, duration_ms=200, grace_s=2)
        assert time.monotonic() - t0 < 30
    finally:
        srv.close()


def test_idle_server_says_job_must_run_steps(tmp_path):
    port = free_port()
    job = start_server_job("jax_server", port, 30, "idle")
    try:
        with pytest.raises(CaptureError) as exc:
            capture(f"localhost:{port}", tmp_path, duration_ms=300)
    finally:
        stop(job)
    msg = str(exc.value)
    assert "no trace events" in msg and "running steps" in msg and "--duration-ms" in msg
    assert "\n" not in msg
    assert not xplanes(tmp_path)  # the empty run folder upstream leaves behind is removed


def test_bad_service_address_is_a_usage_error(tmp_path):
    res = cli("capture", "--service", "no-port-here", "--logdir", tmp_path)
    assert res.returncode == 2 and "HOST:PORT" in res.stderr
    assert parse_service_addr("grpc://10.0.0.2:8466") == ("10.0.0.2", 8466)
    assert parse_service_addr("9012") == ("localhost", 9012)
    assert parse_service_addr("[::1]:9012") == ("::1", 9012)


def test_step_window_torch_xla(tmp_path):
    out = run_job("txla_window", tmp_path, 2, 2, 6).stdout
    files = xplanes(tmp_path)
    assert len(files) == 1 and f"XPLANE {files[0]} 2" in out
    sec = analyze_trace(files[0])
    trace = sec.to_json()
    assert TraceSection.from_json(trace) == sec and sec.compiles == trace["compiles"]
    assert [s["step"] for s in trace["steps"]] == [2, 3]  # whole steps 2 and 3, nothing else
    assert trace["compiles"] == []  # warm-up compiles are before the window


def test_step_window_jax_close_keeps_partial_capture(tmp_path):
    # num_steps=50 but the loop is interrupted after step 3: close() stops the open trace and keeps it
    out = run_job("jax_window", tmp_path, 1, 50, 10, 3).stdout
    files = xplanes(tmp_path)
    assert len(files) == 1 and f"XPLANE {files[0]} 3" in out
    sec = analyze_trace(files[0])
    trace = sec.to_json()
    assert TraceSection.from_json(trace) == sec and sec.source.backend == "jax"
    assert [s["step"] for s in trace["steps"]] == [1, 2, 3]


def test_step_window_config_and_validation(tmp_path):
    assert StepWindowCapture.from_config({"profiler": {"capture": {"start_step": None, "num_steps": 3}}},
                                         tmp_path, "jax") is None
    w = StepWindowCapture.from_config({"profiler": {"capture": {"start_step": 4, "num_steps": 2}}}, tmp_path, "jax")
    assert (w.start_step, w.num_steps, w.active) == (4, 2, False)
    assert w.close() is None  # nothing started: nothing to stop
    with pytest.raises(ValueError):
        StepWindowCapture(tmp_path, 1, 0, "jax")
