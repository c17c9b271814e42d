"""A 2-process JAX job (the dp_jax recipe: jax.distributed.initialize on localhost, gloo CPU collectives) through
the Hydra runner: per-rank reports, the merged report, a straggler named when one rank is slowed, none when the
ranks are equal."""
from __future__ import annotations

import subprocess
import sys

import pytest

pytest.importorskip("jax")

from conftest import cli_env, load_report  # noqa: E402

pytestmark = pytest.mark.slow  # real N-process jobs (about 10 s each)


def run_dp(tmp_path, name, *overrides):
    proc = subprocess.run([sys.executable, "-m", "ptxla_perf.run", "+recipe=dp_jax", "recipe.processes=2",
                           "recipe.steps=16", "profiler.port=null", f"hydra.run.dir={name}", *overrides],
                          cwd=tmp_path, timeout=240, env=cli_env(JAX_PLATFORMS="cpu"), capture_output=True,
                          text=True)
    assert proc.returncode == 0, proc.stderr[-4000:]
    out = tmp_path / name
    return proc, load_report(out / "report.json"), [load_report(out / f"report.rank{i}.json") for i in (0, 1)]


def test_two_process_jax_job_merged_and_slowed_rank_named(tmp_path):
    proc, merged, ranks = run_dp(tmp_path, "slow", "recipe.slow_rank=1", "recipe.slow_ms=40")
    # per-rank reports: the rank is the runtime's (jax.process_index()), one run id, each counted its own steps
    assert [r["run"]["rank"] for r in ranks] == [0, 1]
    assert [r["environment"]["process_index"] for r in ranks] == [0, 1]
    assert all(r["environment"]["process_count"] == 2 for r in ranks)
    assert ranks[0]["run"]["run_id"] == ranks[1]["run"]["run_id"] == merged["run"]["run_id"]
    assert all(r["summary"]["steps"] == 16 for r in ranks)
    assert [p["rank"] for p in merged["processes"]] == [0, 1]
    assert merged["aggregate"]["processes"] == 2 and merged["aggregate"]["throughput"]["samples_per_s"] > 0
    assert merged["run"]["status"] == "completed" and merged["run"]["kind"] == "recipe"
    stragglers = [f for f in merged["findings"] if f["kind"] == "straggler"]
    assert len(stragglers) == 1, [(f["kind"], f["message"]) for f in merged["findings"]]
    assert stragglers[0]["evidence"]["rank"] == 1 and stragglers[0]["ranks"] == [1]
    assert stragglers[0]["evidence"]["phase"] in ("step", "data")  # ahead of the all-reduce, or waiting at it
    assert stragglers[0]["severity"] == "warning"
    assert "straggler" in proc.stderr and "rank 1" in proc.stderr  # rank 0's console: the parent's summary
    assert proc.stderr.count("ptxla_perf [jax]") == 1
    # findings every rank has are merged per line with their ranks, not repeated per rank
    compile_time = [f for f in merged["findings"] if f["kind"] == "compile_time"]
    assert len(compile_time) == 1 and compile_time[0]["ranks"] == [0, 1]


def test_straggler_in_lockstep_is_found_in_its_data_wait(tmp_path):
    """Every rank waits for each step: step times are equal on both ranks, the slowed rank's wait for its input
    (session.data_wait()) still names it."""
    _, merged, ranks = run_dp(tmp_path, "lockstep", "recipe.slow_rank=1", "recipe.slow_ms=40",
                              "recipe.block_each_step=true")
    stragglers = [f for f in merged["findings"] if f["kind"] == "straggler"]
    assert len(stragglers) == 1, [(f["kind"], f["message"]) for f in merged["findings"]]
    assert stragglers[0]["evidence"]["rank"] == 1 and stragglers[0]["evidence"]["phase"] == "data"
    assert merged["processes"][1]["data_wait_s"]["p50"] > merged["processes"][0]["data_wait_s"]["p50"]
    assert all(s.get("data_wait_s") is not None for s in ranks[1]["steps"])


def test_two_equal_ranks_have_no_straggler(tmp_path):
    _, merged, _ = run_dp(tmp_path, "equal")
    kinds = [f["kind"] for f in merged["findings"]]
    # no rank syncs or compiles where the other does not; a straggler between equal ranks follows the machine's
    # load (conftest.TIMING_KINDS) and is judged on one rank's records standing for both in test_pods.py
    assert "rank_divergence" not in kinds, kinds
    assert [p["steps"] for p in merged["processes"]] == [16, 16]


def test_rank_only_host_read_is_a_rank_divergence(tmp_path):
    from pathlib import Path
    import ptxla_perf.recipes.dp_jax as dp
    source = Path(dp.__file__)
    line = next(n for n, text in enumerate(source.read_text().splitlines(), 1) if "only this rank syncs" in text)
    _, merged, ranks = run_dp(tmp_path, "read0", "recipe.read_loss_rank=0")
    div = [f for f in merged["findings"] if f["kind"] == "rank_divergence"]
    assert div, [(f["kind"], f["message"]) for f in merged["findings"]]
    assert div[0]["ranks"] == [0] and div[0]["evidence"]["not_on_ranks"] == [1]
    assert div[0]["location"]["line"] == line and div[0]["evidence"]["finding"] == "device_to_host_sync"
    assert not [f for f in ranks[1]["findings"] if f["kind"] == "device_to_host_sync"]


def test_no_jax_backend_started_before_the_script_initializes_distributed(tmp_path):
    """With the profiler server on (jax.profiler.start_server starts a backend), the script's own
    jax.distributed.initialize() still comes first: the server starts at the first step."""
    from conftest import SCRIPTS, run_cli
    from trace_helpers import free_port
    script = SCRIPTS / "jax_distributed_init.py"
    coord = str(free_port())
    plain = subprocess.run([sys.executable, str(script), coord], env=cli_env(JAX_PLATFORMS="cpu"),
                           capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert plain.returncode == 0, plain.stderr[-3000:]
    port = free_port()
    proc = run_cli("profile", "--port", str(port), "--report", str(tmp_path / "r.json"), str(script),
                   str(free_port()), cwd=tmp_path, JAX_PLATFORMS="cpu")
    assert proc.returncode == 0 and "must be called before" not in proc.stderr, proc.stderr[-3000:]
    assert proc.stdout == plain.stdout
    report = load_report(tmp_path / "r.json")
    assert report["summary"]["steps"] >= 5 and report["profiler"]["server_port"] == port
    assert f"profiler server at localhost:{port}" in proc.stderr
