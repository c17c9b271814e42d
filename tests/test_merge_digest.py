"""Issue 28, pods: `merge` reads each rank's report up to its `rank_digest` (the steady steps' columns, written
from steps[] when the report is assembled) instead of parsing steps[]. The fast read and the full parse merge to
the same report - the straggler, the heat map, the per-rank rows, the findings - on reports of every kind of step
(with and without a time breakdown, with data waits and host reads), trimmed or not; a report without a digest, a
digest of another version, or keys reordered by another tool is read whole."""
from __future__ import annotations

import json
import random

import pytest

from ptxla_perf import SCHEMA_ID
from ptxla_perf.pods import merge, inputs as merge_inputs
from ptxla_perf.model import rank_digest
from ptxla_perf.report import assemble as R, retention
from ptxla_perf.analysis.rank_wait import steady_rows
from ptxla_perf.model.records import Location, StepRecord, Transfers


def _records(n: int, rank: int, slow: bool, breakdown: bool = True, seed: int = 0) -> list[StepRecord]:
    """`n` steps of a data-parallel loop: two compiles at the start, a host read every 7th step, a data wait on
    every step; a slow rank spends 20 ms more on its host while the others wait on the device for it."""
    rng = random.Random(seed * 1000 + rank)
    site = Location("/train.py", 42, "<module>")
    out = []
    for i in range(n):
        own = 0.002 + rng.random() * 1e-4 + (0.02 if slow else 0.0)
        wait = 0.001 + rng.random() * 1e-4 + (0.0 if slow else 0.02)
        comp = 0.5 if i < 2 else 0.0
        read = i % 7 == 3
        out.append(StepRecord(
            index=i, wall_time_s=own + wait + comp, site=site, compiles=1 if i < 2 else 0, compile_time_s=comp,
            cached_compiles=0 if i < 2 else 1, executions=1, phase="train",
            device_to_host=Transfers(1 if read else 0, 4 if read else 0),
            device_to_host_time_s=(wait / 2 if read else 0.0), data_wait_s=own / 4,
            launch_time_s=3e-4 if breakdown else None, device_wait_s=wait if breakdown else None,
            host_cpu_s=own - 3e-4 if breakdown else None))
    return out


def _write_pod(tmp_path, n_ranks: int, steps: int, slow: set[int], **kw) -> list[str]:
    paths = []
    for rank in range(n_ranks):
        rep = R.build(backend="jax", run={"kind": "script", "status": "completed", "run_id": "r1",
                                          "run_id_source": "env", "rank": rank, "argv": ["train.py"]},
                      env=dict(R.environment({}), process_index=rank, process_count=n_ranks,
                               hostname=f"host{rank // 4}"),
                      steps=_records(steps, rank, rank in slow, **kw), retention=retention.Retention.of({}))
        path = tmp_path / ("report.json" if rank == 0 else f"report.rank{rank}.json")
        R.write(rep, str(path), html=False)
        paths.append(str(path))
    return paths


def _both(specs):
    fast, names, _ = merge_inputs.load_all(specs, SCHEMA_ID)
    full, names_full, _ = merge_inputs.load_all(specs, SCHEMA_ID, digest=False)
    assert names == names_full
    return fast, full, names


@pytest.mark.parametrize("steps,knobs,breakdown", [(60, "", True), (60, "", False),
                                                   (400, "trim_above=100,first=20,last=20,bucket_min=50", True)])
def test_fast_read_merges_the_same_report_as_the_full_parse(tmp_path, monkeypatch, steps, knobs, breakdown):
    monkeypatch.setenv("PTXLA_PERF_STEP_RETENTION", knobs)
    _write_pod(tmp_path, 12, steps, {5, 9}, breakdown=breakdown)
    fast, full, names = _both([str(tmp_path)])
    # every rank but the one merge reads whole was read up to its digest, without steps[]
    assert all(isinstance(r, merge_inputs.PartialReport) and "steps" not in r for r in fast)
    assert all("steps" in r and not isinstance(r, merge_inputs.PartialReport) for r in full)
    a, b = merge.merge(fast, names), merge.merge(full, names)
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
    # and the merge saw what it should: the two slow ranks (the breakdown's own_work, else their step time)
    found = [f for f in a["findings"] if f["kind"] == "straggler"]
    assert len(found) == 1 and found[0]["ranks"] == [5, 9], [f["message"] for f in a["findings"]]
    hm = a["aggregate"]["heatmap"]
    assert hm["ranks"][0] in (5, 9) and sorted(hm["slow_ranks"]) == [5, 9]  # their hosts' rows first
    assert a["steps"] == full[0]["steps"]  # rank 0's steps are kept: read whole
    if "trim_above" in knobs:
        assert a["step_buckets"] == full[0]["step_buckets"] and len(full[0]["steps"]) < steps


