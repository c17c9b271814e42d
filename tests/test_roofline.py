"""Roofline (issue 11): FLOPs and bytes of step graphs from XLA's own cost analysis, peaks, MFU, verdicts.

End to end through `profile` for torch_xla and JAX on known programs (tests/scripts/roofline_programs.py) against
their analytic counts; the private-API fallback simulated (PTXLA_PERF_NO_XLA_COST=1, or a failing import);
the roofline computation, the peak table and its overrides, diff and the sweep table on synthetic inputs."""
from __future__ import annotations

import json
import sys
import time

import pytest

from conftest import SCRIPTS, load_report, run_app, run_cli

from ptxla_perf.analysis.fold import Folded
from ptxla_perf.analysis.iterset import Iterations
from ptxla_perf.xla import hlo_cost
from ptxla_perf import peaks
from ptxla_perf.analysis import roofline
from ptxla_perf.model.records import StepRecord
from ptxla_perf.model.finding import Finding

# the `profiled` runs are read by several tests each: one xdist worker, so that each is made once
pytestmark = pytest.mark.xdist_group("roofline")

PROGRAMS = str(SCRIPTS / "roofline_programs.py")
JAX_ENV = {"JAX_PLATFORMS": "cpu"}

# analytic counts for roofline_programs.py's sizes: FLOPs (2 per multiply-add) and bytes (inputs + output, f32)
M, K, N = 128, 256, 64
B, CIN, COUT, HW, KS = 2, 4, 8, 10, 3
MB, D_IN, D_H, D_OUT = 256, 256, 512, 128
OUT_HW = HW - KS + 1
ANALYTIC = {
    "matmul": (2 * M * K * N, 4 * (M * K + K * N + M * N)),
    "conv": (2 * B * COUT * OUT_HW ** 2 * CIN * KS * KS, 4 * (B * CIN * HW * HW + COUT * CIN * KS * KS
                                                                + B * COUT * OUT_HW ** 2)),
    # forward x@W1, h@W2; backward dW1, dH, dW2 (x needs no gradient); elementwise ops (relu, MSE, SGD) are
    # ~0.3 % on top: the 1 % tolerance holds them
    "mlp": (2 * MB * (2 * D_IN * D_H + 3 * D_H * D_OUT), None),
}
FLOPS_TOL = 0.01
# bytes accessed, as a multiple of the analytic inputs + output: a matmul graph reads its operands and writes its
# result (+ a few scalars): within 5 %. A conv on the CPU: JAX's compiled program transposes NCHW input, OIHW
# kernel and output to and from its own layout (each one more read and write): up to 3x (+5 %)
BYTES_RANGE = {"matmul": (1.0, 1.05), "conv": (1.0, 3.05)}


def _profile(tmp_path, backend: str, program: str, *options: str, **env: str) -> tuple:
    out = tmp_path / f"{backend}_{program}.json"
    extra_env = dict(JAX_ENV if backend == "jax" else {}, **env)
    proc = run_cli("profile", "--port", "none", "--backend", backend, "--report", str(out), *options,
                   PROGRAMS, backend, program, cwd=tmp_path, **extra_env)
    assert out.exists(), proc.stderr[-3000:]
    return proc, load_report(out)  # validates against the schema (roofline section included)


def _steady_flops(report) -> list[float]:
    return [s["flops"] for s in report["steps"] if not s["compiles"] and s["executions"]]


@pytest.mark.parametrize("backend", ["torch_xla", "jax"])
@pytest.mark.parametrize("program", ["matmul", "conv", "mlp"])
def test_flops_match_the_analytic_count(tmp_path, backend, program):
    if backend == "jax":
        pytest.importorskip("jax")
    proc, report = _profile(tmp_path, backend, program)
    flops, nbytes = ANALYTIC[program]
    roof = report["roofline"]
    assert roof["source"] == "xla_cost_analysis", roof
    steady = _steady_flops(report)
    assert steady and all(f is not None for f in steady), report["steps"]
    for f in steady:
        assert abs(f - flops) <= FLOPS_TOL * flops, (f, flops)
    assert abs(roof["flops_per_step"] - flops) <= FLOPS_TOL * flops
    assert abs(report["summary"]["flops_per_step"] - flops) <= FLOPS_TOL * flops
    if nbytes is not None:
        lo, hi = BYTES_RANGE[program]
        assert lo * nbytes <= roof["bytes_per_step"] <= hi * nbytes, (roof["bytes_per_step"], nbytes)
    # the rest of the section follows from the figures and the peak
    peak = roof["peak"]
    assert peak["name"] == "cpu (calibrated)" and peak["flops_per_s"] > 0 and peak["bytes_per_s"] > 0
    assert roof["predicted_step_time_s"] == pytest.approx(max(roof["flops_per_step"] / peak["flops_per_s"],
                                                              roof["bytes_per_step"] / peak["bytes_per_s"]))
    achieved = roof["achieved_flops_per_s"] / peak["flops_per_s"]
    if roof["mfu"] is None:  # never above 100% (a calibration under load), nor from dispatch time: said in notes
        assert any(n.startswith("HFU not given") for n in roof["notes"]), roof["notes"]
    else:
        assert roof["mfu"] == pytest.approx(achieved) and roof["mfu"] <= 1.0
    assert roof["verdict"] in ("compute-bound", "memory-bound", "overhead-bound", "unknown", "input-bound",
                               "host-bound", "launch-bound", "device-bound", "compile-bound")
    if roof["verdict"] not in ("compute-bound", "memory-bound", "unknown"):  # named by the breakdown's largest part
        split = report["summary"]["time_breakdown"]
        assert roof["bound_by"]["component"] == split["largest"]
        assert roof["bound_by"]["seconds_per_step"] == split["components_s"][split["largest"]]
    assert "roofline" in proc.stderr and "FLOP/step" in proc.stderr
    if backend == "torch_xla":
        assert "jax imported: False" in proc.stdout  # jaxlib's cost analysis only: JAX's runtime never started


