"""Plain runs of torch_xla scripts (the user's program without `profile`, to compare its output with) forked from one
process per test worker that has imported torch_xla once.

Why: `import torch_xla` costs ~6 s of CPU (torch._dynamo/inductor through torch_xla.stablehlo), most of a tiny
script's run, and the suite runs dozens of plain twins. The fork happens before any runtime starts (importing
torch_xla creates no PJRT client; a DataLoader worker is forked the same way), so each script still runs the real
torch_xla from its first device call on, in a process of its own: own cwd, environment, argv, __main__, stdout and
stderr, exit code. A profiled run must import the framework itself (ptxla_perf/runner/import_watch.py sees the
import): `python -m ptxla_perf profile` of a torch_xla script is forked from a server that imported only torch's part
of it (`run_module`, TORCH_MODULES; conftest.run_cli). A script that starts processes of its own (multiprocessing
spawn) still works: its children are fresh interpreters.

The server (this file run as a script) reads one JSON request per line on stdin and answers on stdout:
{"pid": N} once forked, then {"returncode": N}. Runs are one at a time (a second request waits for the first).
"""
from __future__ import annotations

import atexit
import json
import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

# Set per test or per run, read by nothing at import time: runs whose environments differ only in these share a
# server; any other difference (a flag torch_xla might read at import) gets a server started in that environment.
_PER_RUN_ENV = {"PYTEST_CURRENT_TEST", "MASTER_PORT", "MASTER_ADDR", "PTXLA_TEST_COMPILES"}


def _child(req: dict) -> None:
    """In the forked child: become `python SCRIPT ARGS` in req's cwd and environment, then exit as it would."""
    import builtins
    import importlib.machinery
    import io
    import traceback
    import types
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    for fd, path in ((1, req["stdout"]), (2, req["stderr"])):
        f = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(f, fd)
        os.close(f)
    sys.stdin = open(0, closefd=False)
    sys.stdout = open(1, "w", closefd=False)
    sys.stderr = open(2, "w", closefd=False)
    os.chdir(req["cwd"])
    os.environ.clear()
    os.environ.update(req["env"])
    if req.get("module"):
        _exit(_run_module(req["module"], req["argv"]))
    script = os.path.abspath(req["argv"][0])
    sys.argv = list(req["argv"])  # argv[0] as given (relative stays relative); __file__ absolute, as Python's
    sys.path[0] = os.path.dirname(script)
    # __main__ as `python SCRIPT` makes it (runpy.run_path would set sys.argv[0] to the absolute path)
    main = types.ModuleType("__main__")
    main.__dict__.update(__file__=script, __cached__=None, __spec__=None, __builtins__=builtins,
                         __loader__=importlib.machinery.SourceFileLoader("__main__", script))
    sys.modules["__main__"] = main
    code = 0
    try:
        with io.open_code(script) as f:
            source = f.read()
        exec(compile(source, script, "exec"), main.__dict__)
    except SystemExit as e:
        code = _exit_code(e)
    except BaseException as e:  # as Python prints an uncaught exception: from the script's own frame on
        tb = e.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename != script:
            tb = tb.tb_next
        traceback.print_exception(type(e), e, tb or e.__traceback__)
        code = 1
    _exit(code)


def _exit_code(e: SystemExit) -> int:
    if e.code is None:
        return 0
    if isinstance(e.code, int):
        return e.code
    print(e.code, file=sys.stderr)
    return 1


def _run_module(module: str, args: list[str]) -> int:
    """`python -m MODULE ARGS` as the interpreter runs it (runpy._run_module_as_main, in a fresh `__main__`):
    sys.argv[0] the module's file, sys.path[0] the working directory."""
    import runpy
    import traceback
    import types
    sys.argv = [module, *args]  # argv[0] becomes the module's file
    sys.path[0] = os.getcwd()
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        runpy._run_module_as_main(module, alter_argv=True)
    except SystemExit as e:
        return _exit_code(e)
    except BaseException:
        traceback.print_exc()
        return 1
    return 0


def _exit(code: int) -> None:
    """As the interpreter ends: threads joined, atexit handlers run, streams flushed."""
    threading._shutdown()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    os._exit(code & 0xFF)


def serve() -> None:
    for module in sys.argv[1:]:
        __import__(module)
    out = sys.stdout
    for line in sys.stdin:
        req = json.loads(line)
        pid = os.fork()
        if pid == 0:
            try:
                _child(req)
            finally:
                os._exit(70)
        out.write(json.dumps({"pid": pid}) + "\n")
        out.flush()
        _, status = os.waitpid(pid, 0)
        code = os.waitstatus_to_exitcode(status)
        out.write(json.dumps({"returncode": code}) + "\n")
        out.flush()


class _Server:
    def __init__(self, modules: tuple[str, ...], env: dict[str, str]):
        self.lock = threading.Lock()
        self.proc = subprocess.Popen([sys.executable, __file__, *modules], env=env, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, cwd=tempfile.gettempdir())


# one server per (modules, environment less _PER_RUN_ENV): the environment it imported the framework in
_servers: dict[tuple, _Server] = {}

