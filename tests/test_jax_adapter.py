"""The JAX adapter through the real CLI (`profile --backend jax`, JAX on the CPU): planted problems are found at
their lines, clean twins give no warnings, reports validate against the same schema as torch_xla's."""
from __future__ import annotations

import pytest

pytest.importorskip("jax")

from conftest import SCRIPTS, planted_line, warnings_of, xla_flags  # noqa: E402

# the module's profiled scripts (the `reports` fixture) are shared by its tests: one xdist worker runs them all
pytestmark = pytest.mark.xdist_group("jax_adapter")

JAX_ENV = {"XLA_FLAGS": xla_flags("--xla_force_host_platform_device_count=8"), "JAX_PLATFORMS": "cpu"}

PLANTED = [
    # script, kind, expected calls (evidence["calls"]) or None, tag of the planted line
    ("jax_host_params.py", "host_to_device_transfer", {"step"}, "PLANTED"),
    ("jax_changing_batch.py", "recompilation", None, "PLANTED"),
    ("jax_static_arg.py", "recompilation", None, "PLANTED"),
    ("jax_float_loss.py", "device_to_host_sync", {"float"}, "PLANTED"),
    ("jax_print_item.py", "device_to_host_sync", {"print/str"}, "PLANTED"),
    ("jax_print_item.py", "device_to_host_sync", {"item"}, "PLANTED-2"),
    ("jax_annotated.py", "host_to_device_transfer", {"step"}, "PLANTED"),
    ("jax_mesh_uncommitted.py", "host_to_device_transfer", {"step"}, "PLANTED"),
]


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    """Each script profiled once (JAX start-up is the slow part), shared by the tests below."""
    from conftest import load_report, run_cli
    cache: dict[str, tuple] = {}

    def get(script: str, *options: str):
        key = script + " ".join(options)
        if key not in cache:
            out = tmp_path_factory.mktemp("jax") / "report.json"
            opts = options or ("--backend", "jax")
            proc = run_cli("profile", "--port", "none", "--report", str(out), *opts, str(SCRIPTS / script),
                           cwd=out.parent, **JAX_ENV)
            assert out.exists(), f"no report\n{proc.stdout}\n{proc.stderr[-4000:]}"
            cache[key] = (proc, load_report(out))
        return cache[key]
    return get


@pytest.mark.parametrize("script,kind,calls,tag", PLANTED, ids=[f"{p[0]}:{p[3]}" for p in PLANTED])
def test_planted_problem_found_at_its_line(reports, script, kind, calls, tag):
    path = SCRIPTS / script
    proc, report = reports(script)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert report["backend"] == "jax"
    line = planted_line(path, tag + ":")
    found = [f for f in warnings_of(report) if f["kind"] == kind and f["location"]
             and f["location"]["line"] == line]
    assert found, (f"no {kind} warning at line {line}; findings: "
                   f"{[(f['kind'], f['severity'], f['location']) for f in report['findings']]}")
    f = found[0]
    assert f["location"]["file"] == str(path)
    if calls:
        assert set(f["evidence"]["calls"]) & calls, f["evidence"]
    assert kind in proc.stderr and f"{script}:{line}" in proc.stderr


def test_host_params_evidence_has_shapes_and_bytes(reports):
    _, report = reports("jax_host_params.py")
    f = next(f for f in report["findings"] if f["kind"] == "host_to_device_transfer")
    assert sorted(map(tuple, f["evidence"]["shapes"])) == [(16, 32), (32, 4)]
    assert f["evidence"]["bytes"] == (16 * 32 + 32 * 4) * 4
    assert f["per_step"] == pytest.approx(1.0)
    assert report["summary"]["host_to_device_per_step"] > 0


def test_recompilation_causes(reports):
    _, shapes = reports("jax_changing_batch.py")
    f = next(f for f in shapes["findings"] if f["kind"] == "recompilation")
    assert f["evidence"]["cause"] == "input_shapes"
    assert any("f32[" in d and "->" in d for d in f["evidence"]["differences"])
    _, static = reports("jax_static_arg.py")
    f = next(f for f in static["findings"] if f["kind"] == "recompilation")
    assert f["evidence"]["cause"] == "static_argument"
    assert any("n_layers" in d for d in f["evidence"]["differences"])


