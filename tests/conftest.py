"""Shared helpers: run the real CLI in a subprocess (torch_xla on the CPU) and load what it wrote."""
from __future__ import annotations

import copy
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import NamedTuple

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "tests" / "scripts"

# The suite's XLA compiles run with LLVM's optimizations off (README: "Tests"): the same HLO, the same graphs and
# compile counts, the same buffer assignment (hlo_cost.analysis_options does the same for our own figure compiles);
# what changes is the machine code, which no test reads. It halves a compile's CPU time (the BERT fine-tuning loop:
# 48 -> 25 s of CPU), on a suite whose cost is mostly torch_xla's import and XLA's compiles. Set before any test
# module imports a framework (conftest is imported first), inherited by every subprocess a test starts;
# PTXLA_TEST_XLA_OPT=full keeps XLA's defaults.
SUITE_XLA_FLAGS = "--xla_backend_optimization_level=0 --xla_llvm_disable_expensive_passes=true"
if os.environ.get("PTXLA_TEST_XLA_OPT") != "full":
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {SUITE_XLA_FLAGS}".strip()


def xla_flags(*flags: str) -> str:
    """XLA_FLAGS for a test's subprocess: the suite's, plus `flags`."""
    return " ".join(f for f in (os.environ.get("XLA_FLAGS", ""), *flags) if f)


# --- pytest-xdist: `--dist loadgroup` that works on pytest 9.2 ------------------------------------------------
# Tests marked @pytest.mark.xdist_group(NAME) share a session/module fixture's real run (or must not overlap): they
# must run on one worker. xdist 3.8 tells its controller a test's group by appending "@NAME" to the test's node id,
# which pytest 9.2's structured node ids ignore (pytest-xdist issue #1386): the groups are silently dropped. Here
# each worker writes its tests' groups to a file the controller's scheduler reads (once every worker collected).
_GROUPS_KEY = "ptxla_perf_xdist_groups"


def pytest_configure(config):
    if config.getoption("dist", "no") == "loadgroup" and not hasattr(config, "workerinput"):
        config.ptxla_groups_dir = tempfile.mkdtemp(prefix="ptxla-xdist-groups-")


def pytest_unconfigure(config):
    if getattr(config, "ptxla_groups_dir", None):
        shutil.rmtree(config.ptxla_groups_dir, ignore_errors=True)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):
    if getattr(node.config, "ptxla_groups_dir", None):
        node.workerinput[_GROUPS_KEY] = node.config.ptxla_groups_dir


def pytest_collection_modifyitems(config, items):
    where = getattr(config, "workerinput", {}).get(_GROUPS_KEY)
    if not where:
        return
    groups = {}
    for item in items:
        names = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                        for m in item.iter_markers("xdist_group")})
        if names:
            groups[item.nodeid] = "_".join(names)
    out = Path(where) / f"{config.workerinput['workerid']}.json"
    out.with_suffix(".tmp").write_text(json.dumps(groups))
    os.replace(out.with_suffix(".tmp"), out)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    if not getattr(config, "ptxla_groups_dir", None):
        return None
    from xdist.scheduler import LoadGroupScheduling

    class _GroupsFromWorkers(LoadGroupScheduling):
        _groups: dict | None = None

        def _split_scope(self, nodeid: str) -> str:
            if nodeid.rfind("@") > nodeid.rfind("]"):  # xdist named the group in the id itself (pytest < 9.2)
                return super()._split_scope(nodeid)
            if self._groups is None:  # schedule() runs once every worker has collected (and written its file)
                self._groups = {}
                for f in sorted(Path(config.ptxla_groups_dir).glob("*.json")):
                    self._groups.update(json.loads(f.read_text()))
            return self._groups.get(nodeid, nodeid)

    return _GroupsFromWorkers(config, log)


# --- what an end-to-end test may assert on a loaded machine -------------------------------------------------------
# Verdicts read from measured time: which part of the step is largest (host_bound, launch_bound, input_bound, the
# trace window's collective_bound) and which rank the others wait for (straggler). On a busy machine any of them can
# appear, vanish or change severity, so an end-to-end run asserts only what does not depend on load (the run's
# counts, the line, its output and exit code) and leaves these out; each verdict is tested on recorded step records
# (tests/test_timing_verdicts.py, tests/fixtures/steps/) and on synthetic ones.
TIMING_KINDS = frozenset({"host_bound", "launch_bound", "input_bound", "collective_bound", "straggler"})