# torch's own modules that torch_xla imports (torch._dynamo and inductor, through torch_xla.stablehlo and
# torch_xla.experimental.scan): ~95 % of `import torch_xla`'s CPU. A profiled run forked from a process that has
# them still imports torch_xla itself, so `profile` sees the program's import as it would (the session opens then)
TORCH_MODULES = ("torch", "torch._dynamo", "functorch.compile", "torch._inductor.fx_passes.post_grad")
# what torch may read from the environment as it is imported; a server of TORCH_MODULES is shared by runs whose
# environments agree on these (torch_xla's and ptxla_perf's variables are read after the fork)
_TORCH_ENV = ("TORCH", "PYTORCH", "OMP_", "MKL", "KMP_", "CUDA", "NVIDIA", "HIP", "ROCM", "LD_", "PYTHON", "PATH",
              "HOME", "TMP", "XDG_")


def _env_key(modules: tuple[str, ...], env: dict[str, str]) -> frozenset:
    if modules == TORCH_MODULES:
        return frozenset((k, v) for k, v in env.items() if k.startswith(_TORCH_ENV))
    return frozenset((k, v) for k, v in env.items() if k not in _PER_RUN_ENV)


def _server(modules: tuple[str, ...], env: dict[str, str]) -> _Server:
    key = (modules, _env_key(modules, env))
    server = _servers.get(key)
    if server is None or server.proc.poll() is not None:
        server = _servers[key] = _Server(modules, {k: v for k, v in env.items() if k not in _PER_RUN_ENV})
    return server


class PlainRun:
    """Popen-like handle of one plain run: communicate() gives a subprocess.CompletedProcess."""

    def __init__(self, argv: list[str], cwd, env: dict[str, str], modules: tuple[str, ...], module: str = ""):
        self.args = [sys.executable, *(("-m", module) if module else ()), *argv]
        self._server = _server(modules, env)
        self._killed = False
        self._dir = tempfile.mkdtemp(prefix="plain-run-")
        self._out, self._err = Path(self._dir, "stdout"), Path(self._dir, "stderr")
        req = {"argv": [str(a) for a in argv], "cwd": str(cwd or os.getcwd()), "env": env,
               "stdout": str(self._out), "stderr": str(self._err), "module": module}
        self._server.lock.acquire()  # released when this run's answer is read
        try:
            self._server.proc.stdin.write(json.dumps(req) + "\n")
            self._server.proc.stdin.flush()
            self.pid = json.loads(self._server.proc.stdout.readline())["pid"]
        except BaseException:
            self._server.lock.release()
            raise
        self._result = None

    def communicate(self, timeout: float | None = None) -> subprocess.CompletedProcess:
        if self._result is None:
            timer = threading.Timer(timeout, self._kill) if timeout else None
            if timer:
                timer.start()
            try:
                line = self._server.proc.stdout.readline()
            finally:
                if timer:
                    timer.cancel()
                self._server.lock.release()
            if not line:
                raise RuntimeError("the plain-run server ended")
            code = json.loads(line)["returncode"]
            out = self._out.read_text(errors="replace")
            err = self._err.read_text(errors="replace")
            for p in (self._out, self._err):
                p.unlink()
            os.rmdir(self._dir)
            self._result = subprocess.CompletedProcess(self.args, code, out, err)
            if self._killed:
                raise subprocess.TimeoutExpired(self.args, timeout, out, err)
        return self._result

    def _kill(self) -> None:
        self._killed = True  # past the timeout
        try:
            os.kill(self.pid, 9)
        except ProcessLookupError:
            pass


def start_plain(script, *args, cwd=None, env: dict[str, str], modules: tuple[str, ...] = ("torch_xla",)) -> PlainRun:
    """Start `python SCRIPT ARGS` (a script that imports torch_xla) as it would run alone; see the module doc."""
    return PlainRun([str(script), *map(str, args)], cwd, env, modules)


def run_plain(script, *args, cwd=None, env: dict[str, str], timeout: float = 300,
              modules: tuple[str, ...] = ("torch_xla",)) -> subprocess.CompletedProcess:
    """subprocess.run([sys.executable, SCRIPT, *ARGS], capture_output=True, text=True) of a torch_xla script."""
    return start_plain(script, *args, cwd=cwd, env=env, modules=modules).communicate(timeout=timeout)


def start_module(module: str, *args, cwd=None, env: dict[str, str],
                 modules: tuple[str, ...] = TORCH_MODULES) -> PlainRun:
    """Start `python -m MODULE ARGS`, forked from a process that imported `modules` (default: torch's part of
    `import torch_xla`, not torch_xla itself)."""
    return PlainRun(list(map(str, args)), cwd, env, modules, module)


def run_module(module: str, *args, cwd=None, env: dict[str, str], timeout: float = 300,
               modules: tuple[str, ...] = TORCH_MODULES) -> subprocess.CompletedProcess:
    """subprocess.run([sys.executable, "-m", MODULE, *ARGS], capture_output=True, text=True), as start_module."""
    return start_module(module, *args, cwd=cwd, env=env, modules=modules).communicate(timeout=timeout)


if __name__ == "__main__":
    serve()