@pytest.mark.parametrize("backend", ["torch_xla", "jax"])
def test_without_the_private_api_the_hlo_text_fallback_counts_matmul_flops(tmp_path, backend):
    if backend == "jax":
        pytest.importorskip("jax")
    proc, report = _profile(tmp_path, backend, "mlp", PTXLA_PERF_NO_XLA_COST="1")
    assert proc.returncode == 0, proc.stderr[-2000:]
    roof = report["roofline"]
    assert roof["source"] == "hlo_text"
    assert any("PTXLA_PERF_NO_XLA_COST" in n for n in roof["notes"])
    flops = ANALYTIC["mlp"][0]
    # dot FLOPs only: the analytic matmul count exactly
    assert roof["flops_per_step"] == pytest.approx(flops, rel=1e-9)
    assert "(hlo_text)" in proc.stderr


def test_attribution_off_means_no_cost_and_no_crash(tmp_path):
    proc, report = _profile(tmp_path, "torch_xla", "matmul", "--attribution", "off")
    assert proc.returncode == 0
    roof = report["roofline"]
    assert roof["source"] == "unavailable" and roof["flops_per_step"] is None and roof["mfu"] is None
    assert any("no step graph was captured" in n for n in roof["notes"])
    assert report["summary"]["mfu"] is None
    assert "roofline    unavailable" in proc.stderr


def test_peak_override_from_the_cli(tmp_path):
    proc, report = _profile(tmp_path, "torch_xla", "matmul", "--peak-tflops", "0.5", "--peak-gbps", "20")
    peak = report["roofline"]["peak"]
    assert (peak["flops_per_s"], peak["bytes_per_s"], peak["name"]) == (0.5e12, 20e9, "user")
    assert peak["ridge_flops_per_byte"] == pytest.approx(25.0)
    assert report["summary"]["mfu"] == pytest.approx(report["roofline"]["achieved_flops_per_s"] / 0.5e12)


def test_bad_peak_is_a_one_line_error(tmp_path):
    proc = run_cli("profile", "--port", "none", "--peak-tflops", "-3", PROGRAMS, "torch_xla", "matmul",
                   cwd=tmp_path)
    assert proc.returncode == 2
    assert "argument --peak-tflops: must be > 0, not -3" in proc.stderr  # before anything runs (cli.number)
    assert "Traceback" not in proc.stderr


