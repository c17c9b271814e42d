"""The profiler server our session starts (`profile --port N`) answers `capture` from another process and
TensorBoard's own Capture Profile route; the run still writes its report when stopped with SIGTERM."""
from __future__ import annotations

import gzip
import json
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from conftest import cli_env, load_report
from trace_helpers import cli, free_port, stop, xplanes

from ptxla_perf.trace import analyze_trace

JOB = """
import time, torch, torch_xla
import torch_xla.debug.profiler as xp
dev = torch_xla.device()
model = torch.nn.Linear(64, 64).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
end = time.time() + 90
step = 0
while time.time() < end:
    with xp.StepTrace("train_step", step_num=step):
        loss = model(torch.randn(16, 64).to(dev)).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
    step += 1
    if step == 3:
        print("READY", flush=True)
    time.sleep(0.01)
"""


def _get(url: str, timeout: float = 60) -> str:
    with urllib.request.urlopen(url, timeout=timeout) as r:
        data = r.read()
        return (gzip.decompress(data) if r.headers.get("Content-Encoding") == "gzip" else data).decode()


def test_capture_and_tensorboard_against_our_session_server(tmp_path):
    script = tmp_path / "job.py"
    script.write_text(JOB)
    port, tb_port = free_port(), free_port()
    job = subprocess.Popen([sys.executable, "-m", "ptxla_perf", "profile", "--port", str(port), str(script)],
                           cwd=tmp_path, env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    tb = None
    try:
        while "READY" not in (job.stdout.readline() or "READY-EOF"):
            pass
        assert job.poll() is None, job.stderr.read()
        res = cli("capture", "--service", f"localhost:{port}", "--duration-ms", 1500, "--logdir", tmp_path / "cli")
        assert res.returncode == 0, res.stderr[-2000:]
        assert analyze_trace(tmp_path / "cli").step_summary.steps >= 2

        tb_exe = Path(sys.executable).with_name("tensorboard")
        tb = subprocess.Popen([str(tb_exe), "--logdir", str(tmp_path / "tb"), "--host", "127.0.0.1", "--port",
                               str(tb_port)], env=cli_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        base = f"http://127.0.0.1:{tb_port}"
        for _ in range(120):
            try:
                _get(base + "/data/plugins_listing", timeout=2)
                break
            except OSError:
                time.sleep(0.5)
        answer = _get(f"{base}/data/plugin/profile/capture_profile?service_addr=localhost:{port}&duration=1500"
                      "&num_retry=1&host_tracer_level=2&device_tracer_level=1&python_tracer_level=0&delay=0")
        assert "error" not in json.loads(answer) or not json.loads(answer)["error"], answer
        assert xplanes(tmp_path / "tb"), "TensorBoard's Capture Profile wrote no xplane"
    finally:
        if tb is not None:
            stop(tb)
        job.send_signal(signal.SIGTERM)
        try:
            _, err = job.communicate(timeout=60)
        finally:
            job.kill()
    assert job.returncode == 143, err[-2000:]
    assert f"profiler server at localhost:{port}" in err
    report = load_report(tmp_path / "ptxla_perf_report.json")
    assert report["profiler"]["server_port"] == port
    assert report["run"]["status"] == "interrupted" and report["summary"]["steps"] >= 3
