"""Findings typed (issue 26): every finding says where it came from (`origin`) and what it costs (`cost`) as
fields, in the JSON too; one registry of rules by scope, run the same way by a live session and by `report.build`;
the HTML card labels each share by what it is a share of; reports of 0.4.0 (tests/fixtures/reports, written by
0.4.0's code: make.py) still read in view, diff and merge."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import load_report, run_cli
from ptxla_perf import html as H
from ptxla_perf.report import assemble as R
from ptxla_perf.rules import ranks as rank_rules, registry
from ptxla_perf.model import thresholds
from ptxla_perf.rules.end import run_end
from ptxla_perf.rules.iteration import ITERATION_RULES, BoundEvidence
from ptxla_perf.model.records import Boundary, Event, Location, StepRecord, Transfers


def _loc(d):
    return Location(d["file"], int(d["line"]), d.get("function", "?")) if d else None


def step_from_json(d):
    """An iteration record rebuilt from a report's `steps[]` (for report.build over a live run's steps)."""
    d = dict(d)
    d["boundaries"] = [Boundary(int(b["index"]), float(b["wall_time_s"]), _loc(b.get("site")),
                                int(b.get("compiles", 0)), float(b.get("compile_time_s", 0.0)),
                                int(b.get("executions", 0)), int(b.get("early_executions", 0)),
                                int(b.get("device_to_host", 0)), int(b.get("optimizer_steps", 0)),
                                int(b.get("backward_calls", 0)), bool(b.get("launched", True)))
                       for b in d.get("boundaries", [])]
    d["site"] = _loc(d.get("site"))
    d["device_to_host"] = Transfers(**d.pop("device_to_host_transfers", d.get("device_to_host", {})))
    d["host_to_device"] = Transfers(**d.get("host_to_device", {}))
    d["events"] = [Event(e["kind"], _loc(e.get("location")), e.get("detail", {})) for e in d.get("events", [])]
    if "live_arrays" in d:
        d["live"] = (d.pop("live_arrays"), d.pop("live_bytes", None))
    known = StepRecord.__dataclass_fields__
    return StepRecord(**{k: v for k, v in d.items() if k in known})
from ptxla_perf.trace.rules import judge as judge_window
from ptxla_perf.model.finding import ORIGINS, SEVERITIES, Cost, Finding, cost_of, origin_of, severity_counts

FIX = Path(__file__).parent / "fixtures" / "reports"


def _steps(n: int = 10, read: bool = True, slow: float = 0.0) -> list[StepRecord]:
    """A loop that recompiles once mid-run and reads a value every step."""
    return [StepRecord(i, 0.5 if i == 0 else 0.02 + slow, site=Location("/x/train.py", 12, "<module>"),
                       compiles=1 if i in (0, 5) else 0, compile_time_s=0.3 if i in (0, 5) else 0.0, executions=1,
                       device_to_host=Transfers(1 if read else 0), optimizer_steps=1) for i in range(n)]


def _build(**run) -> dict:
    rep = R.build(backend="torch_xla", run={"kind": "script", "status": "completed", "argv": ["t.py"], **run},
                  env=R.environment({}), steps=_steps())
    R.validate(rep)
    return json.loads(json.dumps(rep, default=R._json_default))


def _card(page: str, kind: str) -> str:
    return re.search(rf'<article class="card[^"]*" id="finding-\d+" data-kind="{kind}">.*?</article>', page, re.S)[0]


# --- the HTML card --------------------------------------------------------------------------------------------
def test_card_says_host_bound_share_is_of_the_measured_time():
    """host_bound's `share` is a share of the step's measured time (wall less `other`); its share of the wall time
    is another number. The card said the first was "of wall time"."""
    typed = Finding("host_bound", "warning", "The host keeps the step busy.", 8,
                    evidence=BoundEvidence(10.0, 20.0, 0.8, 0.5),
                    cost=Cost(ms_per_step=10.0, share_of_wall=0.5, share_of_measured=0.8)).to_json()
    old = json.loads((FIX / "v040_rank0.json").read_text())
    old_style = next(f for f in old["findings"] if f["kind"] == "host_bound")  # 0.4.0: no `cost`
    for f in (typed, old_style):
        rep = _build()
        rep["findings"] = [f]
        card = _card(H.render(rep), "host_bound")
        assert "<b>50%</b> of wall time" in card, card
        assert "<b>80%</b> of measured time" in card, card
        assert "<b>80%</b> of wall time" not in card


# --- origin and cost in the JSON ------------------------------------------------------------------------------
def test_every_finding_has_a_typed_origin_and_cost_in_the_json():
    rep = _build()
    by_kind = {f["kind"]: f for f in rep["findings"]}
    assert {f["origin"] for f in rep["findings"]} == {"runtime"}
    recompile = by_kind["recompilation"]
    assert recompile["cost"]["compile_s"] == pytest.approx(0.3) and 0 < recompile["cost"]["share_of_wall"] < 1
    assert by_kind["device_to_host_sync"]["cost"]["per_step"] == by_kind["device_to_host_sync"]["per_step"]
    assert set(recompile["cost"]) <= {"ms_per_step", "share_of_wall", "share_of_measured", "per_step", "compile_s",
                                      "extra_graphs_per_step", "bytes_per_step"}

    traced = judge_window({"steady_steps": 4, "breakdown_share": {"data": 0.4},
                           "breakdown_ms_per_step": {"data": 8.0}}, {}, {}, "host")
    assert [(f["kind"], f["origin"], f["cost"]) for f in traced] == [
        ("input_bound", "trace", {"ms_per_step": 8.0, "share_of_wall": 0.4})]
    assert traced[0]["evidence"]["source"] == "trace"  # kept one version for 0.4.0 readers (docs/report.md)

    ended = [f.to_json() for f in run_end("stopped", "step time above the limit", _steps())]
    assert [(f["kind"], f["origin"], f["severity"]) for f in ended] == [("run_stopped", "run", "error")]

    ranks = [_build(rank=k) for k in range(3)]
    ranks[2]["summary"]["compiles"] += 3  # rank 2 compiled more graphs than the others
    crossed = [f.to_json() for f in rank_rules.judge(ranks)]
    assert [(f["kind"], f["origin"], f["ranks"]) for f in crossed] == [("rank_divergence", "ranks", [2])]
    for f in [*rep["findings"], *traced, *ended, *crossed]:
        assert f["origin"] in ORIGINS and Cost.from_json(f["cost"]).to_json() == f["cost"]


def test_a_stopped_run_built_offline_says_so_like_a_live_one():
    rep = _build(status="stopped", stop_reason="the guard stopped it")
    assert rep["findings"][0]["kind"] == "run_stopped" and rep["summary"]["findings_by_severity"]["error"] == 1


# --- one registry ---------------------------------------------------------------------------------------------
def test_the_registry_holds_every_scope_and_each_runs_from_it():
    scopes = {r.scope for r in registry.RULES}
    assert scopes == {"iteration", "trace", "ranks", "run_end"}
    assert registry.scoped("iteration") == ITERATION_RULES
    kinds = {r.kind for r in registry.RULES}
    assert {"memory_growth", "missing_donation", "straggler", "rank_divergence", "run_stopped", "oom",
            "memory_headroom", "collective_bound"} <= kinds
    assert {r.kind for r in registry.backend_rules("torch_xla")} >= {"eager_ops", "spmd", "dynamo_graph_break"}
    assert [r.kind for r in registry.backend_rules("jax")] == ["eager_compile"]
    assert registry.backend_rules("no such backend") == ()
    # offline tools find a backend's rules without loading its framework
    code = ("import sys; from ptxla_perf.rules import registry; registry.backend_rules('torch_xla'); "
            "registry.backend_rules('jax'); print(sorted({'torch', 'torch_xla', 'jax'} & set(sys.modules)))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stderr[-2000:]


def test_trace_thresholds_are_named_and_documented():
    table = thresholds.markdown_table()
    for name in ("trace_input_bound_share", "trace_idle_share", "trace_host_bound_share", "trace_collective_share",
                 "host_bound_user_share"):
        assert f"| `{name}` |" in table
    just_under = thresholds.value("trace_input_bound_share") - 0.01
    assert not judge_window({"steady_steps": 4, "breakdown_share": {"data": just_under},
                             "breakdown_ms_per_step": {"data": 1.0}}, {}, {}, "host")


@pytest.fixture(scope="module")
def live(reads_and_fallback_run):
    return load_report(reads_and_fallback_run["path"])  # test_one_source.py's run


@pytest.mark.xdist_group("reads_and_fallback")
def test_report_build_runs_the_rules_a_live_session_runs(live):
    """The report's `rules` (judged and not judged) of a live torch_xla run, and of report.build over its records:
    the same set (0.4.0's build ran only the backend-neutral rules)."""
    rebuilt = R.build(backend=live["backend"], run=live["run"], env=live["environment"],
                      steps=[step_from_json(s) for s in live["steps"]])

    def kinds(rep):
        return sorted([*rep["rules"]["judged"], *(x["kind"] for x in rep["rules"]["not_judged"])])
    assert kinds(rebuilt) == kinds(live)
    assert {"eager_ops", "memory_growth", "missing_donation"} <= set(kinds(live))
    assert all(f["origin"] == "runtime" and isinstance(f["cost"], dict) for f in live["findings"])
    read = next(f for f in live["findings"] if f["kind"] == "device_to_host_sync" and f["severity"] == "warning")
    assert read["cost"].get("ms_per_step") == read["evidence"].get("wait_ms_per_step")


# --- 0.4.0 reports ---------------------------------------------------------------------------------------------
def test_a_040_report_reads_its_origin_and_cost_from_the_evidence():
    old = json.loads((FIX / "v040_rank0.json").read_text())
    assert old["tool_version"] == "0.4.0" and not any("origin" in f for f in old["findings"])
    origins = {f["kind"] + ("/trace" if f["evidence"].get("source") == "trace" else ""): origin_of(f)
               for f in old["findings"]}
    assert origins["input_bound/trace"] == "trace" and origins["host_bound"] == "runtime"
    host = cost_of(next(f for f in old["findings"] if f["kind"] == "host_bound"))
    assert (host.share_of_wall, host.share_of_measured, host.ms_per_step) == (0.5, 0.8, 10.0)
    assert severity_counts(map(Finding.from_json, old["findings"])) == old["summary"]["findings_by_severity"]
    assert list(severity_counts([])) == list(SEVERITIES)


def test_040_reports_view_diff_and_merge(tmp_path):
    a, b = FIX / "v040_rank0.json", FIX / "v040_rank1.json"
    page = tmp_path / "page.html"
    proc = run_cli("view", str(a), "--out", str(page))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "<b>50%</b> of wall time" in _card(page.read_text(), "host_bound")
    proc = run_cli("diff", str(a), str(b), "--format", "json")
    assert proc.returncode == 0, proc.stderr[-2000:]
    merged_path = tmp_path / "merged.json"
    proc = run_cli("merge", str(a), str(b), "--report", str(merged_path))
    assert proc.returncode == 0, proc.stderr[-2000:]
    merged = load_report(merged_path)
    by = {(f["kind"], f["origin"]) for f in merged["findings"]}
    assert ("input_bound", "trace") in by and ("host_bound", "runtime") in by
    assert ("straggler", "ranks") in by  # rank 1's steps are 10 ms slower


def test_live_findings_of_a_launch_bound_run_through_roofline_merge_and_diff():
    """A recorded launch-bound run (tests/fixtures/steps/tiny_steps_many_inputs: torch_xla, launch the steady
    step's largest part) judged live: its launch_bound Finding (typed evidence, measured cost) names the roofline's
    launch-bound verdict, and keeps its cost through the report, a merge of two ranks and a diff."""
    import copy
    from recorded_steps import RECORDED
    from ptxla_perf.pods import merge as M
    from ptxla_perf import peaks
    from ptxla_perf.analysis import roofline
    from ptxla_perf.diff import compare, from_report
    from ptxla_perf.rules.iteration import LaunchEvidence, analyze
    from ptxla_perf.rules.memory import RULES as MEMORY_RULES
    text = (RECORDED / "tiny_steps_many_inputs.jsonl").read_text().replace("$ROOT", str(FIX.parents[2]))
    records = [StepRecord.from_json(json.loads(line)) for line in text.splitlines()]
    analysis = analyze(copy.deepcopy(records), rules=(*registry.backend_rules("torch_xla"), *MEMORY_RULES))
    (launch,) = [f for f in analysis.findings if f.kind == "launch_bound"]
    assert isinstance(launch.evidence, LaunchEvidence) and launch.severity == "warning" and launch.cost.ms_per_step
    for s in analysis.steady:  # a tiny cost: the step is far above its prediction, bound by its largest part
        s.flops, s.bytes_accessed = 1e3, 1e3
    sec = roofline.section(analysis.figures.steady_its, {"source": "xla_cost_analysis"}, peaks.Peak(1e12, 1e11, "f32", "t", "t"),
                           None, roofline.sinks(analysis.findings), analysis.figures.steady_breakdown()).to_json()
    assert sec["verdict"] == "launch-bound" and sec["bound_by"]["finding"] == "launch_bound", sec
    ranks = []
    for k in range(2):
        rep = R.build(backend="torch_xla", run={"kind": "script", "status": "completed", "argv": ["t.py"], "rank": k},
                      env=R.environment({"process_index": k, "process_count": 2}), steps=copy.deepcopy(records))
        ranks.append(json.loads(json.dumps(rep, default=R._json_default)))
    written = next(f for f in ranks[0]["findings"] if f["kind"] == "launch_bound")
    assert written["cost"] == launch.cost.to_json() and Finding.from_json(written).cost == launch.cost
    merged = M.merge(copy.deepcopy(ranks), ["r0.json", "r1.json"])
    (both,) = [f for f in merged["findings"] if f["kind"] == "launch_bound"]
    assert both["cost"] == launch.cost.to_json() and both["ranks"] == [0, 1] and both["count"] == 2 * launch.count
    assert merged["summary"]["findings_by_severity"] == severity_counts(map(Finding.from_json, merged["findings"]))
    diffed = compare(from_report(ranks[0], "a"), from_report(merged, "b"))
    assert not [c for c in diffed.finding_changes if c.kind == "launch_bound"]


# --- one shape of evidence (issue 39) ---------------------------------------------------------------------------
def _evidence_samples() -> list:
    """One instance of every evidence class, its optional keys set where a class writes them only when seen."""
    from ptxla_perf.backends.jax import rules as jax_rules
    from ptxla_perf.backends.torch_xla import rules as xla_rules
    from ptxla_perf.model.finding import NoEvidence, WrittenEvidence
    from ptxla_perf.model.records import SpmdEvidence
    from ptxla_perf.pods.merge import PerRankEvidence
    from ptxla_perf.report.outputs import FaultEvidence
    from ptxla_perf.report.precedence import DeferredEvidence
    from ptxla_perf.rules import end, evidence as E, iteration as It, memory
    from ptxla_perf.trace import rules as T
    from ptxla_perf.xla import oom
    seen = E.SeenCalls({"loss.item": 3}, "torch", [[1]], 4, ["add"], "float32", ["numpy"])
    loc = {"file": "/x/t.py", "line": 3, "function": "f"}
    window = T.WindowHostEvidence(4.0, 1.0, 0.8, 5, distorted_window=3.2)
    return [
        NoEvidence(), WrittenEvidence({"any": [1, {"key": None}], "as": "written"}),
        end.OomEvidence(oom.parse("RESOURCE_EXHAUSTED: Ran out of memory in memory space hbm. Used 17.50G of "
                                  "15.48G hbm. Exceeded hbm capacity by 2.02G."), 4, {"peak_bytes": 10}),
        end.HeadroomEvidence(9, 10, "user", 1, 0.1, "g", [{"bytes": 8}]),
        memory.GrowthEvidence(True, 1.0, 64, 640, 10, 5, [1, 2], [64, 128], None, "unknown", {"holder": "cache"}),
        memory.DonationFindingEvidence("step", 64, 2, [[4, 4]], ["state"]),
        seen, E.SeenCalls(), E.ClosureReadEvidence(seen),
        E.HostReadEvidence(seen, "train", 5, 6, 1.5, 40, 1.0, "skip", "if x.item(): continue", True),
        E.HostReadEvidence(E.SeenCalls(), None, 1, 6, 0.0, 0),
        E.UploadEvidence(seen, 2, 1, {"round_trip": 8}, ["loss.item"], 8, 0.001, None),
        E.UploadEvidence(E.SeenCalls(), 1, 0),
        E.RecompileEvidence("site:/x/t.py:3", 0.6, 0.1, [2, 4], "train", 2, 0, None, {"input_shapes": 2},
                            ["shape"], ["h1"], loc, loc),
        E.RecompileEvidence("jit:f", 0.6, 0.1, [2], None, 0, 1, differences=["partial"]),
        E.WarmupEvidence("jit:f", None, False, [None, "optimizer_state"], [], 0.3),
        E.WarmupEvidence("site:/x/t.py:3", "constant", True, ["constant"], ["d"], 0.3, loc, loc),
        It.NewGraphEvidence("jit:f", 0.2, "eval"), It.SyncSitesEvidence(2, [loc, loc]), It.SyncSitesEvidence(2),
        It.FallbackOpEvidence("aten::nonzero", {"x.nonzero": 2}), It.CompileTimeEvidence(1.0, 10.0, 0.1),
        It.InputBoundEvidence(3.0, 5.0, 0.6, "next"), It.BoundEvidence(10.0, 20.0, 0.8, 0.5, 0.3, [loc]),
        It.LaunchEvidence(3.5, 5.0, 0.7, 0.7, 2.0, 1.0),
        rank_rules.DivergenceEvidence("recompilation", [1], [0], {"0": 1, "1": 3}),
        rank_rules.StragglerEvidence(1, "train", 0.01, 0.2, "data", {"0": 0.05, "1": 0.06}, 8, 7, [1], 0.01),
        T.WindowEvidence(), T.WindowInputEvidence(0.5, 4.0, 0.1, 5), T.WindowIdleEvidence(0.3, 2.0, 5), window,
        T.WindowCollectiveEvidence(0.4, 0.5, "xla"),
        xla_rules.EagerOpsEvidence(10.0, 8.0, 2.0, 5.0, 0.4, 3.0, 6, [loc]),
        xla_rules.DynamoGraphsEvidence(2, 2, 1, 1, 0.5, {"f": 2}),
        xla_rules.DynamoRecompileEvidence("k", "f", "size", {"size": 2}, ["r"], 0.2, 3, 8, False),
        xla_rules.DynamoBreakEvidence("a print", None),
        xla_rules.SpmdGraphsEvidence(SpmdEvidence("g1", 4, [{"shape": [2, 2]}], 3, 2, {}, boundary=3,
                                                  extra={"more": 1}), ["g0", "g1"]),
        jax_rules.EagerLineEvidence("eager:/x/t.py:3", 0.1, {"add": 2}),
        jax_rules.EagerFirstUseEvidence(0.1, [{"line": 3, "function": "f", "compiles": 2}], {"add": 2}, 1,
                                        [{"file": "/x/t.py", "line": 3}]),
        DeferredEvidence(window, "warning"), FaultEvidence(["rule.x"]),
        PerRankEvidence(WrittenEvidence({"a": 1}), {"0": {"count": 1, "per_step": None, "severity": "info"}}),
    ]


def test_every_evidence_class_writes_reads_back_assembles_and_merges_the_same():
    """Every finding's evidence is one of the evidence classes: written by its `to_json`, read back at the load
    edges as a WrittenEvidence that writes the same keys in the same order, through a report and a merge of two
    ranks unchanged (but for merge's `per_rank`). A new evidence class must be added to the samples."""
    from ptxla_perf.model.finding import Evidence, WrittenEvidence
    from ptxla_perf.pods import merge as M
    from ptxla_perf.rules import evidence  # noqa: F401 - its classes are among the subclasses
    from ptxla_perf.report import outputs, precedence  # noqa: F401
    samples = _evidence_samples()

    def below(c: type) -> set[type]:
        return {s for sub in c.__subclasses__() for s in {sub, *below(sub)}}
    assert {type(e) for e in samples} == below(Evidence)
    with pytest.raises(TypeError):
        Finding("x", "info", "m", 1, None, ["a"])  # type: ignore[arg-type]
    # a recipe's own finding as 0.6.0 took it (a dict): kept as written, one shape from there on
    legacy = Finding("x", "info", "m", 1, None, {"a": 1, "b": None})  # type: ignore[arg-type]
    assert isinstance(legacy.evidence, WrittenEvidence) and legacy.evidence_json() == {"a": 1, "b": None}

    live = [Finding(f"k{i}_{type(e).__name__}", "warning", "m", 2, Location("/x/t.py", i + 1, "f"), e, 0.5, [1, 2],
                    cost=Cost(ms_per_step=1.0)) for i, e in enumerate(samples)]
    written = json.loads(json.dumps([f.to_json() for f in live]))
    for f, w in zip(live, written):
        back = Finding.from_json(w)
        assert isinstance(back.evidence, WrittenEvidence) and back == f and back.to_json() == w
        assert list(w["evidence"]) == list(f.evidence.to_json())  # the order too: views show keys as written

    base = _build()
    assembled = [R.assemble(backend="torch_xla", run=base["run"], env=base["environment"], steps=base["steps"],
                            summary=base["summary"], findings=fs)["findings"]
                 for fs in (live, [Finding.from_json(w) for w in written])]
    assert json.dumps(assembled[0]) == json.dumps(assembled[1])
    by_kind = {f["kind"]: f for f in assembled[0]}
    assert [by_kind[f.kind]["evidence"] for f in live] == [w["evidence"] for w in written]

    ranks = [json.loads(json.dumps(dict(_build(rank=k), findings=written)))for k in range(2)]
    merged = {f["kind"]: f for f in M.merge(ranks, ["r0.json", "r1.json"])["findings"]}
    for f, w in zip(live, written):
        got = merged[f.kind]["evidence"]
        assert list(got) == [*(k for k in w["evidence"] if k != "per_rank"), "per_rank"], f.kind
        assert {k: v for k, v in got.items() if k != "per_rank"} == \
            {k: v for k, v in w["evidence"].items() if k != "per_rank"}
        assert got["per_rank"] == {str(k): {"count": 2, "per_step": 0.5, "severity": "warning"} for k in range(2)}


def test_the_iteration_findings_evidence_writes_the_keys_their_dicts_wrote():
    """The evidence classes that replaced dict literals (rules/evidence.py) write the keys those wrote, in their
    order: a key seen only where it applies, a few written even when None (as the dicts did)."""
    from ptxla_perf.rules import evidence as E
    seen = E.SeenCalls({"loss.item": 2}, None, [[1]], 4)
    assert list(E.HostReadEvidence(seen, "train", 5, 6, 1.5, 40, 1.0, "skip", None, True).to_json()) == [
        "calls", "shapes", "bytes", "phase", "iterations_with_reads", "phase_iterations", "wait_ms_per_step",
        "bytes_total", "extra_executions_per_step", "control_flow", "statement", "once_per_pass"]
    assert E.HostReadEvidence(E.SeenCalls(), None, 1, 2, 0.0, 0).to_json() == {
        "phase": None, "iterations_with_reads": 1, "phase_iterations": 2, "wait_ms_per_step": 0.0, "bytes_total": 0}
    assert E.UploadEvidence(seen, 1, 0, seconds_per_iteration=0.1).to_json() == {
        "calls": {"loss.item": 2}, "shapes": [[1]], "bytes": 4, "arrays": 1, "avoidable_calls": 0,
        "seconds_per_iteration": 0.1, "share_of_step": None}
    assert list(E.RecompileEvidence("k", 1.0, 0.1, [1], None, 1, 0, None, {}, []).to_json()) == [
        "key", "compile_time_s", "share_of_wall_time", "iterations", "phase", "explained", "unexplained", "cause",
        "causes", "differences"]
    assert E.WarmupEvidence("k", None, False, [], [], 0.1).to_json() == {
        "key": "k", "cause": None, "special_scalars": False, "compile_causes": [], "differences": [],
        "compile_time_s": 0.1}
    assert E.ClosureReadEvidence(seen).to_json() == {"closure": True, **seen.to_json()}


def test_no_producer_builds_a_finding_from_a_dict():
    """Dicts become evidence only at the load edges (Finding.from_json) and for a recipe's own finding: every
    producer in the package passes an evidence class (a dict literal or dict(...) as `evidence=` fails here)."""
    import re
    from conftest import ROOT
    bad = [f"{p.relative_to(ROOT)}:{n}" for p in sorted((ROOT / "ptxla_perf").rglob("*.py"))
           for n, line in enumerate(p.read_text().splitlines(), 1)
           if re.search(r"evidence\s*=\s*(\{|dict\()", line)]
    assert not bad, bad