def test_matmul_recipe_prints_the_roofline(tmp_path):
    proc = run_app("+recipe=matmul", "recipe.steps=5", "recipe.batch=2", "recipe.seq=32", "recipe.d_model=64",
                   "recipe.d_ff=128", "profiler.port=null", f"hydra.run.dir={tmp_path}", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = load_report(tmp_path / "report.json")
    analytic = 2 * 2 * 32 * 64 * 128
    assert report["extra"]["analytic_flops_per_step"] == analytic
    assert report["roofline"]["flops_per_step"] == pytest.approx(analytic, rel=FLOPS_TOL)
    lines = proc.stderr.splitlines()
    i = next(i for i, ln in enumerate(lines) if ln.strip().startswith("roofline"))
    text = "\n".join(lines[i:i + 2])
    for part in ("FLOP/step", "TFLOP/s achieved", "HFU", "predicted", "observed"):
        assert part in text, text


# --- in-process: the cost module's fallback chain ------------------------------------------------------------
_HLO = """HloModule m, entry_computation_layout={(f32[8,16]{1,0}, f32[16,4]{1,0})->(f32[8,4]{1,0})}

ENTRY %m (p0: f32[8,16], p1: f32[16,4]) -> (f32[8,4]) {
  %p0 = f32[8,16]{1,0} parameter(0)
  %p1 = f32[16,4]{1,0} parameter(1)
  %dot.1 = f32[8,4]{1,0} dot(f32[8,16]{1,0} %p0, f32[16,4]{1,0} %p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  %tanh.2 = f32[8,4]{1,0} tanh(f32[8,4]{1,0} %dot.1)
  ROOT %tuple.3 = (f32[8,4]{1,0}) tuple(f32[8,4]{1,0} %tanh.2)
}
"""


def test_failing_import_falls_back_to_the_hlo_text(monkeypatch):
    monkeypatch.setitem(sys.modules, "jaxlib._jax", None)  # `import jaxlib._jax` now raises ImportError
    c = hlo_cost.cost(lambda: b"not used", _HLO)
    assert c.source == "hlo_text"
    assert c.flops == 2 * 8 * 16 * 4 and c.transcendentals == 8 * 4
    assert c.bytes_accessed == 4 * (8 * 16 + 16 * 4 + 8 * 4)
    assert "jaxlib._jax" in c.note


def test_nothing_readable_is_unavailable_not_a_crash(monkeypatch):
    monkeypatch.setenv(hlo_cost.DISABLE_ENV, "1")
    c = hlo_cost.cost(lambda: b"", None)
    assert (c.source, c.flops) == ("unavailable", None)
    c = hlo_cost.cost(lambda: b"", "no hlo here")
    assert c.source == "unavailable" and "HLO text not readable" in c.note


def test_jax_style_hlo_text_without_percent_names():
    text = """ENTRY main.1 {
  x.1 = f32[4,8,16]{2,1,0} parameter(0)
  w.1 = f32[16,32]{1,0} parameter(1)
  ROOT dot_general.2 = f32[4,8,32]{2,1,0} dot(x.1, w.1), lhs_contracting_dims={2}, rhs_contracting_dims={0}
}"""
    assert hlo_cost.text_cost(text).flops == 2 * 4 * 8 * 16 * 32


def test_convolution_in_hlo_text():
    text = """ENTRY %c {
  %x = f32[2,4,10,10]{3,2,1,0} parameter(0)
  %w = f32[8,4,3,3]{3,2,1,0} parameter(1)
  ROOT %convolution.4 = f32[2,8,8,8]{3,2,1,0} convolution(f32[2,4,10,10]{3,2,1,0} %x, f32[8,4,3,3]{3,2,1,0} %w), window={size=3x3}, dim_labels=bf01_oi01->bf01
}"""
    assert hlo_cost.text_cost(text).flops == ANALYTIC["conv"][0]


# --- the roofline computation on synthetic steps ---------------------------------------------------------------
PEAK = peaks.Peak(1e12, 1e11, "bf16", "test chip", "test")  # ridge: 10 FLOP/B


def _section(steps, costs, peak, findings=None, p50=None):
    """The section as the report writes it; `findings` as a report's JSON, read back as Findings for its sinks."""
    found = roofline.sinks([Finding.from_json(f) for f in findings or []])
    return roofline.section(Iterations(steps), costs, peak, p50, found).to_json()


def _steps(flops, nbytes, seconds, n=4):
    return [StepRecord(index=i, wall_time_s=seconds, executions=1, flops=flops, bytes_accessed=nbytes)
            for i in range(n)]


def test_compute_bound_step():
    sec = _section(_steps(1e9, 1e7, 1.2e-3), {"source": "xla_cost_analysis"}, PEAK)
    assert sec["arithmetic_intensity"] == pytest.approx(100.0) and sec["ridge_flops_per_byte"] == 10.0
    assert sec["predicted_step_time_s"] == pytest.approx(1e-3)
    assert sec["mfu"] == pytest.approx(1e9 / 1.2e-3 / 1e12)
    assert sec["observed_over_predicted"] == pytest.approx(1.2)
    assert sec["verdict"] == "compute-bound"


def test_memory_bound_step():
    sec = _section(_steps(1e8, 1e9, 1.1e-2), {"source": "xla_cost_analysis"}, PEAK)
    assert sec["predicted_memory_s"] == pytest.approx(1e-2) and sec["verdict"] == "memory-bound"
    assert sec["bandwidth_utilization"] == pytest.approx(1e9 / 1.1e-2 / 1e11)


def test_overhead_bound_step_points_to_the_findings():
    findings = [{"kind": "device_to_host_sync", "severity": "warning"}, {"kind": "compile_time", "severity": "info"}]
    sec = _section(_steps(1e9, 1e7, 5e-3), {"source": "xla_cost_analysis"}, PEAK, findings)
    assert sec["verdict"] == "overhead-bound"
    assert sec["related_findings"] == ["device_to_host_sync"]
    assert "device_to_host_sync" in sec["explanation"]


def test_step_time_below_the_prediction_is_not_a_verdict():
    sec = _section(_steps(1e9, 1e7, 1e-5), {"source": "xla_cost_analysis"}, PEAK)
    assert sec["verdict"] == "unknown" and "dispatch" in sec["explanation"]
    assert any("above the peak" in n for n in sec["notes"])
    assert sec["mfu"] is None  # 10000% would be dispatch time, not the device: never printed
    assert "HFU" not in "\n".join(roofline.summary_lines(sec)) and "MFU" not in "\n".join(roofline.summary_lines(sec))


def _device_steps(flops, nbytes, wall, device, n=4):
    steps = _steps(flops, nbytes, wall, n)
    for s, d in zip(steps, device if isinstance(device, list) else [device] * n):
        s.device_time_s = d
    return steps


def test_mfu_is_over_the_devices_busy_time_where_the_host_ran_ahead():
    """torch_xla: the sync returned after 10 us, the device worked 1.2 ms per step: MFU and the verdict from the
    device's time; the console says which time."""
    sec = _section(_device_steps(1e9, 1e7, 1e-5, 1.2e-3), {"source": "xla_cost_analysis"}, PEAK)
    assert sec["mfu_time_basis"] == "device" and sec["steps_with_device_time"] == 4
    assert sec["device_step_time_s"] == pytest.approx(1.2e-3) and sec["device_over_predicted"] == pytest.approx(1.2)
    assert sec["mfu"] == pytest.approx(1e9 / 1.2e-3 / 1e12)
    assert sec["achieved_flops_per_s"] == pytest.approx(1e9 / 1.2e-3)
    assert sec["observed_over_predicted"] == pytest.approx(0.01)  # the wall figures stay what they are
    assert sec["verdict"] == "compute-bound" and "runs ahead of the device" in sec["explanation"]
    text = "\n".join(roofline.summary_lines(sec))
    assert "HFU 83.3%" in text and "device time" in text and "device busy 1.2 ms/step (1.20x; all its work, overlap with the host included)" in text


def test_a_rate_just_above_a_calibrated_cpu_peak_is_mfu_100():
    """The CPU peak is NumPy's best measured rate, which XLA's kernels may pass by a little: MFU 100 % with a note
    (never above); on a nominal peak, or far above the calibration, no MFU."""
    cpu = peaks.Peak(1e12, 1e11, "float32", "cpu (calibrated)", "test")
    sec = _section(_device_steps(1.1e9, 1e7, 1e-5, 1e-3), {"source": "xla_cost_analysis"}, cpu)
    assert sec["mfu"] == 1.0 and any(n.startswith("HFU at the calibrated peak: the steps reached 110%")
                                     for n in sec["notes"]), sec["notes"]
    far = _section(_device_steps(1.3e9, 1e7, 1e-5, 1e-3), {"source": "xla_cost_analysis"}, cpu)
    assert far["mfu"] is None and any(n.startswith("HFU not given") for n in far["notes"])
    nominal = _section(_device_steps(1.1e9, 1e7, 1e-5, 1e-3), {"source": "xla_cost_analysis"}, PEAK)
    assert nominal["mfu"] is None


def test_device_time_below_the_prediction_gives_no_mfu():
    """A device busy time below half the prediction: the peak is too low (or the cost too high) - no MFU, no verdict."""
    sec = _section(_device_steps(1e8, 1e9, 1e-5, 4e-3), {"source": "xla_cost_analysis"}, PEAK)
    assert sec["predicted_memory_s"] == pytest.approx(1e-2)  # MFU would be 2.5 %, over a time that cannot be
    assert sec["mfu_time_basis"] == "device" and sec["mfu"] is None and sec["verdict"] == "unknown"
    assert any("device's busy time is below" in n for n in sec["notes"]) and "below it too" in sec["explanation"]


def test_mfu_over_the_wall_time_where_most_steps_have_no_device_time():
    """JAX (no device time), or torch_xla with most steps' samples lost: the wall time and its under-ratio rule."""
    sec = _section(_device_steps(1e9, 1e7, 1.2e-3, [None, None, None, 5e-4]), {"source": "x"}, PEAK)
    assert sec["mfu_time_basis"] == "wall" and sec["device_step_time_s"] is None
    assert sec["mfu"] == pytest.approx(1e9 / 1.2e-3 / 1e12) and sec["steps_with_device_time"] == 1
    half = _section(_device_steps(1e9, 1e7, 1e-5, [None, None, 1e-3, 1e-3]), {"source": "x"}, PEAK)
    assert half["mfu_time_basis"] == "device" and half["mfu"] == pytest.approx(1.0)  # over the 2 timed steps


def test_overhead_bound_never_points_at_a_finding_whose_own_cost_is_small():
    """A host read that waits 0.2 ms of a 4 ms gap does not explain the step; one that waits 3 ms does."""
    small = [{"kind": "device_to_host_sync", "severity": "warning", "evidence": {"wait_ms_per_step": 0.2}}]
    sec = _section(_steps(1e9, 1e7, 5e-3), {"source": "xla_cost_analysis"}, PEAK, small)
    assert sec["verdict"] == "overhead-bound" and sec["related_findings"] == []
    assert "no finding explains it" in sec["explanation"]
    big = [{"kind": "device_to_host_sync", "severity": "warning", "evidence": {"wait_ms_per_step": 3.0}}]
    sec = _section(_steps(1e9, 1e7, 5e-3), {"source": "xla_cost_analysis"}, PEAK, big)
    assert sec["related_findings"] == ["device_to_host_sync"]
    recompiles = [{"kind": "recompilation", "severity": "warning", "evidence": {}}]  # not in the steady steps
    assert _section(_steps(1e9, 1e7, 5e-3), {"source": "xla_cost_analysis"}, PEAK,
                            recompiles)["related_findings"] == []


def test_live_typed_findings_name_their_bound_and_keep_their_cost():
    """The roofline reads live Finding objects (as a session hands them), not only a report's JSON: a
    launch-bound verdict names its launch_bound finding, and a typed finding's measured cost (`Finding.cost`)
    decides whether it explains the gap (a typed host read of 0.2 ms does not explain a 4 ms gap)."""
    from ptxla_perf.rules.iteration import InputBoundEvidence, LaunchEvidence
    from ptxla_perf.model.finding import Cost
    launch = Finding("launch_bound", "warning", "launching", 4, None, LaunchEvidence(3.5, 5.0, 0.7, 0.7),
                     cost=Cost(ms_per_step=3.5, share_of_wall=0.7))
    wait = Finding("input_bound", "warning", "waiting", 4, None, InputBoundEvidence(3.0, 5.0, 0.6, "next"),
                   cost=Cost(ms_per_step=3.0))
    assert roofline.sinks([launch, wait]) == [roofline.Sink("launch_bound", 3.5), roofline.Sink("input_bound", 3.0)]
    split = {"largest": "launch", "components_s": {"launch": 3.5e-3}, "share": {"launch": 0.7}}
    sec = roofline.section(Iterations(_steps(1e9, 1e7, 5e-3)), {"source": "xla_cost_analysis"}, PEAK, None,
                           roofline.sinks([launch, wait]), split).to_json()
    assert sec["verdict"] == "launch-bound" and sec["bound_by"]["finding"] == "launch_bound"
    assert sec["related_findings"] == ["launch_bound"] and "(launch_bound)" in sec["explanation"]
    small = Finding("device_to_host_sync", "warning", "reads", 4, cost=Cost(ms_per_step=0.2))
    sec = roofline.section(Iterations(_steps(1e9, 1e7, 5e-3)), {"source": "xla_cost_analysis"}, PEAK, None,
                           roofline.sinks([small])).to_json()
    assert sec["verdict"] == "overhead-bound" and sec["related_findings"] == []


def test_ratios_print_readably():
    from ptxla_perf.model import fmt
    assert fmt.ratio(2402845.4) == "> 1000x" and fmt.ratio(1.18) == "1.18x" and fmt.ratio(37.4) == "37x"
    assert fmt.ratio(0.0045) == "< 0.01x" and fmt.ratio(0.012) == "0.01x"
    sec = _section(_steps(1e3, 1e2, 5e-3), {"source": "xla_cost_analysis"}, PEAK)
    assert "> 1000x" in "\n".join(roofline.summary_lines(sec))


def test_observed_step_time_is_the_summarys_p50_and_the_costed_subset_is_named():
    """The roofline's observed step time is the summary's step time p50 (passed in from figures); the p50 over
    the steps with a known cost is its own figure, `costed_step_time_s`."""
    steps = _steps(1e9, 1e7, 1.2e-3) + [StepRecord(index=9, wall_time_s=9e-3, executions=1)]  # one without cost
    sec = _section(steps, {"source": "xla_cost_analysis"}, PEAK, p50=1.5e-3)
    assert sec["observed_step_time_s"] == 1.5e-3 and sec["costed_step_time_s"] == pytest.approx(1.2e-3)
    assert sec["steps_with_cost"] == 4 and sec["steady_steps"] == 5
    assert sec["observed_over_predicted"] == pytest.approx(1.5)


def test_steps_without_cost_give_no_figures():
    steps = _steps(None, None, 1e-3)
    sec = _section(steps, {"source": "unavailable", "notes": ["why"]}, PEAK)
    assert sec["flops_per_step"] is None and sec["mfu"] is None and sec["verdict"] == "unknown"
    assert "why" in sec["explanation"]


def test_iteration_cost_is_the_sum_of_its_boundaries():
    from ptxla_perf.analysis.iterations import group
    micro = StepRecord(index=0, wall_time_s=0.1, executions=1, backward_calls=1, flops=10.0, bytes_accessed=1.0)
    close = StepRecord(index=1, wall_time_s=0.1, executions=1, backward_calls=1, optimizer_steps=1, flops=5.0,
                       bytes_accessed=2.0)
    [it] = group([micro, close])
    assert (it.flops, it.bytes_accessed) == (15.0, 3.0)
    unknown = StepRecord(index=1, wall_time_s=0.1, executions=1, optimizer_steps=1, backward_calls=1)
    [it] = group([micro, unknown])
    assert it.flops is None


# --- peaks ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind,name,tflops", [
    ("TPU v4", "TPU v4", 275), ("TPU v5 lite", "TPU v5e", 197), ("TPU v5", "TPU v5p", 459),
    ("TPU v5p", "TPU v5p", 459), ("TPU v6 lite", "TPU v6e", 918), ("NVIDIA H100 80GB HBM3", "NVIDIA H100 SXM", 989),
    ("NVIDIA H100 PCIe", "NVIDIA H100 PCIe", 756), ("NVIDIA H200", "NVIDIA H200 SXM", 989),
    ("NVIDIA A100-SXM4-40GB", "NVIDIA A100 40GB", 312), ("NVIDIA A100-SXM4-80GB", "NVIDIA A100 80GB", 312)])
