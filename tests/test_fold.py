"""A long run's plain iterations fold in memory (issue 28, fold.py): real JAX and torch_xla runs made long by lowering
`fold_after` through PTXLA_PERF_STEP_RETENTION fold most of their steps into repeat-counted records, and say the
same as the analysis of every boundary unfolded (each one is in the steps file as the adapter gave it): the same
counts, the same findings with the same counts, the same step-time mean; percentiles within float32 rounding."""
from __future__ import annotations

import json
import random

import pytest

from conftest import SCRIPTS, load_report, run_cli
from ptxla_perf.analysis import fold as FO
from ptxla_perf.rules.iteration import analyze
from ptxla_perf.rules.memory import RULES as MEMORY_RULES
from ptxla_perf.model.records import Event, Location, StepRecord, TransferEvidence, Transfers
from ptxla_perf.rules.registry import backend_rules

# folded_run (each loop) is read by two tests: one xdist worker, so that each is made once
pytestmark = pytest.mark.xdist_group("fold")

STEPS = 800
KNOBS = "fold_after=300,fold_window=100,trim_above=100,first=20,last=20"
# the JAX loop fed on the device, and fed a fresh NumPy batch every step (a transfer event in every iteration)
SCRIPT = {"jax": ["jax_long_run.py"], "jax_numpy": ["jax_long_run.py", "numpy"], "torch_xla": ["xla_long_loop.py"]}
COUNTS = ("steps", "steady_steps", "eval_steps", "boundaries", "compiles", "cached_compiles",
          "recompiles_after_warmup", "executions", "device_to_host", "device_to_host_transfers", "host_to_device",
          "device_to_host_transfer_bytes")


@pytest.fixture(scope="module", params=sorted(SCRIPT))
def folded_run(request, tmp_path_factory):
    out = tmp_path_factory.mktemp(f"fold_{request.param}")
    report, steps_file, tb = out / "report.json", out / "steps.jsonl", out / "tb"
    script, *args = SCRIPT[request.param]
    proc = run_cli("profile", "--port", "none", "--report", str(report), "--steps-file", str(steps_file),
                   "--tensorboard", str(tb), str(SCRIPTS / script), str(STEPS), *args,
                   PTXLA_PERF_STEP_RETENTION=KNOBS)
    assert proc.returncode == 0, proc.stderr[-3000:]
    boundaries = [StepRecord.from_json(json.loads(line)) for line in steps_file.read_text().splitlines()]
    return request.param, out, proc, load_report(report), boundaries


def _rules(backend: str):
    return (*backend_rules(backend.split("_numpy")[0]), *MEMORY_RULES)


@pytest.mark.slow
def test_folded_run_counts_every_step(folded_run):
    backend, out, proc, rep, boundaries = folded_run
    ret = rep["run"]["step_retention"]
    # many steps were folded in memory (not "most": on a loaded machine a step slower than its neighbours is an
    # outlier kept as it is, and a JAX run under load 10 folded 387 of 800)
    assert ret["folded"] > STEPS // 4, ret
    assert rep["summary"]["steps"] == STEPS and ret["total"] == STEPS
    assert sum(b["count"] for b in rep["step_buckets"]) == STEPS
    assert any(s.get("repeat", 1) > 1 for s in rep["steps"]) or ret["kept"] < STEPS
    full = analyze(boundaries, rules=_rules(backend)).figures.summary().to_json()
    for key in COUNTS:
        assert rep["summary"][key] == full[key], key
    # the count-based findings are the same, with the same counts (time-based verdicts read times the steps file
    # holds before the device's were settled)
    told = {(f["kind"], f["severity"], f["count"]) for f in rep["findings"]}
    whole = analyze(boundaries, rules=_rules(backend)).findings
    for f in whole:
        if f.kind in ("device_to_host_sync", "recompilation", "compile_time", "missing_donation",
                      "host_to_device_transfer"):
            assert (f.kind, f.severity, f.count) in told, (f.kind, f.severity, f.count, told)
    # one TensorBoard point per record: the steps in order, from the first to the last
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    acc = EventAccumulator(str(out / "tb"), size_guidance={"tensors": 0})
    acc.Reload()
    steps = [e.step for e in acc.Tensors("ptxla_perf/compiles")]
    assert steps == sorted(set(steps)) and steps[0] == 0 and steps[-1] == STEPS - 1 and len(steps) < STEPS


