"""The CLI's contract: bad input gets one line and a non-zero exit; Ctrl-C / SIGTERM / crashes keep the report."""
from __future__ import annotations

import signal
import json
import socket
import subprocess
import sys
import time

import pytest

from conftest import ROOT, SCRIPTS, cli_env, default_sigint, load_report, run_cli


def one_line_error(proc) -> str:
    err = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert len(err) == 1 and "Traceback" not in proc.stderr, proc.stderr
    return err[0]


def test_missing_script(tmp_path):
    line = one_line_error(run_cli("profile", str(tmp_path / "nope.py"), cwd=tmp_path))
    assert "no such script" in line and "nope.py" in line


@pytest.mark.parametrize("port", ["abc", "70000", "-3"])
def test_bad_port(tmp_path, port):
    line = one_line_error(run_cli("profile", "--port", port, str(SCRIPTS / "clean_loop.py"), cwd=tmp_path))
    assert "port" in line


def test_port_in_use(tmp_path):
    with socket.socket() as s:
        s.bind(("0.0.0.0", 0))
        s.listen()
        port = s.getsockname()[1]
        line = one_line_error(run_cli("profile", "--port", str(port), str(SCRIPTS / "clean_loop.py"),
                                      cwd=tmp_path))
    assert "already in use" in line and str(port) in line and "--port none" in line and "null" not in line
    assert not (tmp_path / "ptxla_perf_report.json").exists()