def test_peak_table_from_the_device_kind(kind, name, tflops):
    p = peaks.select([kind, "TPU"])
    assert (p.name, p.flops_per_s, p.dtype) == (name, tflops * 1e12, "bf16")
    assert p.bytes_per_s > 0 and p.source


def test_override_fills_the_other_half_from_the_table():
    p = peaks.select(["TPU v5 lite"], {"peak_tflops": 150})
    assert (p.flops_per_s, p.bytes_per_s, p.name) == (150e12, 819e9, "user")
    assert "v5e" in p.source


def test_unknown_device_has_no_peak():
    p = peaks.select(["SomeAccelerator"])
    assert p.flops_per_s is None and "--peak-tflops" in p.source


def test_cpu_calibration_is_cached_per_machine(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(peaks, "_MEMO", [])
    calls = []
    monkeypatch.setattr(peaks, "measure", lambda: calls.append(1) or {
        "flops_per_s": 5e10, "bytes_per_s": 2e10, "matmul_n": 1, "copy_mb": 1, "repeats": 1, "measured_at": "t"})
    assert peaks.calibrated(measure_if_missing=False) is None and not calls
    p = peaks.select(["cpu"])
    assert (p.flops_per_s, p.bytes_per_s, p.dtype) == (5e10, 2e10, "float32") and calls == [1]
    cached = json.loads((tmp_path / "ptxla_perf" / "peaks.json").read_text())
    assert list(cached.values())[0]["flops_per_s"] == 5e10
    monkeypatch.setattr(peaks, "_MEMO", [])
    assert peaks.calibrated().flops_per_s == 5e10 and calls == [1]  # from the file, not measured again


def test_cpu_calibration_runs_in_a_process_of_its_own(monkeypatch):
    """Measured in the profiled process, after XLA's work, the calibration came out 10x too low (and was cached):
    it runs in a child; this process's measure_here is never called while a child can run."""
    monkeypatch.setattr(peaks, "measure_here", lambda *a, **k: pytest.fail("measured in the profiled process"))
    entry = peaks.measure()
    assert entry["flops_per_s"] > 1e8 and entry["bytes_per_s"] > 1e7 and entry["repeats"] == 7


# --- diff and the sweep table -----------------------------------------------------------------------------------
def _report(mfu, flops=1e9):
    from ptxla_perf import SCHEMA_ID
    return {"schema": SCHEMA_ID, "run": {"status": "completed", "overrides": []}, "steps": [],
            "summary": {"steps": 10, "compiles": 1, "mfu": mfu, "achieved_tflops_per_s": mfu * 0.1,
                        "flops_per_step": flops, "step_time_s": None}}


def test_diff_gates_on_mfu():
    from ptxla_perf.diff import check, compare, from_report, parse_rules
    rules = parse_rules("mfu<-5%")
    assert check(compare(from_report(_report(0.50), "a"), from_report(_report(0.45), "b")), rules)
    assert not check(compare(from_report(_report(0.50), "a"), from_report(_report(0.49), "b")), rules)
    assert check(compare(from_report(_report(0.5), "a"), from_report(_report(0.5, 2e9), "b")),
                 parse_rules("flops_per_step!=+0"))


def test_sweep_table_has_hfu_and_mfu_only_with_model_flops(tmp_path):
    """XLA's cost-analysis FLOPs make the sweep's utilisation HFU (`hfu`, or `mfu` in an older report); the MFU
    column (model-FLOPs MFU) only where a job has model FLOPs (issue 31)."""
    from ptxla_perf.sweep import table
    p = tmp_path / "0" / "report.json"
    p.parent.mkdir()
    p.write_text(json.dumps(_report(0.4567)))
    head, _, row = table([p])
    assert "HFU" in head and "MFU" not in head and "FLOP/s" in head
    assert "45.7%" in row and "45.7 GFLOP/s" in row
    q = tmp_path / "1" / "report.json"
    q.parent.mkdir()
    rep = _report(0.4567)
    rep["summary"].update(hfu=0.4567, model_mfu=0.3012)
    q.write_text(json.dumps(rep))
    head, _, row0, row1 = table([p, q])
    assert "HFU" in head and "MFU" in head.replace("HFU", "")
    assert "30.1%" in row1 and "30.1%" not in row0


def test_cpu_peak_is_shared_by_host_platform_devices(monkeypatch):
    monkeypatch.setattr(peaks, "_MEMO", [peaks.Peak(8e10, 4e10, "float32", "cpu (calibrated)", "test")])
    p = peaks.select(["cpu"], cpu_devices=8)
    assert (p.flops_per_s, p.bytes_per_s) == (1e10, 5e9) and "8 devices" in p.name
    assert peaks.select(["TPU v4"], cpu_devices=8).flops_per_s == 275e12  # chips are per device already


# --- per op: a capture's op events joined with the instructions' costs ---------------------------------------
_OPTIMIZED = """HloModule jit_step, is_scheduled=true

%fused_computation (param_0.3: f32[64,128], param_1.18: f32[128,256]) -> f32[64,256] {
  %param_0.3 = f32[64,128]{1,0} parameter(0)
  %param_1.18 = f32[128,256]{1,0} parameter(1)
  %dot_general.0 = f32[64,256]{1,0} dot(%param_0.3, %param_1.18), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT %tanh.0 = f32[64,256]{1,0} tanh(%dot_general.0)
}

ENTRY %main.2 (x.1: f32[64,128], w.1: f32[128,256]) -> f32[64,256] {
  %x.1 = f32[64,128]{1,0} parameter(0)
  %w.1 = f32[128,256]{1,0} parameter(1)
  %ynn_fusion = f32[64,256]{1,0} fusion(%x.1, %w.1), kind=kCustom, calls=%fused_computation
  ROOT %copy.1 = f32[64,256]{1,0} copy(%ynn_fusion)
}
"""


def test_instruction_costs_of_an_optimized_module():
    costs = hlo_cost.instruction_costs(_OPTIMIZED)
    assert costs["ynn_fusion"] == {"flops": 2 * 64 * 128 * 256, "bytes": 4 * (64 * 128 + 128 * 256 + 64 * 256),
                                   "transcendentals": 64 * 256}
    assert costs["copy.1"]["flops"] == 0 and costs["copy.1"]["bytes"] == 2 * 4 * 64 * 256


def test_top_ops_join_time_with_cost():
    ops = [{"name": "ynn_fusion", "module": "jit_step", "category": "fusion", "occurrences": 4, "devices": 2,
            "self_time_ms_per_device": 2.0, "share": 0.6},
           {"name": "copy.1", "module": "jit_step", "category": "fusion", "occurrences": 2, "devices": 1,
            "self_time_ms_per_device": 1.0, "share": 0.3},
           {"name": "fusion.9", "module": "other_module", "occurrences": 1, "devices": 1,
            "self_time_ms_per_device": 1.0}]
    rows = roofline.top_ops(ops, {"jit_step": _OPTIMIZED}, PEAK)
    assert [r["name"] for r in rows] == ["ynn_fusion", "copy.1"]  # an op of an unknown module is left out
    fusion, copy = rows
    assert fusion["time_s"] == pytest.approx(1e-3)  # 2 ms per device over 2 executions per device
    assert fusion["achieved_flops_per_s"] == pytest.approx(2 * 64 * 128 * 256 / 1e-3)
    assert fusion["bound"] == "compute" and copy["bound"] == "memory"


def test_capture_gives_per_op_costs(tmp_path):
    pytest.importorskip("jax")
    proc = run_app("+recipe=matmul", "recipe.backend=jax", "recipe.mode=ffw", "recipe.steps=6", "recipe.batch=2",
                   "recipe.seq=32", "recipe.d_model=64", "recipe.d_ff=128", "profiler.port=null",
                   "profiler.capture.start_step=2", "profiler.capture.num_steps=2", f"hydra.run.dir={tmp_path}",
                   cwd=tmp_path, **JAX_ENV)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = load_report(tmp_path / "report.json")
    ops = report["roofline"].get("top_ops")
    assert ops, report.get("trace", {}).get("top_ops")
    one = 2 * 2 * 32 * 64 * 128  # one projection: 2*B*T*D*F
    assert any(op["flops"] == one for op in ops), [(o["name"], o["flops"]) for o in ops]
    assert all(op["bound"] in ("compute", "memory", "collective") for op in ops)
    # the session's trace section (typed in the run, serialized once) reads back the same; its top ops are the
    # ones the roofline joined with their costs (session_report reads the section's `top_ops` attribute)
    from ptxla_perf.trace.section import TraceSection
    sec = TraceSection.from_json(report["trace"])
    assert sec.to_json() == report["trace"] and sec.session["first_boundary"] == 2  # related by the session
    assert {op["name"] for op in ops} <= {op["name"] for op in sec.top_ops}


# --- MFU over the device's busy time (issue 18): real torch_xla runs of tests/scripts/mfu_programs.py -------------
MFU_PROGRAMS = str(SCRIPTS / "mfu_programs.py")


def _profile_loop(tmp_path, program: str) -> tuple:
    """A run against a CPU peak calibrated afresh just before it, in a process of its own (inside the profiled
    process, right after XLA's work, NumPy's threads meet XLA's busy thread pool: a calibration 10x too low).
    One thread each, XLA and NumPy: on 2 cores shared with other jobs, a 2-thread XLA graph waits for its slower
    thread (2-3x slower under load) while the best-of-7 calibration catches a quiet moment; single-threaded,
    both hold (measured under load 2.7: NumPy 100 GFLOP/s, the dependent step 91)."""
    import subprocess
    from conftest import cli_env
    out = tmp_path / f"{program}.json"
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache"), "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1",
           "MKL_NUM_THREADS": "1", "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"}
    cal = subprocess.run([sys.executable, "-m", "ptxla_perf.peaks", "--recalibrate"], cwd=tmp_path, text=True,
                         capture_output=True, env=cli_env(**env), timeout=120)
    assert cal.returncode == 0, cal.stderr[-2000:]
    proc = run_cli("profile", "--port", "none", "--backend", "torch_xla", "--report", str(out), MFU_PROGRAMS,
                   program, "16", "1024", cwd=tmp_path, **env)
    assert out.exists(), proc.stderr[-3000:]
    return proc, load_report(out)


