"""JAX training loops as public code writes them (issue 21, items 5-8), through the real CLI on the CPU: a round
trip of the parameters is not input data, a second jitted call per iteration is a phase of it, the step function
is the training step (not a generation step called first; pmap and nnx.jit count), every implicit upload is
counted and values the loop makes on the host are told from data."""
from __future__ import annotations

import pytest

pytest.importorskip("jax")

from conftest import SCRIPTS, planted_line, warnings_of, xla_flags  # noqa: E402

pytestmark = pytest.mark.xdist_group("jax_loops")

JAX_ENV = {"XLA_FLAGS": xla_flags("--xla_force_host_platform_device_count=8"), "JAX_PLATFORMS": "cpu"}


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """Each script profiled once, shared by the tests below."""
    from conftest import load_report, run_cli
    cache: dict[str, tuple] = {}

    def get(script: str):
        if script not in cache:
            out = tmp_path_factory.mktemp("jaxloop") / "report.json"
            proc = run_cli("profile", "--port", "none", "--backend", "jax", "--report", str(out),
                           str(SCRIPTS / script), cwd=out.parent, **JAX_ENV)
            assert out.exists(), f"no report (exit {proc.returncode})\n{proc.stdout}\n{proc.stderr[-4000:]}"
            assert proc.returncode == 0, proc.stderr[-3000:]
            cache[script] = (proc, load_report(out))
        return cache[script]
    return get


def _at(report, kind, script, tag="PLANTED"):
    line = planted_line(SCRIPTS / script, tag + ":")
    return [f for f in report["findings"] if f["kind"] == kind and (f["location"] or {}).get("line") == line]


def _phases(report):
    phases = [s.get("phase") or "train" for s in report["steps"]]
    return phases.count("train"), phases.count("eval")


@pytest.mark.parametrize("script,nbytes", [("jax_round_trip.py", (32 * 64 + 64 * 4) * 4),
                                           ("jax_round_trip_asarray.py", 128 * 8 * 4)])
def test_parameters_sent_back_from_the_host_are_a_round_trip_not_input(run, script, nbytes):
    """Item 5: `params = jax.device_get(params)` / `w = step(np.asarray(w), ...)` each step: the host copies came
    from the device, so the copy back is a round trip with its bytes, a warning, never 'the input pipeline'."""
    _, report = run(script)
    found = _at(report, "host_to_device_transfer", script)
    assert found, [(f["kind"], f["severity"], f["location"], f["message"]) for f in report["findings"]]
    f = found[0]
    assert f["severity"] == "warning"
    assert "round trip" in f["message"] and "input pipeline" not in f["message"]
    assert f["evidence"]["origins"]["round_trip"] >= nbytes * 8  # every step after the first, at least
    assert f["evidence"]["bytes_per_iteration"] >= nbytes
    assert any("read back from the device" in m for m in f["evidence"]["made_by"])


def test_flax_two_jitted_calls_per_iteration_are_one_training_step(run):
    """Item 6: `grads = apply_model(...)`, `state = update_model(state, grads)` (Flax's MNIST example): 2 epochs
    of 6 iterations are 12 training iterations; only the per-epoch test-set evaluation is evaluation."""
    _, report = run("jax_two_phase.py")
    train, evals = _phases(report)
    assert train == 12, [s.get("phase") for s in report["steps"]]
    assert evals <= 2
    assert "apply_model" in report["run"]["step_detection"]
    assert report["summary"]["steps"] == 12


def test_generation_before_training_is_not_the_step(run):
    """Item 7: a jitted generate_step called first (parameters unchanged, its own output fed back) is not the
    step function: train_step (nnx.jit) is, and each of its 12 calls is a training iteration."""
    proc, report = run("jax_generate_then_train.py")
    assert "train_step" in report["run"]["step_detection"], report["run"]["step_detection"]
    assert "generate_step" not in report["run"]["step_detection"]
    train, evals = _phases(report)
    assert (train, evals) == (12, 0), [s.get("phase") for s in report["steps"]]
    assert all(s["executions"] >= 1 for s in report["steps"])
    assert "sample before training" in proc.stdout


