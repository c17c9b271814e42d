"""Per-step scalars in TensorBoard (issue 12): a real `tensorboard --logdir` on a loopback port serves our tags
through its HTTP API with one value per step; the runner puts them in <run dir>/tensorboard beside its capture,
so Scalars and Profile show the same run."""
from __future__ import annotations

import gzip
import json
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from conftest import SCRIPTS, cli_env, load_report, run_cli
from ptxla_perf.report.tb_scalars import TAGS, ScalarLog
from trace_helpers import free_port, stop


def _get(url: str, timeout: float = 10):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        data = r.read()
        if r.headers.get("Content-Encoding") == "gzip":  # the profile plugin gzips its JSON
            data = gzip.decompress(data)
        return json.loads(data.decode())


class _TensorBoard:
    def __init__(self, logdir: Path):
        port = free_port()
        exe = Path(sys.executable).with_name("tensorboard")
        cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "tensorboard.main"]
        self.proc = subprocess.Popen([*cmd, "--logdir", str(logdir), "--host", "127.0.0.1", "--port", str(port),
                                      "--reload_interval", "0"], env=cli_env(),
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.base = f"http://127.0.0.1:{port}"
        deadline = time.time() + 90
        while True:
            try:
                _get(self.base + "/data/plugins_listing", timeout=2)
                return
            except OSError:
                if time.time() > deadline or self.proc.poll() is not None:
                    stop(self.proc)
                    raise AssertionError(f"tensorboard did not come up on {self.base} (rc={self.proc.poll()})")
                time.sleep(0.5)

    def tags(self, want: set[str], timeout: float = 60) -> dict:
        """/data/plugin/scalars/tags once TensorBoard has loaded the event files (it reads them in the background)."""
        deadline = time.time() + timeout
        while True:
            tags = _get(self.base + "/data/plugin/scalars/tags")
            if want <= {t for run in tags.values() for t in run} or time.time() > deadline:
                return tags
            time.sleep(0.5)

    def scalars(self, run: str, tag: str) -> list[list[float]]:
        q = urllib.parse.urlencode({"run": run, "tag": tag})
        return _get(f"{self.base}/data/plugin/scalars/scalars?{q}")  # [[wall_time, step, value], ...]


def test_profile_scalars_read_back_through_tensorboard(tmp_path):
    logdir, report = tmp_path / "tb", tmp_path / "report.json"
    proc = run_cli("profile", "--port", "none", "--report", str(report), "--tensorboard", str(logdir),
                   str(SCRIPTS / "item_per_step.py"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rep = load_report(report)
    assert rep["profiler"]["scalars"] == {"logdir": str(logdir), "tags": TAGS}
    steps = rep["steps"]
    tb = _TensorBoard(logdir)
    try:
        tags = tb.tags(set(TAGS) - {"ptxla_perf/eval_step_time_ms", "ptxla_perf/live_mib"})  # live_mib: JAX only
        assert "." in tags, tags  # the logdir itself is the run: the one a capture into it belongs to
        for tag in ("ptxla_perf/step_time_ms", "ptxla_perf/compiles", "ptxla_perf/executions",
                    "ptxla_perf/device_to_host", "ptxla_perf/host_to_device"):
            assert tag in tags["."], tags
            points = tb.scalars(".", tag)
            assert [int(p[1]) for p in points] == [s["index"] for s in steps], tag  # one value per step
        d2h = tb.scalars(".", "ptxla_perf/device_to_host")
        assert [p[2] for p in d2h] == [float(s["host_reads"]) for s in steps]
        # step time as the summary defines it (net of compile); the raw wall time under its own tag
        times = tb.scalars(".", "ptxla_perf/step_time_ms")
        assert [p[2] for p in times] == pytest.approx([s["step_time_s"] * 1e3 for s in steps], rel=1e-5)
        walls = tb.scalars(".", "ptxla_perf/wall_time_ms")
        assert [p[2] for p in walls] == pytest.approx([s["wall_time_s"] * 1e3 for s in steps], rel=1e-5)
    finally:
        stop(tb.proc)


@pytest.mark.xdist_group("mlp_runs")  # the run is shared with test_runner.py (one xdist worker)
def test_runner_scalars_beside_capture(mlp_capture_run):
    proc, out = mlp_capture_run
    rep = load_report(out / "report.json")
    logdir = out / "tensorboard"
    assert rep["profiler"]["scalars"]["logdir"] == str(logdir)
    assert list(logdir.glob("events.out.tfevents.*")) and list(logdir.glob("plugins/profile/*/*.xplane.pb"))
    assert "html:" in proc.stderr and (out / "report.html").exists()
    page = (out / "report.html").read_text()
    assert 'class="band capture"' in page and 'id="capture"' in page  # the window on the timeline, its analysis
    tb = _TensorBoard(logdir)
    try:
        tags = tb.tags({"ptxla_perf/step_time_ms"})
        points = tb.scalars(".", "ptxla_perf/compiles")
        assert [int(p[1]) for p in points] == [s["index"] for s in rep["steps"]]
        deadline = time.time() + 60
        while not (runs := _get(tb.base + "/data/plugin/profile/runs")) and time.time() < deadline:
            time.sleep(0.5)
        assert runs, "the profile plugin lists no capture next to the scalars"
        assert "ptxla_perf/step_time_ms" in tags["."]
    finally:
        stop(tb.proc)


def test_flushes_and_finish_write_each_step_once(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    steps = [{"index": i, "wall_time_s": 0.01 * (i + 1), "compiles": int(i == 0), "executions": 1,
              "device_to_host": {"count": i % 2}, "host_to_device": {"count": 0},
              "phase": "eval" if i == 6 else "train"} for i in range(10)]
    log = ScalarLog(str(tmp_path), "2026-01-01T00:00:00+00:00")
    assert log.write(steps[:4], final=False) == 3  # the last iteration so far may still grow: held back
    assert log.write(steps[:4], final=False) == 0
    assert log.write(steps[:8], final=False) == 4
    assert log.write(steps, final=True) == 3
    ea = EventAccumulator(str(tmp_path))
    ea.Reload()
    assert [e.step for e in ea.Tensors("ptxla_perf/compiles")] == list(range(10))
    assert [e.step for e in ea.Tensors("ptxla_perf/step_time_ms")] == [i for i in range(10) if i != 6]
    assert [e.step for e in ea.Tensors("ptxla_perf/eval_step_time_ms")] == [6]
    walls = [e.wall_time for e in ea.Tensors("ptxla_perf/compiles")]
    assert walls == sorted(walls) and walls[-1] - walls[0] == pytest.approx(sum(s["wall_time_s"] for s in steps[1:]))


def test_session_flushing_every_step_writes_each_step_once(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    code = f"""
import torch, torch_xla
from ptxla_perf.session import Session
dev = torch_xla.device()
w = torch.randn(8, 8, device=dev)
with Session(report_path={str(tmp_path / 'r.json')!r}, port=None, flush_every_s=1e-9,
             tensorboard_dir={str(tmp_path / 'tb')!r}, console=False):
    for _ in range(6):
        w = (w @ w).tanh()
        torch_xla.sync()
"""
    proc = subprocess.run([sys.executable, "-c", code], env=cli_env(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rep = load_report(tmp_path / "r.json")
    ea = EventAccumulator(str(tmp_path / "tb"))
    ea.Reload()
    assert len(list((tmp_path / "tb").glob("events.out.tfevents.*"))) == 1
    for tag in [t for t in TAGS[2:] if not t.endswith("/live_mib")]:  # live_mib: JAX only
        assert [e.step for e in ea.Tensors(tag)] == [s["index"] for s in rep["steps"]], tag


def test_unwritable_logdir_is_a_note_not_a_failure(tmp_path):
    blocker = tmp_path / "tb"
    blocker.write_text("a file where the log directory should go")
    report = tmp_path / "report.json"
    proc = run_cli("profile", "--port", "none", "--report", str(report), "--tensorboard", str(blocker),
                   str(SCRIPTS / "clean_loop.py"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"ptxla_perf: note: no TensorBoard scalars in {blocker}" in proc.stderr
    assert load_report(report)["run"]["status"] == "completed"