def _percents(text: str) -> list[float]:
    import re
    return [float(p) for p in re.findall(r"[HM]FU\D{0,80}?([0-9.]+)%", text)]


def test_mfu_of_steps_the_host_runs_ahead_of_is_the_devices_never_above_100(tmp_path):
    """The same product every step, never read: each sync returns long before the device finishes (the wall step
    is dispatch), the graphs queue behind each other (each ExecuteTime sample holds its wait in the queue). MFU
    comes from the device's busy time - never above 100 % in the JSON, the console or the HTML page."""
    proc, report = _profile_loop(tmp_path, "independent")
    roof = report["roofline"]
    assert roof["mfu_time_basis"] == "device" and roof["steps_with_device_time"] == roof["steps_with_cost"] > 0
    assert roof["observed_step_time_s"] < roof["predicted_step_time_s"], roof  # the wall step is dispatch
    assert roof["device_step_time_s"] > roof["observed_step_time_s"]
    assert roof["verdict"] in ("compute-bound", "unknown") and "runs ahead of the device" in roof["explanation"] \
        if roof["verdict"] != "unknown" else "is below it too" in roof["explanation"]
    if roof["mfu"] is None:  # a calibration under load: said, never printed above 100 %
        assert any(n.startswith("HFU not given") for n in roof["notes"]), roof["notes"]
    else:
        assert 0 < roof["mfu"] <= 1.0 and report["summary"]["mfu"] == roof["mfu"]
        rate = roof["flops_per_step"] / roof["device_step_time_s"] / roof["peak"]["flops_per_s"]
        at_peak = any(n.startswith("HFU at the calibrated peak") for n in roof["notes"])
        assert roof["mfu"] == (1.0 if at_peak else pytest.approx(rate)), roof["notes"]
    console = proc.stdout + proc.stderr
    html = (tmp_path / "independent.html").read_text()
    assert ("HFU" in console) == ("HFU" in html) == (roof["mfu"] is not None), console
    assert all(p <= 100.0 for p in _percents(console) + _percents(html)), (_percents(console), _percents(html))
    assert "device time" in console if roof["mfu"] is not None else True


