"""Issue 28, pods: the straggler hidden behind a collective and `merge` at pod scale.

A real two-process JAX job (jax.distributed on localhost, gloo CPU collectives, one CPU device each, the gradient
a mean over ranks), each rank under `profile`: with rank 1 doing 30 ms of plain host work before each step, both
ranks' steps are as long and rank 0 waits on the device in the collective - `merge` names rank 1, the part and
the cost; with no rank slowed, no straggler. The slow job's reports copied to 256 ranks (two of them the slow
rank's) and merged from a directory name those two. Reports are also merged from a glob and from an HTTP server
on localhost (fsspec). torch_xla: `torch_xla.launch` spawns one process on CPU, so the rule is checked on two real
single-process torch_xla reports taken as ranks (one with the planted host work, one waiting on its device)."""
from __future__ import annotations

import functools
import http.server
import importlib.util
import json
import subprocess
import sys
import threading

import pytest

from conftest import ROOT, SCRIPTS, cli_env, load_report, run_cli
from trace_helpers import free_port

# the `profiled` runs are read by several tests each: one xdist worker, so that each is made once
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("pods")]  # real two-process jobs (a few seconds each)


def _bench():
    spec = importlib.util.spec_from_file_location("ptxla_merge_scale_benchmark", ROOT / "benchmarks" / "merge_scale.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _jax_job(out, slow_rank: int, script: str = "jax_dp_two_process.py"):
    """Both ranks of a two-process script (jax_dp_two_process.py: `slow_rank` slowed 30 ms a step), each under
    `profile`; the directory with report.json (rank 0) and report.rank1.json."""
    port = str(free_port())
    out.mkdir(parents=True, exist_ok=True)
    args = (str(slow_rank), "30") if script == "jax_dp_two_process.py" else ()
    procs = [subprocess.Popen([sys.executable, "-m", "ptxla_perf", "profile", "--port", "none", "--report",
                               str(out / "report.json"), str(SCRIPTS / script), port, str(r), *args], cwd=out,
                              env=cli_env(JAX_PLATFORMS="cpu"), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for r in (0, 1)]
    for p in procs:
        _, err = p.communicate(timeout=240)
        assert p.returncode == 0, err[-3000:]
    return out


@pytest.fixture(scope="module")
def jobs(tmp_path_factory):
    pytest.importorskip("jax")
    base = tmp_path_factory.mktemp("pods")
    return {"slow": _jax_job(base / "slow", 1), "equal": _jax_job(base / "equal", -1),
            "late": _jax_job(base / "late", 1, "jax_dp_late_rank.py")}


def _merge(*args, cwd):
    proc = run_cli("merge", *args, cwd=cwd)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    return proc


def _stragglers(report):
    return [f for f in report["findings"] if f["kind"] == "straggler"]


def test_straggler_behind_the_collective_is_named_with_its_part_and_cost(jobs, tmp_path):
    out = tmp_path / "merged.json"
    proc = _merge(str(jobs["slow"]), "--report", str(out), cwd=tmp_path)
    merged = load_report(out)
    ranks = [load_report(jobs["slow"] / n) for n in ("report.json", "report.rank1.json")]
    # the symptom: a synchronous job, both ranks' steps equally long; rank 0's goes to the device wait
    assert [r["run"]["rank"] for r in ranks] == [0, 1]
    # (whether the device wait is rank 0's largest part is the load's: that it waits longer than rank 1 is not)
    device = [r["summary"]["time_breakdown"]["components_s"]["device"] for r in ranks]
    assert device[0] > device[1], [r["summary"]["time_breakdown"] for r in ranks]
    found = _stragglers(merged)
    assert len(found) == 1, [(f["kind"], f["message"]) for f in merged["findings"]]
    s = found[0]
    assert s["severity"] == "warning" and s["ranks"] == [1] and s["evidence"]["rank"] == 1
    assert s["evidence"]["phase"] == "own_work" and s["evidence"]["component"] in ("host", "other")
    assert 0 < s["cost"]["ms_per_step"] <= round(s["evidence"]["gap_s"] * 1e3, 3)  # at most its own excess
    assert "Rank 1 is a straggler" in s["message"] and "straggler" in proc.stderr
    # what each rank waited for the other: rank 0 waits, rank 1 (the straggler) does not
    rows = {p["rank"]: p for p in merged["processes"]}
    assert rows[0]["collective_wait_s"] > rows[1]["collective_wait_s"]
    assert {p["collective_wait_basis"] for p in rows.values()} == {"cross_rank"}  # CPU: no device time measured
    # the page's heat map: the straggler's row on top, a map of its slow part beside the step time
    hm = merged["aggregate"]["heatmap"]
    assert hm["ranks"] == [1, 0] and hm["part"] == s["evidence"]["component"]
    assert len(hm["step_ms"][0]) == hm["columns"] > 0


def test_a_rank_that_ran_ahead_and_waited_for_a_late_peer_is_not_the_straggler(jobs, tmp_path):
    """Rank 0 never waits in its loop: its final read waits for everything its device did - the all-reduce's wait
    for rank 1 at every step and, once, for rank 1's late start - spread back over its steps (pacing.py), so its
    steps come out longer than rank 1's. It waits for rank 1, whose own host work is the cause."""
    out = tmp_path / "merged.json"
    _merge(str(jobs["late"]), "--report", str(out), cwd=tmp_path)
    merged = load_report(out)
    p50 = {p["rank"]: p["step_time_s"]["p50"] for p in merged["processes"]}
    assert p50[0] > 1.25 * p50[1], p50  # the case: the waiting rank's steps are the longer ones
    found = _stragglers(merged)
    assert len(found) == 1 and found[0]["ranks"] == [1], [(f["kind"], f["message"]) for f in merged["findings"]]
    assert found[0]["evidence"]["phase"] in ("host", "own_work"), found[0]["message"]
    assert merged["aggregate"]["slowest_rank"] == 1


def test_no_rank_slowed_no_straggler(jobs, tmp_path):
    out = tmp_path / "merged.json"
    _merge(str(jobs["equal"] / "report*.json"), "--report", str(out), cwd=tmp_path)  # a glob
    merged = load_report(out)
    assert [p["rank"] for p in merged["processes"]] == [0, 1]
    # Whether two equal ranks stay equal depends on the machine's load (one process can get less CPU: then it is a
    # straggler of that run), so the verdict is judged on one rank's report standing for both: no straggler ...
    from ptxla_perf.rules import ranks as rank_rules
    one = load_report(jobs["equal"] / "report.json")
    assert not [f for f in rank_rules.judge([_as_rank(one, 0), _as_rank(one, 1)]) if f.kind == "straggler"]
    # ... and the merged job names its slowest rank by what it found: without a straggler, the largest p50
    agg, p50 = merged["aggregate"], {p["rank"]: p["step_time_s"]["p50"] for p in merged["processes"]}
    if _stragglers(merged):
        assert agg["slowest_rank"] == _stragglers(merged)[0]["evidence"]["rank"], agg
    else:
        assert agg["slowest_rank"] == max(p50, key=p50.get) and agg["slowest_rank_basis"] == "step_time_p50", agg


def test_slowest_rank_is_the_straggler_not_the_largest_p50(jobs, tmp_path):
    """A synchronous job: both ranks' steps are as long (the collective), so the waiting rank's p50 can be a hair
    above the straggler's. The slowest rank is the one the others wait for: in the report, the console and the page."""
    from ptxla_perf import html
    names = ("report.json", "report.rank1.json")
    reports = {n: json.loads((jobs["slow"] / n).read_text()) for n in names}
    rank1_p50 = reports["report.rank1.json"]["summary"]["step_time_s"]["p50"]
    reports["report.json"]["summary"]["step_time_s"]["p50"] = rank1_p50 * 1.002  # rank 0 waits: jitter above
    pod = tmp_path / "pod"
    pod.mkdir()
    for n, r in reports.items():
        (pod / n).write_text(json.dumps(r))
    out = tmp_path / "merged.json"
    proc = _merge(str(pod), "--report", str(out), cwd=tmp_path)
    merged = load_report(out)
    assert [f["evidence"]["rank"] for f in _stragglers(merged)] == [1]
    p50 = {p["rank"]: p["step_time_s"]["p50"] for p in merged["processes"]}
    assert p50[0] > p50[1]  # the largest p50 is the waiting rank's
    agg = merged["aggregate"]
    assert agg["slowest_rank"] == 1 and agg["slowest_rank_basis"] == "straggler", agg
    assert "slowest rank 1, the straggler the others wait for" in proc.stderr
    assert "slowest rank 1, the straggler the others wait for" in html.render(merged)


def test_256_ranks_from_a_directory_name_the_two_slow_ones(jobs, tmp_path):
    bench = _bench()
    reports = [json.loads((jobs["slow"] / n).read_text()) for n in ("report.json", "report.rank1.json")]
    slow = bench.slow_ranks_for(256, 2)
    bench.write_copies(reports, 256, slow, str(tmp_path / "pod"))
    (tmp_path / "pod" / "notes.json").write_text('{"not": "a report"}')  # a directory holds other files too
    out = tmp_path / "merged.json"
    proc = _merge(str(tmp_path / "pod"), "--report", str(out), cwd=tmp_path)
    merged = load_report(out)
    found = _stragglers(merged)
    assert len(found) == 1 and found[0]["ranks"] == slow, [f["message"] for f in found]
    assert merged["aggregate"]["processes"] == 256 and merged["aggregate"]["hosts"] == 32
    assert "left out 1 file" in proc.stderr
    hm = merged["aggregate"]["heatmap"]
    assert hm["ranks"][0] == slow[0] and slow[1] in hm["ranks"][:16]  # slow ranks first, their hosts grouped
    assert hm["ranks_left_out"] == 256 - len(hm["ranks"]) > 0
    host_runs = [h for i, h in enumerate(hm["hosts"]) if i == 0 or h != hm["hosts"][i - 1]]
    assert len(host_runs) == len(set(hm["hosts"]))  # each host's rows together
    # the console names the slow ranks and no long list of the others
    line = next(ln for ln in proc.stderr.splitlines() if "straggler" in ln and "slowest rank" not in ln)
    assert all(str(k) in line for k in slow) and "and " not in line.split(":")[0]
    rank_lines = [ln.split()[1] for ln in proc.stderr.splitlines() if ln.startswith("    rank ")]
    assert len(rank_lines) <= 8 and rank_lines[:2] == [str(k) for k in slow]
    assert "(ranks 0, 1, 2, 3 and 252 more)" in proc.stderr  # findings on every rank: four named


def test_reading_up_to_the_digest_merges_the_same_report(jobs, tmp_path):
    """The real job's reports at 64 ranks: read up to each rank's `rank_digest` (what `merge` does) and parsed
    whole, they merge to the same report (tests/test_merge_digest.py for the cases)."""
    from ptxla_perf import SCHEMA_ID
    from ptxla_perf.pods import merge, inputs as merge_inputs
    bench = _bench()
    reports = [json.loads((jobs["slow"] / n).read_text()) for n in ("report.json", "report.rank1.json")]
    assert all(r["rank_digest"]["steady_steps"] == r["summary"]["steady_steps"] for r in reports)
    slow = bench.slow_ranks_for(64, 2)
    bench.write_copies(reports, 64, slow, str(tmp_path / "pod"))
    fast, names, _ = merge_inputs.load_all([str(tmp_path / "pod")], SCHEMA_ID)
    full, _, _ = merge_inputs.load_all([str(tmp_path / "pod")], SCHEMA_ID, digest=False)
    assert all("steps" not in r for r in fast) and all("steps" in r for r in full)
    a, b = merge.merge(fast, names), merge.merge(full, names)
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
    assert _stragglers(a)[0]["ranks"] == slow


def test_merge_from_an_http_server(jobs, tmp_path):
    pytest.importorskip("fsspec")
    pytest.importorskip("aiohttp")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(jobs["slow"]))
    handler.log_message = lambda *a: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/"
        out = tmp_path / "merged.json"
        _merge(url, "--report", str(out), cwd=tmp_path)
        merged = load_report(out)
        assert [f["ranks"] for f in _stragglers(merged)] == [[1]]
        assert merged["run"]["merged_from"] == [url + "report.json", url + "report.rank1.json"]
    finally:
        server.shutdown()


@pytest.mark.parametrize("args, says", [
    (["{d}/empty"], "no .json reports in directory"),
    (["{d}/nothing*.json"], "no files match"),
    (["nope://bucket/run/"], "cannot open nope://bucket/run/"),
])
def test_bad_merge_inputs_are_one_line(tmp_path, args, says):
    (tmp_path / "empty").mkdir()
    proc = run_cli("merge", *[a.format(d=tmp_path) for a in args], cwd=tmp_path)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert says in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr


@pytest.fixture(scope="module")
def txla_ranks(tmp_path_factory):
    """Two real torch_xla runs as ranks of one synchronous job: rank 0 waits on its device about as long as rank 1
    does host work (what a collective makes it do); rank 2, a copy of rank 0's run (no one slowed)."""
    pytest.importorskip("torch_xla")
    base = tmp_path_factory.mktemp("txla")
    out = {}
    for name, args in (("waiting", ("0", "768")), ("slow", ("30", "64"))):
        proc = run_cli("profile", "--port", "none", "--report", str(base / f"{name}.json"),
                       str(SCRIPTS / "txla_rank_work.py"), *args, cwd=base)
        assert proc.returncode == 0, proc.stderr[-3000:]
        out[name] = json.loads((base / f"{name}.json").read_text())
    return out


def _as_rank(report, rank, n=2):
    r = json.loads(json.dumps(report))
    r["run"]["rank"], r["environment"]["process_index"], r["environment"]["process_count"] = rank, rank, n
    return r


def test_torch_xla_rank_doing_host_work_while_the_other_waits_is_the_straggler(txla_ranks):
    from ptxla_perf.rules import ranks as rank_rules
    found = [f.to_json() for f in rank_rules.judge([_as_rank(txla_ranks["waiting"], 0),
                                                    _as_rank(txla_ranks["slow"], 1)]) if f.kind == "straggler"]
    assert len(found) == 1 and found[0]["ranks"] == [1], found
    assert found[0]["evidence"]["phase"] in ("own_work", "step") and found[0]["cost"]["ms_per_step"] > 0
    if found[0]["evidence"]["phase"] == "own_work":
        assert found[0]["evidence"]["component"] in ("host", "other")


def test_torch_xla_ranks_alike_have_no_straggler(txla_ranks):
    from ptxla_perf.rules import ranks as rank_rules
    same = [_as_rank(txla_ranks["waiting"], 0), _as_rank(txla_ranks["waiting"], 1)]
    assert not [f for f in rank_rules.judge(same) if f.kind == "straggler"]


def test_url_without_fsspec_is_one_line(tmp_path):
    """fsspec is optional: where it is not installed (an import that fails, as Python does for a missing package)
    a URL is one line that says what to install."""
    code = ("import sys; sys.modules['fsspec'] = None\n"
            "from ptxla_perf.cli import main\nsys.exit(main(['merge', 'gs://bucket/run42/']))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=cli_env(), capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "needs fsspec" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
