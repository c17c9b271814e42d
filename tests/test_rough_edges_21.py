"""Rough edges a new user hit (issue 21), each pinned by a test that failed before the fix."""
from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import SCRIPTS, cli_env, run_app


def _with_step_times(tmp_path, name: str, p50: float, p90: float) -> str:
    import json
    from pathlib import Path
    report = json.loads((Path(__file__).parent / "fixtures" / "metrics" / "report_fixed.json").read_text())
    report["summary"]["step_time_s"] = {"p50": p50, "p90": p90, "mean": (p50 + p90) / 2, "min": p50 * 0.95,
                                        "max": p90 * 1.05, "n": 40}
    path = tmp_path / name
    path.write_text(json.dumps(report))
    return str(path)


def test_diff_step_time_change_within_the_noise_band_is_noise_not_a_regression(tmp_path):
    """`--fail-on step_time_p50>+5%` failed on noise: a +6 % p50 change where steps of either run spread by 20 %
    (p90 - p50) is reported as noise and passes, unless --strict; a change beyond the spread still fails."""
    def diff(a, b, *extra):
        return subprocess.run([sys.executable, "-m", "ptxla_perf", "diff", a, b, "--fail-on", "step_time_p50>+5%",
                               *extra], env=cli_env(), capture_output=True, text=True, timeout=120)

    base = _with_step_times(tmp_path, "a.json", 0.010, 0.012)  # a busy machine: p90 20 % above p50
    noisy = _with_step_times(tmp_path, "b.json", 0.0106, 0.0127)  # +6 %, within the 2 ms spread
    proc = diff(base, noisy)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    row = next(line for line in proc.stdout.splitlines() if line.startswith("step_time_p50 "))
    assert row.split()[-1] == "noise"
    noise = [line for line in proc.stdout.splitlines() if line.startswith("NOISE step_time_p50>+5%")]
    assert len(noise) == 1 and "within the noise band" in noise[0] and "--strict" in noise[0], proc.stdout
    assert "FAIL" not in proc.stdout
    proc = diff(base, noisy, "--strict")
    assert proc.returncode == 1 and "FAIL step_time_p50>+5%" in proc.stdout, proc.stdout
    # beyond the spread: a regression
    slow = _with_step_times(tmp_path, "c.json", 0.0135, 0.016)
    proc = diff(base, slow)
    assert proc.returncode == 1 and "FAIL step_time_p50>+5%" in proc.stdout and "NOISE" not in proc.stdout
    # a quiet machine (1 % spread): the same +6 % is a regression
    quiet_a = _with_step_times(tmp_path, "qa.json", 0.010, 0.0101)
    quiet_b = _with_step_times(tmp_path, "qb.json", 0.0106, 0.0107)
    proc = diff(quiet_a, quiet_b)
    assert proc.returncode == 1 and "FAIL step_time_p50>+5%" in proc.stdout
    # JSON carries the band and the rule within it
    import json
    doc = json.loads(diff(base, noisy, "--format", "json").stdout)
    assert doc["violations"] == [] and [v["name"] for v in doc["within_noise"]] == ["step_time_p50"]
    assert abs(doc["noise_band_s"] - 0.0021) < 1e-9