def test_mfu_of_dependent_steps_is_from_the_devices_busy_time(tmp_path):
    """W = W - lr * x.T @ (x @ W): each step's graph needs the one before; compute-bound on the CPU (predicted MFU
    = compute / max(compute, memory) = 1). The MFU is read from the device's busy time of every costed step and is
    a share (0, 1]. How near it comes to the prediction depends on what else runs on the 2 cores (0.9 alone, 0.27-0.85
    beside other jobs): benchmarks/roofline.py measures that, side by side with the prediction."""
    _, report = _profile_loop(tmp_path, "dependent")
    roof = report["roofline"]
    assert roof["mfu_time_basis"] == "device", roof
    assert roof["steps_with_device_time"] == roof["steps_with_cost"] > 0
    if roof["mfu"] is None:  # the calibration just before caught a busier moment than the loop (FRESH8: a peak of
        # 121 GFLOP/s, the loop's device time 140): a share above 1 is never given, and the report says why
        assert roof["achieved_flops_per_s"] > roof["peak"]["flops_per_s"], roof
        assert any("achieved FLOP/s above the peak" in n for n in roof["notes"]), roof
    else:
        assert 0 < roof["mfu"] <= 1.0, roof
    assert roof["predicted_compute_s"] >= roof["predicted_memory_s"], roof  # the loop's arithmetic intensity
    assert roof["verdict"] == "compute-bound", roof


