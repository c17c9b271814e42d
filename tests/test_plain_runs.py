"""tests/plain_runs.py: a plain run forked from the server is the script's run as `python SCRIPT ARGS` gives it (the
suite compares profiled runs with these). Checked on a script that imports nothing heavy (a server with no module
imported), beside a fresh interpreter."""
from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import cli_env
from plain_runs import run_plain, start_plain

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