def test_digest_is_the_steps_columns(tmp_path):
    """What the writer puts in `rank_digest` is what a merge derives from steps[]; the schema has it."""
    path = _write_pod(tmp_path, 1, 30, set())[0]
    rep = json.loads(open(path).read())
    R.validate(rep)
    digest = rank_digest.Steady.from_json(rep["rank_digest"])
    assert digest == rank_digest.Steady.of_rows(steady_rows(rep))
    assert len(digest) == rep["summary"]["steady_steps"] and digest.breakdown_complete
    keys = list(rep)
    assert rep["rank_digest"]["keys"] == keys
    assert keys.index("rank_digest") < keys.index("steps") == len(keys) - 1  # steps[] last: a merge stops before


def test_reports_without_a_usable_digest_are_read_whole(tmp_path):
    paths = _write_pod(tmp_path, 4, 40, {3})
    old = json.loads(open(paths[1]).read())
    del old["rank_digest"]  # a report written before the digest
    json.dump(old, open(paths[1], "w"))
    other = json.loads(open(paths[2]).read())
    other["rank_digest"]["version"] = 99  # a digest this reader does not know
    json.dump(other, open(paths[2], "w"))
    sorted_keys = json.loads(open(paths[3]).read())  # keys sorted by another tool: steps before summary
    json.dump(sorted_keys, open(paths[3], "w"), sort_keys=True)
    fast, full, names = _both([str(tmp_path)])
    by_rank = {r["run"]["rank"]: r for r in fast}
    assert all("steps" in by_rank[k] for k in (1, 2)) and isinstance(by_rank[0], merge_inputs.PartialReport)
    assert "summary" in by_rank[3] and "findings" in by_rank[3]
    assert json.dumps(merge.merge(fast, names), sort_keys=True) == json.dumps(merge.merge(full, names),
                                                                             sort_keys=True)


def test_a_digest_past_the_first_read_and_bad_json(tmp_path, monkeypatch):
    monkeypatch.setattr(merge_inputs, "_FIRST_READ", 64)  # the digest lies past several reads
    paths = _write_pod(tmp_path, 3, 30, set())
    rep = merge_inputs.read_report(paths[1])
    assert isinstance(rep, merge_inputs.PartialReport) and rep["run"]["rank"] == 1
    assert rep.full_report() == json.loads(open(paths[1]).read())
    cut = tmp_path / "cut.json"
    cut.write_text(open(paths[1]).read()[:5000])  # a report cut short before its digest: json's own error
    with pytest.raises(ValueError):
        merge_inputs.read_report(str(cut))
    with pytest.raises(merge_inputs.MergeInputError, match="is not JSON"):
        merge_inputs.load_all([str(cut)], SCHEMA_ID)


def test_the_fast_read_reads_the_digest(tmp_path):
    """A digest that disagrees with its steps (hand-edited) changes the fast merge and not the full one: the
    comparison above compares two different reads."""
    paths = _write_pod(tmp_path, 4, 40, set())
    rep = json.loads(open(paths[2]).read())
    cols = rank_digest.Steady.from_json(rep["rank_digest"])
    slowed = rank_digest.Steady([v * 10 for v in cols.step_s], cols.host_s, cols.data_s, cols.parts_s,
                                cols.breakdown_complete)
    rep["rank_digest"] = slowed.to_json(rep["rank_digest"]["keys"])
    json.dump(rep, open(paths[2], "w"))
    fast, full, names = _both([str(tmp_path)])
    a, b = merge.merge(fast, names), merge.merge(full, names)
    assert a["aggregate"]["heatmap"] != b["aggregate"]["heatmap"]