def test_queued_graphs_are_timed_from_the_end_of_the_one_before(monkeypatch):
    """ExecuteTime spans launch -> ready: three 10 ms graphs launched 0.1 ms apart (the host ran ahead) have spans
    of 10, 19.9 and 29.8 ms; each step's busy time is 10 ms - the queue wait left out, across reads too."""
    pytest.importorskip("torch_xla")
    from ptxla_perf.backends import torch_xla as tx
    samples: list = []
    monkeypatch.setattr(tx.X, "_xla_metric_data", lambda name: (len(samples), 0.0, list(samples))
                        if name == "ExecuteTime" and samples else None)
    dev = tx._DeviceTimes()
    t0 = time.time() + 1.0  # after the session started

    def launch(start_ms, end_ms):  # a sample: stamped at its end (wall clock, s), its span in ns
        samples.append((t0 + end_ms / 1e3, (end_ms - start_ms) * 1e6))
    steps = [StepRecord(index=i, wall_time_s=1e-4, executions=1) for i in range(4)]
    for i, (start, end) in enumerate([(0.0, 10.0), (0.1, 20.0), (0.2, 30.0)]):
        launch(start, end)
        dev.add(steps[i])
    dev.read(final=False)
    assert [s.device_time_s for s in steps[:3]] == pytest.approx([10e-3] * 3, rel=1e-3)
    dev.add(steps[3])
    dev.read(final=False)  # its graph has not finished: it waits for a later read
    assert steps[3].device_time_s is None and dev.pending == [steps[3]]
    launch(0.3, 40.0)
    dev.read(final=False)
    assert steps[3].device_time_s == pytest.approx(10e-3, rel=1e-3) and not dev.pending


