"""TensorBoard for real: `tensorboard --logdir` on a loopback port with a capture made here, opened in headless
Chromium; the profile plugin must list the run and render a tool page. Screenshots go to artifacts/."""
from __future__ import annotations

import gzip
import json
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from trace_helpers import ROOT, child_env, free_port, stop

# the JAX capture TensorBoard serves is test_analyze.py's (conftest.jax_window_capture): one xdist worker
pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("jax_capture")]

CHROME_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                "--disable-component-update", "--no-first-run", "--disable-sync", "--disable-quic",
                "--window-size=1400,1000", "--virtual-time-budget=20000"]
ARTIFACTS = ROOT / "artifacts"


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    pytest.fail("headless Chromium is not installed: run `apt-get update && apt-get install -y chromium` "
                "(Debian; .ci/run installs it), then rerun the browser tests", pytrace=False)


def _get(url: str, timeout=10):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        data = r.read()
        if r.headers.get("Content-Encoding") == "gzip":  # the profile plugin gzips its JSON
            data = gzip.decompress(data)
        return data.decode("utf-8", "replace")


def _chrome(chrome: str, profile: Path, *args, timeout=120) -> subprocess.CompletedProcess:
    return subprocess.run([chrome, *CHROME_FLAGS, f"--user-data-dir={profile}", *args], capture_output=True,
                          text=True, timeout=timeout)


@pytest.fixture(scope="module")
def tensorboard(tmp_path_factory, jax_window_capture):
    chrome = _chromium()
    logdir = tmp_path_factory.mktemp("tb")  # LOGDIR/plugins/profile/<run>/<host>.xplane.pb, as the capture wrote it
    xplane = logdir / "plugins" / "profile" / jax_window_capture.parent.name / jax_window_capture.name
    xplane.parent.mkdir(parents=True)
    shutil.copy(jax_window_capture, xplane)
    port = free_port()
    tb_exe = Path(sys.executable).with_name("tensorboard")
    cmd = [str(tb_exe)] if tb_exe.exists() else [sys.executable, "-m", "tensorboard.main"]
    proc = subprocess.Popen([*cmd, "--logdir", str(logdir), "--host", "127.0.0.1", "--port", str(port)],
                            env=child_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 90
        while True:
            try:
                _get(base + "/data/plugins_listing", timeout=2)
                break
            except OSError:
                if time.time() > deadline or proc.poll() is not None:
                    raise AssertionError(f"tensorboard did not come up on {base} (rc={proc.poll()})")
                time.sleep(0.5)
        yield {"base": base, "run": xplane.parent.name, "chrome": chrome, "tmp": tmp_path_factory.mktemp("chrome")}
    finally:
        stop(proc)


def test_profile_plugin_lists_run(tensorboard):
    listing = json.loads(_get(tensorboard["base"] + "/data/plugins_listing"))
    assert listing["profile"]["enabled"] is True
    runs = json.loads(_get(tensorboard["base"] + "/data/plugin/profile/runs"))
    assert tensorboard["run"] in runs


def test_profile_plugin_renders_in_chromium(tensorboard):
    chrome, tmp = tensorboard["chrome"], tensorboard["tmp"]
    # the plugin's own page (TensorBoard shows it in an iframe): the DOM after its JavaScript ran
    dom = _chrome(chrome, tmp / "profile-dom", "--dump-dom", tensorboard["base"] + "/data/plugin/profile/index.html")
    html = dom.stdout
    assert tensorboard["run"] in html, f"run not listed; chromium stderr: {dom.stderr[-1500:]}"
    assert "Overview" in html and "Performance Summary" in html and "Step-time" in html  # a rendered tool page
    # TensorBoard itself, profile tab: keep a screenshot as the test artifact
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "tensorboard_profile.png"
    shot.unlink(missing_ok=True)
    res = _chrome(chrome, tmp / "tb-shot", f"--screenshot={shot}", tensorboard["base"] + "/#profile")
    assert shot.exists() and shot.stat().st_size > 10_000, res.stderr[-1500:]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