def warnings_of(report: dict, *, timing: bool = False) -> list[dict]:
    """The report's warnings and errors; those of TIMING_KINDS only with `timing=True`."""
    return [f for f in report["findings"] if f["severity"] in ("warning", "error")
            and (timing or f["kind"] not in TIMING_KINDS)]


def sampled_lines(report: dict, script: str | Path, *kinds: str) -> list[int]:
    """The script's lines the stack sampler saw in the steady steps (`steps[].hot_lines` of these kinds), most
    time first: where the time went, whichever part of the step it made largest on this machine."""
    total: dict[int, float] = {}
    for s in report["steps"]:
        for h in (s.get("hot_lines") or []) if s.get("steady") else []:
            if h["kind"] in kinds and h["file"] == str(script):
                total[h["line"]] = total.get(h["line"], 0.0) + h["s"]
    return sorted(total, key=total.get, reverse=True)


def cli_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("PJRT_DEVICE", "CPU")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    env.setdefault("PYTHONFAULTHANDLER", "1")  # a native crash prints every thread's Python stack (no_report)
    env.update(extra)
    return env


def no_report(proc) -> str:
    """A missing report's message: the exit status too (a signal's name: a process killed, or crashed in native
    code, prints nothing; cli_env turns Python's faulthandler on so that a crash names its threads' stacks)."""
    code = proc.returncode
    how = f"exit {code}"
    if code is not None and code < 0:
        how = f"signal {signal.Signals(-code).name}" if -code in signal.valid_signals() else f"signal {-code}"
    return f"no report written ({how})\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr[-4000:]}"


def default_sigint() -> None:
    """preexec_fn for a child a test sends SIGINT: SIGINT at its default, as from a terminal. An ignored SIGINT
    survives exec and Python (and a profiled program) keeps ignoring it: a suite started as a background job of a
    non-interactive shell (as a CI harness may start it) has SIGINT ignored and would hand that on."""
    import signal
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def run_cli(*args: str, cwd: str | Path | None = None, timeout: float = 300, fork: bool = True, **env: str):
    """`python -m ptxla_perf ARGS`. `profile` of a torch_xla script (one that imports torch_xla itself and no JAX)
    is forked from a process that imported torch's part of `import torch_xla` (plain_runs.run_module: ~5 s of
    CPU less a run); `fork=False`, or any other command, a fresh interpreter."""
    if fork and args and args[0] == "profile" and _torch_xla_script(args):
        from plain_runs import run_module
        return run_module("ptxla_perf", *args, cwd=cwd, env=cli_env(**env), timeout=timeout)
    return subprocess.run([sys.executable, "-m", "ptxla_perf", *args], cwd=cwd, env=cli_env(**env),
                          capture_output=True, text=True, timeout=timeout)


_IMPORTS_TORCH_XLA = re.compile(r"^\s*(import|from)\s+torch_xla\b", re.M)


def _torch_xla_script(args) -> bool:
    script = next((Path(a) for a in args[1:] if str(a).endswith(".py")), None)
    try:
        text = script.read_text() if script is not None else ""
    except OSError:
        return False
    return bool(_IMPORTS_TORCH_XLA.search(text)) and "jax" not in text


def load_report(path: str | Path) -> dict:
    from ptxla_perf.report.assemble import validate
    data = json.loads(Path(path).read_text())
    validate(data)
    return data


@pytest.fixture
def profile(tmp_path):
    """Run `python -m ptxla_perf profile` on a script; return (completed process, validated report)."""
    def _run(script: str | Path, *script_args: str, options: tuple[str, ...] = (), **env: str):
        report = tmp_path / "report.json"
        proc = run_cli("profile", "--port", "none", "--report", str(report), *options, str(script),
                       *script_args, cwd=tmp_path, **env)
        assert report.exists(), no_report(proc)
        return proc, load_report(report)
    return _run


class Profiled(NamedTuple):
    proc: subprocess.CompletedProcess
    report: dict  # validated; each caller gets its own copy
    path: Path  # the report JSON (report.html beside it)


@pytest.fixture(scope="session")
def profiled(tmp_path_factory):
    """`python -m ptxla_perf profile --port none` of a script, run once per (script, options) in this test process
    and shared by every test that reads that run (several tests assert different things about one report)."""
    runs: dict[tuple, Profiled] = {}

    def _get(script: str | Path, *options: str, args: tuple[str, ...] = ()) -> Profiled:
        key = (str(script), options, args)  # args: the script's own arguments
        if key not in runs:
            out = tmp_path_factory.mktemp(Path(script).stem) / "report.json"
            proc = run_cli("profile", "--port", "none", "--report", str(out), *options, str(script), *args,
                           cwd=out.parent)
            assert out.exists(), no_report(proc)
            runs[key] = Profiled(proc, load_report(out), out)
        run = runs[key]
        return run._replace(report=copy.deepcopy(run.report))
    return _get