def test_transformer_n_leaves_out_the_embedding_tables():
    """6·N·tokens counts N without the embedding tables (issue 31: the MMF recipe's model-FLOPs MFU exceeded its
    HFU because a 30k-token vocabulary's table was most of N); a tied output projection is the same tensor."""
    torch = pytest.importorskip("torch")

    class Tiny(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.words = torch.nn.Embedding(30000, 64)  # 1.92 M weights: a lookup, no multiply-adds
            self.positions = torch.nn.Embedding(128, 64)
            self.bag = torch.nn.EmbeddingBag(100, 64)
            self.body = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 64))
            self.norm = torch.nn.LayerNorm(64)
            self.head = torch.nn.Linear(64, 30000, bias=False)
            self.head.weight = self.words.weight  # tied to the word embeddings

    model = Tiny()
    body = (64 * 256 + 256) + (256 * 64 + 64) + 2 * 64
    assert roofline.non_embedding_params(model) == body
    assert sum(p.numel() for p in model.parameters()) > 30 * body
    assert roofline.transformer_flops(roofline.non_embedding_params(model), 1000) == 6.0 * body * 1000


def test_a_folded_record_weighs_as_the_iterations_it_stands_for():
    """A long run folds its steady steps (fold.py): one record of `repeat` iterations carries their mean figures
    and a sample of each one's. FLOPs per step, the costed step time, the rates and the step counts weigh it as
    the summary does: the same section as over the iterations one by one."""
    small, big = _steps(1e9, 1e7, 1.2e-3, n=1)[0], _steps(4e9, 4e7, 4.8e-3, n=1)[0]
    one_by_one = [small.copy(index=i) for i in range(9)] + [big.copy(index=9)]
    folded = Folded()
    folded.add([s.copy() for s in one_by_one[:9]])
    assert len(folded.records) == 1 and folded.records[0].repeat == 9
    a = _section(one_by_one, {"source": "xla_cost_analysis"}, PEAK)
    b = _section([folded.records[0], one_by_one[9]], {"source": "xla_cost_analysis"}, PEAK)
    assert a["flops_per_step"] == pytest.approx(1.3e9) and a["steps_with_cost"] == a["steady_steps"] == 10
    for k in ("flops_per_step", "bytes_per_step", "costed_step_time_s", "mfu", "steps_with_cost", "steady_steps",
              "achieved_flops_per_s", "observed_step_time_s"):
        assert b[k] == pytest.approx(a[k]), k