def test_sweep_labels_jobs_by_what_differs_in_job_order_without_empty_columns(tmp_path):
    """The sweep table showed `+recipe=mlp recipe.batch_size=16 +2` for both values of log_every, listed job 1
    before job 0 and kept columns that are "-" for every job; sweep.html cut its labels to 24 characters."""
    import re
    proc = run_app("-m", "+recipe=mlp", "recipe.batch_size=16", "recipe.steps=3", "profiler.port=null",
                   "profiler.scalars=false", "recipe.log_every=10,1", "hydra.sweep.dir=sweep", cwd=tmp_path, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    table = proc.stderr[proc.stderr.index("ptxla_perf sweep: 2 run(s)"):].splitlines()[1:5]
    head, rule, *rows = table
    widths = [len(cell) for cell in rule.split("  ")]
    cut = lambda line: [line[sum(widths[:i]) + 2 * i:sum(widths[:i + 1]) + 2 * i].strip() for i in range(len(widths))]
    names, rows = cut(head), [cut(row) for row in rows]
    assert [row[:2] for row in rows] == [["0", "recipe.log_every=10"], ["1", "recipe.log_every=1"]], table
    empty = [n for i, n in enumerate(names) if all(row[i] == "-" for row in rows)]
    assert not empty and "fusion share" not in names and "HFU" in names, table
    page = (tmp_path / "sweep" / "sweep.html").read_text()
    assert re.findall(r'<tr data-job="(\d+)">', page) == ["0", "1"]
    assert ">recipe.log_every=10</text>" in page and ">recipe.log_every=1</text>" in page
    assert "<th>fusion share</th>" not in page and "<th>HFU</th>" in page


def test_sweep_page_keeps_whole_labels_when_two_overrides_differ(tmp_path):
    """Labels made of two swept overrides were cut to `recipe.batch_size=16 rec` on the page's charts: two jobs
    looked the same."""
    import json
    from ptxla_perf.html import sweep_page
    runs = []
    for job, (bs, every) in enumerate([(16, 1), (16, 10), (32, 1)]):
        p = tmp_path / str(job) / "report.json"
        p.parent.mkdir()
        report = {"run": {"overrides": ["+recipe=mlp", f"recipe.batch_size={bs}", f"recipe.log_every={every}"]},
                  "summary": {"steps": 3, "compiles": 1, "step_time_s": {"p50": 0.01 * (job + 1)},
                              "findings_by_severity": {}}}
        p.write_text(json.dumps(report))
        runs.append((p, report))
    labels = ["recipe.batch_size=16 recipe.log_every=1", "recipe.batch_size=16 recipe.log_every=10",
              "recipe.batch_size=32 recipe.log_every=1"]
    from ptxla_perf import sweep
    page = sweep_page.render(runs, tmp_path, table=sweep.table_rows(runs), labels=sweep.labels(runs))
    for label in labels:
        assert page.count(f">{label}</text>") >= 2  # on every chart, whole


@pytest.mark.xdist_group("txla_scripts")  # clean_loop.py's run is test_profile_findings.py's
def test_merge_accepts_rank_arguments_shows_what_differs_offers_force_and_notes_a_single_report(tmp_path, profiled):
    """`merge` refused per-process reports whose command lines differ by a rank argument (`train.py 0 2` vs
    `train.py 1 2`: "different runs (train.py vs train.py)"); a real difference is now shown, --force merges
    anyway, and a merge of one report says it is one process, not the run."""
    import json

    from ptxla_perf.report.assemble import validate
    run = profiled(SCRIPTS / "clean_loop.py")
    assert run.proc.returncode == 0, run.proc.stderr[-3000:]
    base = run.report

    def per_rank(name, rank, *args):
        rep = json.loads(json.dumps(base))
        rep["run"].update(rank=rank, run_id=f"host{rank}-local", run_id_source="local", argv=["train.py", *args])
        rep["environment"].update(process_index=rank, process_count=2)
        (tmp_path / name).write_text(json.dumps(rep))
        return name

    def merge(*args):
        return subprocess.run([sys.executable, "-m", "ptxla_perf", "merge", *args], cwd=tmp_path, env=cli_env(),
                              capture_output=True, text=True, timeout=120)

    for n, (a, b) in enumerate([(["0", "2", "--lr", "0.1"], ["1", "2", "--lr", "0.1"]),
                                (["--rank=0", "--world=2"], ["--rank=1", "--world=2"]),
                                (["--process_id", "0", "--num_processes", "2"],
                                 ["--process_id", "1", "--num_processes", "2"])]):
        proc = merge(per_rank(f"r{n}.rank0.json", 0, *a), per_rank(f"r{n}.rank1.json", 1, *b),
                     "--report", f"m{n}.json")
        assert proc.returncode == 0, (a, b, proc.stderr[-2000:])
        merged = json.loads((tmp_path / f"m{n}.json").read_text())
        assert [p["rank"] for p in merged["processes"]] == [0, 1] and "notes" not in merged["aggregate"]

    a = per_rank("x.rank0.json", 0, "0", "2", "--lr", "0.1")
    b = per_rank("x.rank1.json", 1, "1", "2", "--lr", "0.2")
    proc = merge(a, b, "--report", "x.json")
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert "different runs" in lines[0] and "'0.1' vs '0.2'" in lines[0] and "--force" in lines[0], lines[0]
    assert not (tmp_path / "x.json").exists()
    proc = merge(a, b, "--report", "x.json", "--force")
    assert proc.returncode == 0, proc.stderr[-2000:]
    forced = json.loads((tmp_path / "x.json").read_text())
    validate(forced)  # notes are part of schema v1's aggregate
    (note,) = forced["aggregate"]["notes"]
    assert "--force" in note and "'0.1' vs '0.2'" in note and note in proc.stderr

    proc = merge(b, "--report", "one.json", "--force")
    assert proc.returncode == 0, proc.stderr[-2000:]
    notes = json.loads((tmp_path / "one.json").read_text())["aggregate"]["notes"]
    assert len(notes) == 1 and "one report merged (rank 1 of 2 processes)" in notes[0] and "not the whole run" in \
        notes[0]
    assert f"ptxla_perf: note: {notes[0]}" in proc.stderr