def planted_line(script: str | Path, tag: str = "PLANTED") -> int:
    """The line of the script marked `# PLANTED: ...`: the line a finding must point at."""
    for n, line in enumerate(Path(script).read_text().splitlines(), 1):
        if f"# {tag}" in line:
            return n
    raise AssertionError(f"{script} has no '# {tag}' line")


@pytest.fixture(scope="session")
def jax_window_capture(tmp_path_factory) -> Path:
    """A capture of steps 1-6 of the 8-device JAX job (tests/scripts/trace_job.py jax_window), made once:
    test_analyze.py analyzes it, test_tensorboard_browser.py serves it. Returns the .xplane.pb path."""
    from trace_helpers import run_job, xplanes
    logdir = tmp_path_factory.mktemp("jax_window")
    run_job("jax_window", logdir, 1, 6, 8)
    (path,) = xplanes(logdir)
    return path


def run_app(*args: str, cwd: str | Path, timeout: float = 400, **env: str) -> subprocess.CompletedProcess:
    """The Hydra runner: `python -m ptxla_perf.run ARGS` in cwd; a torch_xla recipe in the suite's environment is
    forked as run_cli's `profile` of a torch_xla script is."""
    if not env and torch_xla_recipe(args):
        from plain_runs import run_module
        return run_module("ptxla_perf.run", *args, cwd=cwd, env=cli_env(), timeout=timeout)
    return subprocess.run([sys.executable, "-m", "ptxla_perf.run", *args], cwd=cwd, env=cli_env(**env),
                          capture_output=True, text=True, timeout=timeout)


_TORCH_XLA_RECIPES = {"+recipe=mlp", "+recipe=mmf", "+recipe=matmul"}


def torch_xla_recipe(args) -> bool:
    """Whether Hydra overrides `args` run one of the torch_xla recipes (matmul: unless its backend is JAX's)."""
    other_backend = any(a.startswith("recipe.backend=") and a != "recipe.backend=torch_xla" for a in args)
    return bool(_TORCH_XLA_RECIPES & set(args)) and not other_backend


@pytest.fixture(scope="session")
def mlp_capture_run(tmp_path_factory) -> tuple[subprocess.CompletedProcess, Path]:
    """The mlp recipe with a capture window (steps 3-4) and per-step scalars, run once: test_runner.py reads its
    report and capture, test_tensorboard_scalars.py serves the same run folder with TensorBoard. Returns (process,
    run dir)."""
    cwd = tmp_path_factory.mktemp("mlp_capture")
    proc = run_app("+recipe=mlp", "recipe.steps=8", "recipe.batch_size=8", "profiler.port=null",
                   "profiler.capture.start_step=3", "profiler.capture.num_steps=2", "hydra.run.dir=out", cwd=cwd)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc, cwd / "out"


@pytest.fixture(scope="session")
def mlp_sweep(tmp_path_factory):
    """`-m` over two batch sizes of the mlp recipe with a profiler server on one port and no scalars, run once:
    test_runner.py checks the per-job reports (the second job reused the first one's server), test_html_report.py
    the sweep page. Returns (process, sweep dir, port)."""
    from trace_helpers import free_port
    cwd = tmp_path_factory.mktemp("mlp_sweep")
    port = free_port()
    proc = run_app("-m", "+recipe=mlp", "recipe.steps=4", "recipe.batch_size=4,8", f"profiler.port={port}",
                   "profiler.scalars=false", "hydra.sweep.dir=sweep", cwd=cwd, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc, cwd / "sweep", port


@pytest.fixture(scope="session")
def reads_and_fallback_run(tmp_path_factory) -> dict:
    """reads_and_fallback.py (a host read and a CPU fallback every step) profiled once, with per-step scalars:
    test_one_source.py reads every view of it, test_findings_typed.py its rules (both in xdist_group
    "reads_and_fallback"). Returns {proc, path, logdir, tmp}; read the report with load_report(path)."""
    tmp = tmp_path_factory.mktemp("one_source")
    report, logdir = tmp / "report.json", tmp / "tb"
    proc = run_cli("profile", "--port", "none", "--report", str(report), "--tensorboard", str(logdir),
                   str(SCRIPTS / "reads_and_fallback.py"), cwd=tmp)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return {"proc": proc, "path": report, "logdir": logdir, "tmp": tmp}
