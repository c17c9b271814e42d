"""Training as it is launched: torch_xla.launch / xmp.spawn children followed under `profile` (real processes),
per-rank reports merged; stopping a spawned run; `merge` of reports that do not belong together."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import SCRIPTS, cli_env, default_sigint, load_report, planted_line, run_cli, warnings_of
from plain_runs import run_plain


def _plain(script: Path, *args: str, cwd) -> subprocess.CompletedProcess:
    return run_plain(script, *args, cwd=cwd, env=cli_env(), timeout=120)


@pytest.mark.parametrize("script", ["mp_launch_item.py", "mp_spawn_item.py"])
def test_spawned_child_is_profiled_and_the_program_is_unchanged(tmp_path, script):
    path = SCRIPTS / script
    plain = _plain(path, cwd=tmp_path)
    assert "parent done" in plain.stdout, plain.stderr[-3000:]
    report = tmp_path / "report.json"
    proc = run_cli("profile", "--port", "none", "--report", str(report), str(path), cwd=tmp_path, timeout=120)
    # the user's program: same output, same exit code (no runtime touched in the parent before it spawns)
    assert proc.returncode == plain.returncode, proc.stderr[-3000:]
    assert proc.stdout == plain.stdout
    assert "Runtime is already initialized" not in proc.stderr
    rank0 = load_report(tmp_path / "report.rank0.json")
    merged = load_report(report)
    assert rank0["run"]["rank"] == 0 and rank0["summary"]["steps"] == 10  # counted in the child
    assert merged["processes"][0]["steps"] == 10 and merged["processes"][0]["rank"] == 0
    assert merged["run"]["exit_code"] == plain.returncode
    assert merged["run"]["run_id"] == rank0["run"]["run_id"]
    assert merged["run"]["pid"] != rank0["run"]["pid"]  # the parent merged what its child wrote
    found = [f for f in merged["findings"] if f["kind"] == "device_to_host_sync" and f["severity"] == "warning"]
    assert found, [(f["kind"], f["severity"]) for f in merged["findings"]]
    assert found[0]["location"]["file"] == str(path)
    assert found[0]["location"]["line"] == planted_line(path)
    assert found[0]["ranks"] == [0]
    assert "item" in found[0]["evidence"]["calls"]
    # printed once: the parent's merged summary, naming the line
    assert proc.stderr.count("ptxla_perf [torch_xla]") == 1
    assert f"{script}:{planted_line(path)}" in proc.stderr


@pytest.fixture(scope="module")
def clean_twins(tmp_path_factory):
    """The clean twins profiled once each, with the profiler server on (a free port): the no-warnings test and the
    server-port test read the same runs."""
    from trace_helpers import free_port
    runs = {}

    def get(script: str):
        if script not in runs:
            out = tmp_path_factory.mktemp(Path(script).stem)
            port = free_port()
            proc = run_cli("profile", "--port", str(port), "--report", str(out / "report.json"),
                           str(SCRIPTS / script), cwd=out, timeout=120)
            runs[script] = (proc, out, port)
        return runs[script]
    return get


@pytest.mark.xdist_group("mp_clean_twins")  # clean_twins' runs are shared with the test below: one xdist worker
@pytest.mark.parametrize("script", ["mp_launch_clean.py", "mp_spawn_clean.py"])
def test_spawned_clean_twin_has_no_warnings(clean_twins, script):
    proc, out, _ = clean_twins(script)
    assert "parent done" in proc.stdout, proc.stderr[-3000:]
    merged = load_report(out / "report.json")
    assert merged["processes"][0]["steps"] == 10
    assert warnings_of(merged) == [], [(f["kind"], f["message"]) for f in warnings_of(merged)]
    assert merged["processes"][0]["device_to_host_per_step"] == 0


@pytest.mark.xdist_group("mp_clean_twins")
def test_child_profiler_server_on_port_plus_local_rank(clean_twins):
    proc, out, port = clean_twins("mp_launch_clean.py")
    assert proc.returncode == 0, proc.stderr[:4000] + "\n...\n" + proc.stderr[-2000:]  # a child's error starts it
    rank0 = load_report(out / "report.rank0.json")
    assert rank0["profiler"]["server_port"] == port  # local rank 0: port + 0, started in the child
    assert proc.stderr.count(f"profiler server at localhost:{port}") == 1


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_stopping_the_parent_stops_every_child(tmp_path, sig):
    pidfile = tmp_path / "child.pid"
    report = tmp_path / "report.json"
    job = subprocess.Popen([sys.executable, "-m", "ptxla_perf", "profile", "--port", "none", "--report",
                            str(report), str(SCRIPTS / "mp_launch_forever.py"), str(pidfile)], cwd=tmp_path,
                           env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           preexec_fn=default_sigint)
    try:
        deadline = time.time() + 90
        while "READY" not in (job.stdout.readline() or "") and time.time() < deadline and job.poll() is None:
            pass
        assert job.poll() is None, job.stderr.read()[-3000:]
        child = int(pidfile.read_text())
        job.send_signal(sig)  # to the parent only, not to the process group
        _, err = job.communicate(timeout=60)
    finally:
        if job.poll() is None:
            job.kill()
    assert job.returncode == 128 + sig, err[-3000:]
    for _ in range(50):  # the child has exited (not left holding the device)
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        os.kill(child, signal.SIGKILL)
        pytest.fail("the spawned child was still running")
    rank0 = load_report(tmp_path / "report.rank0.json")
    assert rank0["run"]["status"] == "interrupted" and rank0["summary"]["steps"] >= 5
    merged = load_report(report)
    assert merged["run"]["status"] == "interrupted"
    assert merged["run"]["exit_code"] == 128 + sig
    assert merged["processes"][0]["status"] == "interrupted"


def _fake(tmp_path, name, rank, run_id, **over):
    """A real report of a tiny run, re-labelled as another rank/run (merge reads reports, not processes)."""
    base = json.loads((tmp_path / "base.json").read_text())
    base["run"].update(rank=rank, run_id=run_id, run_id_source="spawn")
    base["environment"]["process_index"] = rank
    base.update(over)
    path = tmp_path / name
    path.write_text(json.dumps(base))
    return path


@pytest.fixture
def base_report(profiled, tmp_path):
    proc, _, path = profiled(SCRIPTS / "clean_loop.py")
    assert proc.returncode == 0, proc.stderr[-3000:]
    shutil.copy(path, tmp_path / "base.json")
    return tmp_path


@pytest.mark.xdist_group("txla_scripts")  # the run of clean_loop.py is shared with test_profile_findings.py
def test_merge_refuses_reports_of_different_runs_or_schemas(base_report):
    tmp = base_report
    a = _fake(tmp, "a.json", 0, "run-one")
    b = _fake(tmp, "b.json", 1, "run-two")
    res = run_cli("merge", str(a), str(b), "--report", str(tmp / "m.json"), cwd=tmp)
    assert res.returncode == 2
    assert res.stderr.strip().count("\n") == 0 and "different runs" in res.stderr, res.stderr
    assert "Traceback" not in res.stderr and not (tmp / "m.json").exists()

    c = _fake(tmp, "c.json", 1, "run-one", schema="ptxla_perf.report/2")
    res = run_cli("merge", str(a), str(c), cwd=tmp)
    assert res.returncode == 2 and "schema" in res.stderr and res.stderr.strip().count("\n") == 0, res.stderr

    d = _fake(tmp, "d.json", 0, "run-one")
    res = run_cli("merge", str(a), str(d), cwd=tmp)
    assert res.returncode == 2 and "both rank 0" in res.stderr, res.stderr

    (tmp / "junk.json").write_text("{not json")
    res = run_cli("merge", str(a), str(tmp / "junk.json"), cwd=tmp)
    assert res.returncode == 2 and res.stderr.strip().count("\n") == 0, res.stderr

    ok = _fake(tmp, "ok1.json", 1, "run-one")
    res = run_cli("merge", str(a), str(ok), "--report", str(tmp / "m.json"), cwd=tmp)
    assert res.returncode == 0, res.stderr
    merged = load_report(tmp / "m.json")
    assert [p["rank"] for p in merged["processes"]] == [0, 1]
    assert not [f for f in merged["findings"] if f["kind"] in ("straggler", "rank_divergence")]


def test_torch_multiprocessing_spawn_children_are_followed(tmp_path):
    """torch.multiprocessing.spawn (the DDP examples' launcher): both workers profiled, the program unchanged."""
    path = SCRIPTS / "mp_torch_spawn_item.py"
    plain = _plain(path, cwd=tmp_path)
    assert plain.returncode == 5 and "parent done" in plain.stdout, plain.stderr[-3000:]
    report = tmp_path / "report.json"
    proc = run_cli("profile", "--port", "none", "--report", str(report), str(path), cwd=tmp_path, timeout=180)
    assert proc.returncode == plain.returncode, proc.stderr[-3000:]
    assert sorted(proc.stdout.splitlines()) == sorted(plain.stdout.splitlines())  # the workers' order may vary
    merged = load_report(report)
    assert [p["rank"] for p in merged["processes"]] == [0, 1]
    assert all(p["steps"] == 8 for p in merged["processes"])
    found = [f for f in merged["findings"] if f["kind"] == "device_to_host_sync" and f["severity"] == "warning"]
    assert found and found[0]["location"]["line"] == planted_line(path) and found[0]["ranks"] == [0, 1]