@pytest.mark.slow
def test_folding_says_what_every_boundary_says(folded_run):
    """The session's folding replayed on the same boundaries (fold.Folded.take, as the session calls it): every
    finding, every count and the step-time figures equal the unfolded analysis."""
    backend, _, _, _, boundaries = folded_run
    full = analyze(boundaries, rules=_rules(backend))
    held, folded = [], FO.Folded()
    for b in boundaries:
        held.append(b)
        if len(held) >= 300:
            held = folded.take(held, 100)
    assert folded.iterations > STEPS // 2 and len(folded.records) < folded.iterations
    part = analyze(held, rules=_rules(backend), folded=folded)
    assert [(f.kind, f.severity, f.count, f.location) for f in part.findings] == \
           [(f.kind, f.severity, f.count, f.location) for f in full.findings]
    a, b = full.figures.summary().to_json(), part.figures.summary().to_json()
    for key in COUNTS:
        assert a[key] == b[key], key
    for key in ("p50", "p90", "mean", "min", "max"):  # each sampled iteration exact, in float32
        assert b["step_time_s"][key] == pytest.approx(a["step_time_s"][key], rel=1e-5), key
    assert b["step_time_s"]["n"] == a["step_time_s"]["n"]
    for c, v in a["time_breakdown"]["components_s"].items():
        assert b["time_breakdown"]["components_s"][c] == pytest.approx(v, rel=1e-4, abs=1e-7), c


def test_folded_records_stay_bounded():
    """However long the run, the folded part holds at most `max_records` records of at most SAMPLE sampled
    iterations each - also when a logging read every N steps makes every Nth iteration differ (a variant of the
    record around it); every iteration is counted, the slowest step is kept exactly, and the analysis says of the
    reads what the unfolded analysis says."""
    random.seed(1)
    site, line = Location("/u/train.py", 30, "<module>"), Location("/u/train.py", 33, "<module>")
    folded, n = FO.Folded(max_records=40), 30000

    def it(i: int, wall: float) -> StepRecord:
        read = i % 37 == 5
        return StepRecord(i, wall, site, executions=1, device_to_host=Transfers(int(read), 4 if read else 0),
                          optimizer_steps=1, backward_calls=1, phase="train", launch_time_s=wall / 2,
                          host_cpu_s=wall / 4, device_to_host_time_s=wall / 10 if read else None,
                          events=[Event("device_to_host_sync", line, {"call": "item"})] if read else [])

    walls = [0.01 * (1 + random.random()) for _ in range(n)]
    walls[12345] = 0.029  # the slowest step, inside a folded record
    for lo in range(0, n, 1000):
        folded.add([it(i, walls[i]) for i in range(lo, lo + 1000)])
        assert len(folded.records) <= 40
    records = folded.expanded()
    assert folded.iterations == n and sum(r.repeat for r in records) == n
    assert all(FO.sampled(r) <= FO.SAMPLE for r in records if r.sample is not None)
    assert max(r.step_range[1] for r in records) == walls[12345]
    mean = sum(r.wall_time_s * r.repeat for r in records) / n
    assert mean == pytest.approx(sum(walls) / n, rel=1e-9)
    whole = analyze([it(i, walls[i]) for i in range(n)], expect_steps=False)
    part = analyze([], expect_steps=False, folded=folded)
    reads = [[(f.severity, f.count, f.evidence_json()["iterations_with_reads"], f.evidence_json()["phase_iterations"])
              for f in a.findings if f.kind == "device_to_host_sync"] for a in (whole, part)]
    assert reads[0] == reads[1] and reads[0][0][2] == len([i for i in range(n) if i % 37 == 5])
    assert part.figures.summary().device_to_host == whole.figures.summary().device_to_host


