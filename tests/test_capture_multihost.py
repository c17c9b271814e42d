"""`capture --service host1:PORT,host2:PORT`: one run folder with one .xplane.pb per host (two real JAX jobs with
profiler servers stand in for two hosts); `analyze` puts the hosts' step breakdowns side by side."""
from __future__ import annotations

import pytest

from trace_helpers import cli, free_port, start_server_job, stop, xplanes

from ptxla_perf.report.assemble import validate
from ptxla_perf.trace import analyze_trace
from ptxla_perf.trace.section import TraceSection

pytestmark = pytest.mark.slow


def test_capture_two_hosts_into_one_run_and_analyze_side_by_side(tmp_path):
    p1, p2 = free_port(), free_port()
    jobs = [start_server_job("jax_server", p1, 40), start_server_job("jax_server", p2, 40)]
    try:
        res = cli("capture", "--service", f"localhost:{p1},localhost:{p2}", "--duration-ms", 1200,
                  "--logdir", tmp_path)
    finally:
        for job in jobs:
            stop(job)
    assert res.returncode == 0, res.stderr[-2000:]
    files = xplanes(tmp_path)
    assert sorted(f.name for f in files) == sorted([f"localhost_{p1}.xplane.pb", f"localhost_{p2}.xplane.pb"])
    assert len({f.parent for f in files}) == 1  # one run folder
    sec = analyze_trace(tmp_path)
    trace = sec.to_json()
    assert TraceSection.from_json(trace) == sec and sec.per_host == trace["per_host"]
    ph = trace["per_host"]
    assert sorted(h["host"] for h in ph["hosts"]) == sorted([f"localhost_{p1}", f"localhost_{p2}"])
    assert all(h["steps"] >= 3 for h in ph["hosts"])
    assert ph["aligned_steps"] >= 0 and "step_spread_ms" in ph
    report = {"schema": "ptxla_perf.report/1", "backend": "jax", "run": {"kind": "trace", "status": "completed"},
              "environment": {"versions": {}}, "steps": [], "findings": [], "trace": trace,
              "summary": {"steps": 0, "warmup_steps": 0, "step_time_s": None, "compiles": 0, "compile_time_s": 0,
                          "recompiles_after_warmup": 0, "executions_per_step": None,
                          "device_to_host_per_step": None, "host_to_device_per_step": None, "fallback_ops": {}}}
    validate(report)
    out = cli("analyze", str(tmp_path))
    assert out.returncode == 0 and "Hosts side by side" in out.stdout, out.stderr[-2000:]


def test_service_list_errors_are_one_line(tmp_path):
    port = free_port()  # nothing listens there
    res = cli("capture", "--service", f"localhost:{port},localhost:{port}", "--logdir", tmp_path)
    assert res.returncode == 2 and "twice" in res.stderr and res.stderr.strip().count("\n") == 0, res.stderr
    res = cli("capture", "--service", f"localhost:{port},nonsense", "--logdir", tmp_path)
    assert res.returncode == 2 and res.stderr.strip().count("\n") == 0, res.stderr
    res = cli("capture", "--service", f"localhost:{free_port()},localhost:{port}", "--logdir", tmp_path)
    assert res.returncode == 1 and "nothing is listening" in res.stderr, res.stderr
    assert not xplanes(tmp_path)