def test_default_port_in_use_takes_the_next_free_one(tmp_path):
    """A second job, a sweep or a notebook holds 9012: the default gives way (an explicit --port does not)."""
    import re
    with socket.socket() as s:
        try:
            s.bind(("0.0.0.0", 9012))
            s.listen()
        except OSError:
            pass  # held by another process already: the same situation
        proc = run_cli("profile", "--report", str(tmp_path / "r.json"), str(SCRIPTS / "clean_loop.py"),
                       cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    m = re.search(r"profiler server at localhost:(\d+)", proc.stderr)
    assert m and int(m.group(1)) != 9012, proc.stderr[-2000:]
    notes = json.loads((tmp_path / "r.json").read_text())["run"]["attribution"]["notes"]
    assert any("9012 was in use" in n for n in notes)


def test_unknown_command_and_option(tmp_path):
    assert "invalid choice" in one_line_error(run_cli("frobnicate", cwd=tmp_path))
    assert "unrecognized" in one_line_error(run_cli("profile", "--bogus", "x.py", cwd=tmp_path))


def test_exit_code_and_argv_are_the_scripts(tmp_path):
    script = tmp_path / "exits.py"
    script.write_text("import sys\nimport torch_xla\nprint('ARGS', sys.argv)\nsys.exit(7)\n")
    proc = run_cli("profile", "--port", "none", str(script), "--flag", "value", cwd=tmp_path)
    assert proc.returncode == 7
    assert f"ARGS ['{script}', '--flag', 'value']" in proc.stdout
    report = load_report(tmp_path / "ptxla_perf_report.json")
    assert report["run"]["exit_code"] == 7 and report["run"]["argv"][1:] == ["--flag", "value"]


def test_crash_in_user_code_still_writes_report(tmp_path):
    script = tmp_path / "crash.py"
    script.write_text(
        "import torch, torch_xla\n"
        "dev = torch_xla.device()\n"
        "w = torch.randn(4, 4, device=dev)\n"
        "for step in range(5):\n"
        "    w = (w @ w).tanh()\n"
        "    torch_xla.sync()\n"
        "    if step == 3:\n"
        "        raise RuntimeError('boom at step 3')\n")
    proc = run_cli("profile", "--port", "none", str(script), cwd=tmp_path)
    assert proc.returncode == 1
    assert "RuntimeError: boom at step 3" in proc.stderr  # the user's own traceback is shown
    report = load_report(tmp_path / "ptxla_perf_report.json")
    assert report["run"]["status"] == "crashed" and len(report["steps"]) == 4
    assert "boom" in report["run"]["stop_reason"]


@pytest.mark.parametrize("sig,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_signal_stops_at_step_boundary_and_writes_report(tmp_path, sig, code):
    flag = tmp_path / "started"
    script = tmp_path / "forever.py"
    script.write_text(
        "import pathlib, sys, time, torch, torch_xla\n"
        "dev = torch_xla.device()\n"
        "w = torch.randn(8, 8, device=dev)\n"
        "step = 0\n"
        "while True:\n"
        "    w = (w @ w).tanh()\n"
        "    torch_xla.sync()\n"
        "    step += 1\n"
        "    if step == 3:\n"
        f"        pathlib.Path({str(flag)!r}).write_text('x')\n"
        "    time.sleep(0.02)\n")
    proc = subprocess.Popen([sys.executable, "-m", "ptxla_perf", "profile", "--port", "none", str(script)],
                            cwd=tmp_path, env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, preexec_fn=default_sigint)
    try:
        deadline = time.monotonic() + 120
        while not flag.exists():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "script never reached step 3"
            time.sleep(0.1)
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == code, err[-2000:]
    assert "Traceback" not in err
    report = load_report(tmp_path / "ptxla_perf_report.json")
    assert report["run"]["status"] == "interrupted" and report["run"]["exit_code"] == code
    assert len(report["steps"]) >= 3
    assert signal.Signals(sig).name in report["run"]["stop_reason"]


def test_a_program_started_with_sigint_ignored_keeps_ignoring_it(tmp_path):
    """nohup, or a background job of a script: the program starts with SIGINT ignored and a Ctrl-C does nothing to
    it. Profiled, the same: the session does not install its stop handler over an ignored signal."""
    ready, done, report = tmp_path / "ready", tmp_path / "done", tmp_path / "r.json"
    proc = subprocess.Popen([sys.executable, "-m", "ptxla_perf", "profile", "--port", "none", "--report", str(report),
                             str(SCRIPTS / "ignores_sigint.py"), str(ready), str(done)], cwd=tmp_path, env=cli_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    try:
        deadline = time.monotonic() + 120
        while proc.poll() is None and not ready.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert proc.poll() is None and ready.exists(), proc.communicate()
        proc.send_signal(signal.SIGINT)
        time.sleep(0.5)  # several steps: time enough for a handler to stop the run at a boundary
        done.write_text("x")
        out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 0 and "ended by itself" in out, err[-2000:]
    assert load_report(report)["run"]["status"] == "completed"


def test_help_and_version():
    proc = run_cli("--help")
    assert proc.returncode == 0 and "profile" in proc.stdout
    proc = run_cli("--version")
    assert proc.returncode == 0 and "ptxla_perf" in proc.stdout


def test_every_help_text_is_whole():
    """Descriptions are whole sentences (they had been cut at the docstring's first line: "... inside"), and no
    help shows argparse's escaped "%%"."""
    from ptxla_perf.cli import COMMANDS, build_parser
    parser = build_parser()
    subs = next(a for a in parser._actions if a.dest == "command").choices
    for name in COMMANDS:
        text = subs[name].format_help()
        desc = subs[name].description
        assert desc.rstrip().endswith("."), (name, desc)
        assert "%%" not in text, (name, text)
    assert parser.description.rstrip().endswith(".")


def test_report_file_follows_the_umask(tmp_path):
    """report.json had mode 0600 (mkstemp) beside a 0644 page: unreadable to teammates on shared storage."""
    import os
    import stat
    from ptxla_perf.report import assemble as R
    old = os.umask(0o022)
    try:
        path = R.write(R.build(backend="torch_xla", run={"kind": "api", "status": "completed"},
                               env=R.environment({}), steps=[]), str(tmp_path / "r.json"))
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o644
    assert stat.S_IMODE(os.stat(tmp_path / "r.html").st_mode) == 0o644


def test_ctrl_c_before_the_run_started_is_one_line_and_exit_130(tmp_path):
    """Ctrl-C before any session exists (the script still prepares its data; the session opens when it imports its
    framework) printed a 40-line KeyboardInterrupt traceback. Sent once the script says it is preparing."""
    import signal
    import subprocess
    import sys
    import time
    from conftest import SCRIPTS, cli_env
    ready = tmp_path / "preparing"
    worker = signal.getsignal(signal.SIGINT)
    proc = subprocess.Popen([sys.executable, "-m", "ptxla_perf", "profile", "--port", "none", "--report",
                             str(tmp_path / "r.json"), str(SCRIPTS / "slow_start.py"), str(ready)], cwd=tmp_path,
                            env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=default_sigint)  # as from a terminal (conftest.default_sigint)
    deadline = time.monotonic() + 120
    while proc.poll() is None and not ready.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert proc.poll() is None and ready.exists(), "the script never started its preparation"
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, (worker, err[-2000:])
    assert "Traceback" not in err and err.strip().splitlines()[-1].startswith("ptxla_perf: interrupted"), err[-2000:]
    assert not (tmp_path / "r.json").exists()