def test_pmap_calls_are_executions_and_annotated_steps_stay_apart(run):
    """Item 7: a pmap step inside StepTraceAnnotation: each annotated step ran the pmapped program once (8
    steps, not a few merged ones)."""
    _, report = run("jax_pmap_annotated.py")
    assert "StepTraceAnnotation" in report["run"]["step_detection"]
    assert report["summary"]["steps"] == 8
    assert [s["executions"] for s in report["steps"]] == [1] * 8


def test_host_drawn_noise_and_eager_uploads_are_counted_and_told_from_data(run):
    """Item 8: noise from np.random each step is a value the loop makes (draw it with jax.random), not data; an
    eager `jnp.array(list)` each step is an upload, counted per step and found at its line."""
    _, report = run("jax_host_noise.py")
    noise = _at(report, "host_to_device_transfer", "jax_host_noise.py")
    assert noise and noise[0]["severity"] == "warning", report["findings"]
    f = noise[0]
    assert "jax.random" in f["message"] and "input pipeline" not in f["message"]
    assert f["evidence"]["origins"]["host_random"] > 0 and f["evidence"]["origins"]["data"] > 0
    assert any("np.random.normal" in m for m in f["evidence"]["made_by"])
    eager = _at(report, "host_to_device_transfer", "jax_host_noise.py", "PLANTED-2")
    assert eager, report["findings"]
    assert "outside any jitted function" in eager[0]["message"]
    # issue 31: an eager upload costs its dispatch, said in time and rated by it (eager_upload_min_s, _share)
    ev = eager[0]["evidence"]
    assert ev["seconds_per_iteration"] > 0 and "an eager dispatch each" in eager[0]["message"]
    costly = ev["seconds_per_iteration"] >= 0.001 and ev["share_of_step"] >= 0.1
    assert eager[0]["severity"] == ("warning" if costly else "info"), eager[0]
    # per step: x and the noise into the step, the list uploaded eagerly
    assert report["summary"]["host_to_device_per_step"] >= 2.5


def test_loader_batches_uploaded_eagerly_are_data(run):
    """Item 8's other side: NumPy batches from a loader, uploaded with jnp.asarray each step, are counted (not
    0 per step) and are the input pipeline: info, no warning; noise drawn with jax.random is no transfer."""
    _, report = run("jax_data_only.py")
    assert warnings_of(report) == [], report["findings"]
    assert 0.8 <= report["summary"]["host_to_device_per_step"] <= 1.0  # one batch a step (the first: before it)
    info = [f for f in report["findings"] if f["kind"] == "host_to_device_transfer"]
    assert info and info[0]["severity"] == "info" and "input pipeline" in info[0]["message"]


def test_shard_map_calls_are_executions(tmp_path):
    """Item 7: a function wrapped by jax.shard_map and called outside jit runs a compiled program: each call is an
    execution and may be the step (in-process, one CPU device)."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import Mesh, PartitionSpec as P

    from ptxla_perf.session import Session
    before = (jax.shard_map, jax.pmap, jnp.array, jnp.asarray)
    s = Session("jax", report_path=str(tmp_path / "r.json"), port=None, console=False, handle_signals=False)
    s.start()
    mesh = Mesh(np.array(jax.devices()[:1]), ("x",))
    step = jax.shard_map(lambda w, g: w - 0.1 * g, mesh=mesh, in_specs=(P(), P()), out_specs=P())
    w, g = jnp.ones(4), jnp.full(4, 0.5)
    for _ in range(4):
        w = step(w, g)
    report = s.finish()
    assert (jax.shard_map, jax.pmap, jnp.array, jnp.asarray) == before  # restored
    assert report["summary"]["steps"] == 4
    assert sum(st["executions"] for st in report["steps"]) == 4
    assert float(w[0]) == pytest.approx(0.8)