def test_clean_twin_has_no_warnings(reports):
    proc, report = reports("jax_clean.py")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert warnings_of(report) == [], report["findings"]
    s = report["summary"]
    assert s["recompiles_after_warmup"] == 0
    assert s["device_to_host_per_step"] == 0 and s["host_to_device_per_step"] == 0
    assert s["steps"] >= 10
    # the one read after the loop is reported as trailing work, never as a finding
    assert report["run"]["after_last_step"]["device_to_host"] == 1
    assert report["run"]["step_detection"].startswith("inferred") and "step" in report["run"]["step_detection"]
    assert report["environment"]["versions"]["jax"]


def test_auto_backend_picks_jax_and_annotations_define_steps(reports):
    proc, report = reports("jax_annotated.py", "--backend", "auto")
    assert report["backend"] == "jax"
    assert "StepTraceAnnotation" in report["run"]["step_detection"]
    assert report["summary"]["steps"] == 6


def test_adapter_restores_everything(tmp_path):
    """In-process: start/stop leaves jax and numpy as they were; steps inferred; d2h counted."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax._src.array import ArrayImpl

    from ptxla_perf.session import Session
    before = (jax.jit, np.asarray, np.array, ArrayImpl.__dict__["_value"],
              jax.profiler.StepTraceAnnotation.__dict__.get("__exit__"))
    s = Session("jax", report_path=str(tmp_path / "r.json"), port=None, console=False, handle_signals=False)
    s.start()
    f = jax.jit(lambda a: a * 2)
    x = jnp.ones(4)
    for _ in range(5):
        x = f(x)
        np.asarray(x)
    report = s.finish()
    after = (jax.jit, np.asarray, np.array, ArrayImpl.__dict__["_value"],
             jax.profiler.StepTraceAnnotation.__dict__.get("__exit__"))
    assert before == after
    # 5 calls = 5 steps; the last step ends where its call returned, so its read is trailing work
    assert report["summary"]["steps"] == 5
    assert report["summary"]["device_to_host_per_step"] == pytest.approx(0.8)
    assert report["run"]["after_last_step"]["device_to_host"] == 1
    assert f(x).shape == (4,)  # the wrapped function still works after the session


def test_eager_evaluation_at_epoch_end_is_not_stopped(reports):
    """Issue 14: a non-jitted accuracy() over the whole train and test sets after each epoch compiles tens of eager
    ops; the run completes with its own output and exit code, and the compiles are explained as first uses."""
    import subprocess
    import sys

    from conftest import cli_env
    proc, report = reports("jax_eager_accuracy.py")
    plain = subprocess.run([sys.executable, str(SCRIPTS / "jax_eager_accuracy.py")], capture_output=True, text=True,
                           env=cli_env(**JAX_ENV), timeout=300)
    assert proc.returncode == plain.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout == plain.stdout and proc.stdout.count("Epoch") == 3
    assert report["run"]["status"] == "completed"
    assert report["summary"]["steps"] == 24  # 3 epochs x 8 calls of update
    eager = [f for f in report["findings"] if f["kind"] == "eager_compile"]
    assert eager and all(f["severity"] == "info" for f in eager)
    assert sum(f["count"] for f in eager) >= 20
    assert not [f for f in report["findings"] if f["kind"] in ("run_stopped", "recompilation")]
    assert warnings_of(report) == [], report["findings"]


def test_jit_of_a_transform_and_of_the_function_itself_are_two_functions(reports):
    """`jit(grad(loss_fn))` and `jit(loss_fn)` share the user's code (the step identity under transforms), yet
    each compiles once: neither is a recompile of the other."""
    proc, report = reports("jax_grad_and_loss.py")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert report["summary"]["steps"] == 12
    assert not [f for f in report["findings"] if f["kind"] == "recompilation"], report["findings"]
    assert warnings_of(report) == [], report["findings"]