def test_folded_transfers_say_what_every_iteration_says():
    """A fresh NumPy batch copied into every step (one evidence that the steady records share, as the JAX adapter
    makes it) folds; every 37th step also passes an array read back from the device (a round trip: avoidable, a
    variant of its record), and an eager upload's own time varies from step to step: the folded analysis says
    of the transfers what the unfolded one says - severity, count, text and evidence (arrays, avoidable calls,
    bytes by origin, the upload's time per iteration)."""
    random.seed(2)
    site, line, up = (Location("/u/train.py", k, "<module>") for k in (30, 31, 29))
    folded, n = FO.Folded(max_records=40), 6000
    batch = Event("host_to_device_transfer", line, TransferEvidence(
        call="step", shapes=[[8, 4]], bytes=128, transfers=1, arrays=1, source=["numpy"], origins={"data": 128},
        avoidable=False))

    def it(i: int) -> StepRecord:
        wall = 0.01 * (1 + random.random())
        sent = batch if i % 37 != 5 else Event("host_to_device_transfer", line, TransferEvidence(
            call="step", shapes=[[8, 4], [4, 4]], bytes=192, transfers=2, arrays=2, source=["numpy"],
            origins={"data": 128, "round_trip": 64}, avoidable=True, made_by=["read back at /u/train.py:33"]))
        eager = Event("host_to_device_transfer", up, TransferEvidence(
            call="jnp.asarray", shapes=[[4]], bytes=16, transfers=1, arrays=1, source=["numpy"], eager=True,
            origins={"host_made": 16}, seconds=2e-4 * (1 + random.random())))
        return StepRecord(i, wall, site, executions=1, host_to_device=Transfers(sent.detail.transfers + 1, 0),
                          optimizer_steps=1, backward_calls=1, phase="train", launch_time_s=wall / 2,
                          host_cpu_s=wall / 4, events=[eager, sent])

    its = [it(i) for i in range(n)]
    for lo in range(0, n, 1000):
        folded.add(its[lo:lo + 1000])
    assert len(folded.records) <= 40 and folded.iterations == n
    told = [[(f.kind, f.severity, f.count, f.location, f.message, f.evidence_json()) for f in a.findings
             if f.kind == "host_to_device_transfer"]
            for a in (analyze(its, expect_steps=False), analyze([], expect_steps=False, folded=folded))]
    assert len(told[0]) == 2 and told[0] == told[1], told
    assert any("round trip" in t[4] for t in told[0]) and any("These uploads take" in t[4] for t in told[0])


def test_a_step_unlike_its_neighbours_is_not_folded():
    """A compile, an attribution step, a CPU fallback, an outlier, an evaluation step each stay a record of its
    own: what a person looks at is never averaged away."""
    site = Location("/u/train.py", 30, "<module>")
    base = dict(executions=1, optimizer_steps=1, backward_calls=1, phase="train")
    its = [StepRecord(i, 0.01, site, **base) for i in range(10)]
    its += [StepRecord(10, 0.5, site, **base),  # an outlier (50x)
            StepRecord(11, 0.01, site, compiles=1, compile_time_s=0.2, **base),
            StepRecord(12, 0.01, site, attributed=True, **base),
            StepRecord(13, 0.01, site, fallback_ops={"aten::nonzero": 1}, **base),
            StepRecord(14, 0.01, site, **dict(base, phase="eval"))]
    folded = FO.Folded()
    folded.add(its)
    assert [r.repeat for r in folded.records] == [10, 1, 1, 1, 1, 1]
    assert [r.index for r in folded.records] == [0, 10, 11, 12, 13, 14]


def test_session_folds_and_flushes_rarely_when_writing_is_slow(tmp_path):
    """In-process (the API): a session past `fold_after` holds a bounded number of boundaries, counts every step,
    and its periodic flush waits 50x what the last one took (a flush runs in the training thread)."""
    import jax
    import jax.numpy as jnp

    from ptxla_perf.session import Session
    s = Session("jax", report_path=str(tmp_path / "r.json"), port=None, console=False, handle_signals=False,
                flush_every_s=1e-6, retention={"fold_after": 60, "fold_window": 20})
    s.start()
    step = jax.jit(lambda w: w * 0.99 + 0.01)
    w = jnp.ones(4)
    held = []
    for _ in range(400):
        w = step(w)
        held.append(len(s.steps))
    report = s.finish()
    assert max(held) <= 60 and s._folded is not None and s._folded.iterations > 300
    assert report["summary"]["steps"] == 400
    assert s._flush.gap > 1e-6 and (tmp_path / "r.json").exists()


def test_outliers_do_not_widen_the_records_past_need():
    """Outliers start records of their own; when the records are too many, neighbours merge at the current width
    before it doubles: the records stay about as wide as the bound needs (the step buckets' resolution)."""
    site = Location("/u/train.py", 30, "<module>")
    folded, n = FO.Folded(max_records=40), 30000
    for lo in range(0, n, 1000):
        folded.add([StepRecord(i, 0.05 if i % 3 == 0 else 0.01, site, executions=1, optimizer_steps=1,
                               phase="train") for i in range(lo, lo + 1000)])
    assert len(folded.records) <= 40 and sum(r.repeat for r in folded.expanded()) == n
    assert folded.width <= 4 * n // 40, folded.width
