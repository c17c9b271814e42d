"""tests/plain_runs.py: a plain run forked from the server is the script's run as `python SCRIPT ARGS` gives it (the
suite compares profiled runs with these), and a module run forked from it is `python -m MODULE ARGS` (profiled
torch_xla runs come from there: conftest.run_cli). Checked on a script that imports nothing heavy (a server with no
module imported), beside a fresh interpreter, and on a profiled torch_xla run beside a fresh one."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import SCRIPTS, cli_env, load_report, run_cli
from plain_runs import run_module, run_plain, start_plain

SCRIPT = '''import os, sys, warnings
print("argv", sys.argv, "cwd", os.getcwd(), "name", __name__, "file", __file__, "env", os.environ.get("X_RUN"))
print("path0", sys.path[0])
warnings.warn("once")
print("to stderr", file=sys.stderr)
import atexit
atexit.register(lambda: print("atexit ran"))
how = sys.argv[1]
if how == "raise":
    raise ValueError("boom")
if how == "exit":
    sys.exit(int(sys.argv[2]))
if how == "text":
    sys.exit("a message")
'''


@pytest.mark.parametrize("args", [("ok",), ("exit", "3"), ("raise",), ("text",)])
def test_forked_run_is_the_fresh_interpreters_run(tmp_path, args):
    script = tmp_path / "s.py"
    script.write_text(SCRIPT)
    env = cli_env(X_RUN="yes")
    fresh = subprocess.run([sys.executable, script.name, *args], cwd=tmp_path, env=env, capture_output=True,
                           text=True, timeout=60)
    forked = run_plain(script.name, *args, cwd=tmp_path, env=env, timeout=60, modules=())
    assert (forked.returncode, forked.stdout, forked.stderr) == (fresh.returncode, fresh.stdout, fresh.stderr)
    assert fresh.returncode == {"ok": 0, "exit": 3, "raise": 1, "text": 1}[args[0]]


def test_a_run_past_its_timeout_is_killed(tmp_path):
    script = tmp_path / "sleep.py"
    script.write_text("import time\nprint('started', flush=True)\ntime.sleep(60)\n")
    run = start_plain(script, cwd=tmp_path, env=cli_env(), modules=())
    with pytest.raises(subprocess.TimeoutExpired):
        run.communicate(timeout=2)
    # the server takes the next run once the killed one is reaped
    ok = tmp_path / "ok.py"
    ok.write_text("print('next')\n")
    assert run_plain(ok, cwd=tmp_path, env=cli_env(), timeout=60, modules=()).stdout == "next\n"


MAIN = '''import os, sys, atexit
print("argv", sys.argv, "cwd", os.getcwd(), "name", __name__, "file", __file__, "path0", sys.path[0])
print("env", os.environ.get("X_RUN"), "to stderr", file=sys.stderr)
atexit.register(lambda: print("atexit ran"))
sys.exit(int(sys.argv[1]))
'''


@pytest.mark.parametrize("code", ["0", "4"])
def test_forked_module_run_is_python_dash_m(tmp_path, code):
    """`python -m PKG ARGS` forked (run_module: how conftest.run_cli runs `profile` of a torch_xla script)."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "__main__.py").write_text(MAIN)
    env = cli_env(X_RUN="yes")
    fresh = subprocess.run([sys.executable, "-m", "pkg", code], cwd=tmp_path, env=env, capture_output=True,
                           text=True, timeout=60)
    forked = run_module("pkg", code, cwd=tmp_path, env=env, timeout=60, modules=())
    assert (forked.returncode, forked.stdout, forked.stderr) == (fresh.returncode, fresh.stdout, fresh.stderr)
    assert fresh.returncode == int(code) and "atexit ran" in fresh.stdout


@pytest.mark.slow  # two real torch_xla runs
def test_profile_forked_from_torch_is_profile_in_a_fresh_interpreter(tmp_path):
    """A profiled torch_xla script forked from the server that imported torch's part of torch_xla: the program's
    output, exit code and what the report found are a fresh interpreter's. The session still opens at the script's
    own `import torch_xla` (run.backend_detection names its line)."""
    runs = {}
    for how in ("fresh", "forked"):
        (tmp_path / how).mkdir()
        proc = run_cli("profile", "--port", "none", "--report", "r.json", str(SCRIPTS / "item_per_step.py"),
                       cwd=tmp_path / how, fork=how == "forked")
        assert proc.returncode == 0, proc.stderr[-3000:]
        runs[how] = proc, load_report(tmp_path / how / "r.json")
    (fresh, a), (forked, b) = runs["fresh"], runs["forked"]
    assert forked.stdout == fresh.stdout
    assert a["run"]["backend_detection"] == b["run"]["backend_detection"]
    assert "item_per_step.py:3" in json.dumps(b["run"]["backend_detection"])
    for key in ("steps", "compiles", "executions"):
        assert a["summary"].get(key) == b["summary"].get(key), key
    kinds = [sorted((f["kind"], f["severity"]) for f in r["findings"]) for r in (a, b)]
    assert kinds[0] == kinds[1]
