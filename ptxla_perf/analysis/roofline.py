"""The report's `roofline` section: how close the steady steps came to what the device could do.

Backend-neutral: the adapters put the cost of the graphs each step ran on its record (`StepRecord.flops`,
`bytes_accessed`; hlo_cost.py), peaks.py says what the device could do. Over the steady steps:

    achieved FLOP/s = sum(FLOPs) / sum(time)                 HFU = achieved FLOP/s / peak FLOP/s
    FLOPs           = XLA's cost analysis of the compiled graphs: the hardware's FLOPs, rematerialised and
                      auxiliary ops included, so their utilisation is HFU (`hfu`; `mfu` is its old name);
                      model-FLOPs MFU (`model_mfu`) = the user's or a recipe's model FLOPs per step (the usual
                      6·N·tokens of a transformer; `StepRecord.model_flops`) over the same time, where given
    time            = the device's busy time on the steps' graphs where the adapter measured it (torch_xla:
                      `StepRecord.device_time_s`), else the step's wall time (JAX) - a wall time the host ran
                      ahead in does not cover the device's work: below UNDER_RATIO x predicted, no HFU
    predicted step  = max(FLOPs / peak FLOP/s, bytes / peak bandwidth)
    verdict         = overhead-bound when observed > OVERHEAD_RATIO x predicted (the time goes elsewhere: host,
                      syncs, gaps - the warnings say where), else compute- or memory-bound by the larger term;
                      where the host ran ahead of the device (wall below the prediction), from the device's time.

docs/roofline.md has the method and its limits.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Iterable, NamedTuple

from ..model import summary_keys as K
from . import iterations as I
from .figures import step_time_s
from .iterset import Iterations
from ..model.fmt import duration as _ms
from ..model.fmt import ratio as fmt_ratio
from ..peaks import Peak
from ..model.thresholds import value as threshold
from ..xla.hlo_cost import instruction_costs
from ..model.finding import Finding

OVERHEAD_RATIO = threshold("roofline_overhead_ratio")  # observed above this multiple of the prediction
UNDER_RATIO = threshold("roofline_under_ratio")  # below it, the step time cannot have covered the work
CALIBRATED_SLACK = threshold("roofline_calibrated_slack")  # a calibrated CPU peak is a measured rate, XLA may beat it
# the largest breakdown component of an overhead-bound step -> the verdict it makes, and the finding behind it
_BOUND_BY = {"data": ("input-bound", "input_bound"), "host": ("host-bound", "host_bound"),
             "launch": ("launch-bound", "launch_bound"), "device": ("device-bound", None),
             "read_wait": ("device-bound", "device_to_host_sync"), "compile": ("compile-bound", "recompilation"),
             "profiler": ("overhead-bound", None), "other": ("overhead-bound", None)}
# findings that say where steady step time goes when it is not the device's arithmetic or memory: the findings
# behind the verdicts above, and those no breakdown component names. Compiles are not among them: the steady steps
# the roofline measures are those that compiled nothing
_TIME_SINKS = tuple(sorted({kind for part, (_, kind) in _BOUND_BY.items() if kind and part != "compile"} |
                           {"graph_break", "op_fallback", "host_to_device_transfer", "collective_bound",
                            "eager_ops"}))


class Sink(NamedTuple):
    """A warning that may say where steady step time goes: its kind and its own measured cost (`Finding.cost`: ms
    per step; None where not measured). The roofline's input from the findings: a plain value."""

    kind: str
    ms_per_step: float | None


def sinks(findings: Iterable[Finding]) -> list[Sink]:
    """The warnings and errors among `findings` whose kind says where time goes, with their measured cost (a
    written report's findings are read back with `Finding.from_json` first)."""
    return [Sink(f.kind, f.cost.ms_per_step) for f in findings
            if f.kind in _TIME_SINKS and f.severity in ("warning", "error")]


@dataclass
class RooflineSection:
    """The report's `roofline` section (docs/roofline.md). `observed_step_time_s` is the summary's step time p50
    (figures.py); `costed_step_time_s` the p50 over the costed subset of the steady steps, the ones the FLOP and
    byte figures cover."""

    source: str
    scope: str | None
    method: str | None
    peak: dict[str, Any]
    graphs: list[dict[str, Any]]
    notes: list[str]
    steady_steps: int
    steps_with_cost: int = 0
    flops_per_step: float | None = None
    bytes_per_step: float | None = None
    transcendentals_per_step: float | None = None
    arithmetic_intensity: float | None = None
    ridge_flops_per_byte: float | None = None
    observed_step_time_s: float | None = None
    costed_step_time_s: float | None = None
    achieved_flops_per_s: float | None = None
    achieved_bytes_per_s: float | None = None
    mfu: float | None = None  # the hardware FLOPs utilisation under its old name (= hfu), kept for one version
    hfu: float | None = None  # achieved (XLA-costed) FLOP/s / peak: hardware FLOPs utilisation
    model_flops_per_step: float | None = None  # given by the user or a recipe (set_step_info(model_flops=...))
    model_mfu: float | None = None  # model FLOPs per second over the same time / peak: model FLOPs utilisation
    bandwidth_utilization: float | None = None
    mfu_time_basis: str | None = None
    device_step_time_s: float | None = None
    steps_with_device_time: int = 0
    predicted_compute_s: float | None = None
    predicted_memory_s: float | None = None
    predicted_step_time_s: float | None = None
    observed_over_predicted: float | None = None
    device_over_predicted: float | None = None
    verdict: str = "unknown"
    explanation: str | None = None
    related_findings: list[str] = field(default_factory=list)
    flops_source: str | None = None  # what the FLOPs were counted from: compiled | hlo | hlo_text (hlo_flops.py)
    flops_lower_bound: bool = False  # partial FLOPs (dots/convolutions only, a loop counted once): rates too
    bytes_lower_bound: bool = False  # partial bytes (what a compiled count missed, inputs + outputs only)
    boundaries: dict[str, Any] | None = None  # how boundaries got their cost: captured | carried | unknown
    bound_by: dict[str, Any] | None = None  # an overhead-bound step's largest breakdown component
    top_ops: list[dict[str, Any]] | None = None  # a capture's top ops with their instructions' costs

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        for k in ("boundaries", "bound_by", "top_ops"):  # absent where not known, as before
            if out[k] is None:
                del out[k]
        return out

    def summary_fields(self) -> dict[str, Any]:
        """The few roofline figures the summary carries (console, `diff`, the sweep table)."""
        achieved = self.achieved_flops_per_s
        return {K.MFU: self.mfu, K.HFU: self.hfu, K.MODEL_MFU: self.model_mfu, K.ACHIEVED_TFLOPS: achieved / 1e12 if achieved is not None else None,
                K.FLOPS_PER_STEP: self.flops_per_step, K.ROOFLINE_VERDICT: self.verdict}


def section(steady: Iterations, costs: dict[str, Any], peak: Peak, step_time_p50: float | None = None,
            found: list[Sink] | None = None, breakdown: dict[str, Any] | None = None) -> RooflineSection:
    """`steady`: the steady training iterations (figures.Figures.steady_its); `costs`: the adapter's `graph_costs()`;
    `step_time_p50`: the summary's step time p50 (figures.Figures.step_time); `found`: the warnings that may say
    where time goes (sinks()); `breakdown`: the steady breakdown (figures.steady_breakdown), which names an
    overhead-bound step's bound."""
    out = _section(steady, costs, peak, step_time_p50, found, breakdown)
    out.hfu = out.mfu
    _model_mfu(out, steady, peak)
    _no_negative(out)
    return out


_SOURCES = ("compiled", "hlo", "hlo_text")  # strongest first
# the section's figures that are counts, sizes, rates or times: never negative in a report
_NON_NEGATIVE = ("flops_per_step", "bytes_per_step", "transcendentals_per_step", "arithmetic_intensity",
                 "observed_step_time_s", "costed_step_time_s", "achieved_flops_per_s", "achieved_bytes_per_s", "mfu",
                 "hfu", "model_flops_per_step", "model_mfu", "bandwidth_utilization", "device_step_time_s",
                 "predicted_compute_s", "predicted_memory_s", "predicted_step_time_s", "observed_over_predicted",
                 "device_over_predicted")


def _graph_sources(out: RooflineSection) -> None:
    """What the graphs' FLOPs were counted from (the weakest source among them) and whether any figure is partial;
    a graph's negative figure (a cost analysis that gave -1) is unknown."""
    graphs = []
    for g in out.graphs:
        g = {k: (None if isinstance(v, (int, float)) and not isinstance(v, bool) and v < 0 and k != "signatures"
                 else v) for k, v in g.items()}
        graphs.append(g)
    out.graphs = graphs
    found = [g.get("flops_source") for g in graphs if g.get("flops") is not None]
    out.flops_source = next((s for s in reversed(_SOURCES) if s in found), None)
    out.flops_lower_bound = any(g.get("flops_lower_bound") for g in graphs)
    # a costed graph whose bytes are unknown adds none to the steps' bytes: theirs are a lower bound then
    out.bytes_lower_bound = any(g.get("bytes_lower_bound") or (g.get("flops") is not None and
                                                               g.get("bytes_accessed") is None) for g in graphs)


def _no_negative(out: RooflineSection) -> None:
    """The guard every report passes: no FLOP, byte, rate or time figure is negative (unknown instead, said), and
    partial figures are said to be lower bounds."""
    bad = [k for k in _NON_NEGATIVE if (getattr(out, k) or 0) < 0]
    for k in bad:
        setattr(out, k, None)
    if bad:
        out.notes.append(f"negative figures left out (unknown): {', '.join(bad)}")
    if out.flops_per_step is not None and out.flops_lower_bound:
        out.notes.append("FLOPs per step are a lower bound (dots and convolutions only, or a loop of unknown trip "
                         "count counted once): achieved FLOP/s, HFU and the compute prediction are lower bounds too")
    if out.bytes_per_step is not None and out.bytes_lower_bound:
        out.notes.append("bytes per step are a lower bound (the compiled figure missed part of the program, or the "
                         "graphs' inputs + outputs only): achieved bytes/s, bandwidth utilization and the memory "
                         "prediction are lower bounds too")


def _model_mfu(out: RooflineSection, steady: Iterations, peak: Peak) -> None:
    """Model-FLOPs MFU where every rated step has model FLOPs (StepRecord.model_flops), over the time HFU was
    measured over; not given where HFU is not (the time does not cover the work, no peak)."""
    costed = [s for s in steady if s.flops is not None and s.flops >= 0]
    rated = ([s for s in costed if s.device_time_s is not None] if out.mfu_time_basis == "device" else costed)
    if not rated or any(getattr(s, "model_flops", None) is None for s in rated):
        return
    model = I.total(rated, "model_flops")
    out.model_flops_per_step = model / I.count(rated)
    time_s = _time(rated, out.mfu_time_basis)
    if out.hfu is None or not peak.flops_per_s or time_s <= 0:
        return
    mfu = model / time_s / peak.flops_per_s
    if mfu > 1.0:
        out.notes.append("model-FLOPs MFU not given: the model FLOPs given per step run faster than the peak (check "
                         "--model-flops-per-step / set_step_info(model_flops=...))")
        return
    out.model_mfu = mfu


def transformer_flops(n_params: int, tokens: int) -> float:
    """A transformer's model FLOPs for one training step: 6 x N x tokens (forward 2N, backward 4N per token;
    attention's own FLOPs left out, as usual) - what a recipe gives set_step_info(model_flops=...). N is the
    non-embedding parameter count (`non_embedding_params`): an embedding table is a lookup, no multiply-adds,
    and counting it (a BERT's 23 M word embeddings beside an 86 M body) puts model FLOPs above what the hardware
    ran (docs/roofline.md#hfu-and-model-flops-mfu)."""
    return 6.0 * n_params * tokens


_EMBEDDINGS = ("Embedding", "EmbeddingBag")


def _is_embedding(module: Any) -> bool:
    """torch's nn.Embedding / nn.EmbeddingBag or a subclass (read from the class, torch not imported here)."""
    return any(c.__name__ in _EMBEDDINGS and c.__module__.startswith("torch.nn") for c in type(module).__mro__)


def non_embedding_params(model: Any) -> int:
    """N for `transformer_flops`: a torch module's parameters less the weights of its embedding tables
    (nn.Embedding, nn.EmbeddingBag: token, position and segment embeddings), each shared parameter once - an
    output projection tied to the word embeddings is the same tensor, so it is left out with them."""
    tables = {id(p) for m in model.modules() if _is_embedding(m) for p in m.parameters(recurse=False)}
    return sum(p.numel() for p in model.parameters() if id(p) not in tables)


def _section(steady: Iterations, costs: dict[str, Any], peak: Peak, step_time_p50: float | None,
             found: list[Sink] | None, breakdown: dict[str, Any] | None) -> RooflineSection:
    out = RooflineSection(costs.get("source", "unavailable"), costs.get("scope"), costs.get("method"),
                          peak.to_json(), costs.get("graphs", []), list(costs.get("notes", [])), steady.count,
                          ridge_flops_per_byte=peak.ridge, boundaries=costs.get("boundaries") or None)
    _graph_sources(out)
    costed = [s for s in steady if s.flops is not None and s.flops >= 0]
    if len(costed) < sum(1 for s in steady if s.flops is not None):
        out.notes.append(f"{I.count(s for s in steady if (s.flops or 0) < 0)} steady steps had a negative FLOP count "
                         "(a cost analysis that gave -1): left out, their cost unknown")
    if any(s.bytes_accessed is None or s.bytes_accessed < 0 for s in costed):
        out.bytes_lower_bound = True
    out.steps_with_cost = I.count(costed)
    if not costed:
        out.explanation = ("no steady step has a known cost" if steady else "no steady steps to measure") + \
            (f" ({out.notes[0]})" if out.notes else "")
        return out
    # weighed by the iterations each record stands for (a folded record's figures are its iterations' mean)
    n = I.count(costed)
    flops = I.total(costed, "flops")
    nbytes = I.total(costed, _bytes)
    out.flops_per_step = flops / n
    out.bytes_per_step = nbytes / n
    out.transcendentals_per_step = I.total(costed, "transcendentals") / n
    out.arithmetic_intensity = flops / nbytes if nbytes else None
    out.costed_step_time_s = steady.of(costed).stats("step")["p50"]  # the subset the FLOPs figures cover
    observed = step_time_p50 if step_time_p50 is not None else out.costed_step_time_s
    out.observed_step_time_s = observed
    basis, rated = _time_basis(costed, out)
    time_s = _time(rated, basis)
    out.mfu_time_basis = basis
    if time_s > 0:
        out.achieved_flops_per_s = I.total(rated, "flops") / time_s
        out.achieved_bytes_per_s = I.total(rated, _bytes) / time_s
    if peak.flops_per_s and out.achieved_flops_per_s is not None:
        out.mfu = out.achieved_flops_per_s / peak.flops_per_s
    if out.mfu is not None and 1.0 < out.mfu <= CALIBRATED_SLACK and peak.name.startswith("cpu"):
        out.notes.append(f"HFU at the calibrated peak: the steps reached {out.mfu:.0%} of the CPU calibration "
                         "(the best matmul rate measured on this machine, not a hardware limit), given as 100%")
        out.mfu = 1.0
    if out.mfu is not None and out.mfu > 1.0:
        out.notes.append("HFU not given: achieved FLOP/s above the peak (" + (
            "the CPU calibration ran under load or below what XLA's kernels reach; measure again with "
            "`python -m ptxla_perf.peaks --recalibrate`" if peak.name.startswith("cpu") else
            "the peak is set too low, or the step time does not cover the device's work") + ")")
        out.mfu = None  # never a utilisation above 100%
    if peak.bytes_per_s and out.achieved_bytes_per_s is not None:
        out.bandwidth_utilization = out.achieved_bytes_per_s / peak.bytes_per_s
    compute = flops / n / peak.flops_per_s if peak.flops_per_s else None
    memory = nbytes / n / peak.bytes_per_s if peak.bytes_per_s else None
    out.predicted_compute_s, out.predicted_memory_s = compute, memory
    predicted = max(x for x in (compute, memory) if x is not None) if (compute or memory) else None
    out.predicted_step_time_s = predicted
    if not predicted:
        out.explanation = f"no prediction: {peak.source}" if peak.name == "unknown" else \
            "no prediction: the steps ran no FLOPs and moved no bytes"
        return out
    _verdict(out, observed, predicted, basis, peak, found or [], breakdown)
    return out


def _bytes(s) -> float:
    """A step's bytes, unknown or negative as 0 (the section's bytes are then a lower bound: bytes_lower_bound)."""
    return max(s.bytes_accessed or 0.0, 0.0)


def _verdict(out: RooflineSection, observed: float, predicted: float, basis: str, peak: Peak, found: list[Sink],
             breakdown: dict[str, Any] | None) -> None:
    """Predicted against observed: the verdict and its explanation (the module's docstring has the rule)."""
    compute, memory = out.predicted_compute_s, out.predicted_memory_s
    ratio = observed / predicted
    out.observed_over_predicted = ratio
    device = out.device_step_time_s
    out.device_over_predicted = device / predicted if device is not None else None
    gap = max(observed - predicted, 0.0)
    explaining = [f for f in found if _explains(f, gap)]
    out.related_findings = sorted({f.kind for f in explaining})
    bound = "compute" if (compute or 0.0) >= (memory or 0.0) else "memory"
    covered = device / predicted if basis == "device" else ratio  # the time HFU was measured over
    if covered < UNDER_RATIO and out.mfu is not None:
        out.mfu = None
        out.notes.append("HFU not given: " + ("the device's busy time is below the prediction: the peak is set "
                                              "too low" if basis == "device" else
                                              "the step's wall time does not cover the device's work"))
    if ratio < UNDER_RATIO and device is not None and device / predicted >= UNDER_RATIO:
        _from_device(out, observed, device, predicted, bound, ratio)
    elif ratio < UNDER_RATIO:
        out.explanation = (f"the observed step ({_ms(observed)}) is {fmt_ratio(ratio)} the prediction ({_ms(predicted)}): "
                           "the step's wall time does not cover the device's work (torch_xla's sync and JAX's "
                           "dispatch return before the device finishes: a loop whose steps neither depend on each "
                           "other nor read a value measures dispatch) or the peak is set too low; HFU is not "
                           "meaningful here" + (f" (the device's busy time, {_ms(device)} per step, is below it "
                                                "too)" if device is not None else ""))
    elif ratio > OVERHEAD_RATIO and breakdown:
        _from_breakdown(out, breakdown, found, ratio, observed, predicted, bound)
    elif ratio > OVERHEAD_RATIO:
        out.verdict = "overhead-bound"
        where = (f"see the findings: {', '.join(out.related_findings)}" if explaining else
                 "no finding explains it: host time between graphs, small ops (launch overhead), or a "
                 "calibrated peak the runtime cannot reach (docs/roofline.md); a capture (`analyze`) shows where")
        out.explanation = (f"the steady step takes {fmt_ratio(ratio)} the {bound}-bound prediction "
                           f"({_ms(observed)} observed vs {_ms(predicted)} predicted): the time goes elsewhere; "
                           f"{where}")
    else:
        out.verdict = f"{bound}-bound"
        ai, ridge = out.arithmetic_intensity, peak.ridge
        side = (f"arithmetic intensity {ai:.1f} FLOP/B {'above' if ai >= ridge else 'below'} the ridge point "
                f"{ridge:.1f}" if ai is not None and ridge else "")
        out.explanation = (f"{side + ': ' if side else ''}observed {_ms(observed)} is {fmt_ratio(ratio)} the "
                           f"predicted {_ms(predicted)}")


def _time_basis(costed: list, out: RooflineSection) -> tuple[str, list]:
    """The time HFU is measured over: the device's busy time where the adapter measured it for at least half the
    costed steps (over those steps: a report flushed mid-run lacks the latest), else the steps' wall time."""
    timed = [s for s in costed if s.device_time_s is not None]
    out.steps_with_device_time = I.count(timed)
    if not timed or 2 * out.steps_with_device_time < I.count(costed):
        return "wall", costed
    out.device_step_time_s = I.total(timed, "device_time_s") / I.count(timed)
    return "device", timed


def _time(rated: list, basis: str) -> float:
    """The time the rated steps' work took: the device's busy time or their step times, over their iterations."""
    return I.total(rated, "device_time_s" if basis == "device" else step_time_s)


def _from_device(out: RooflineSection, observed: float, device: float, predicted: float, bound: str,
                 ratio: float) -> None:
    """The host ran ahead of the device (the wall step is below the prediction: the syncs returned before the
    device finished): the verdict from the device's busy time per step."""
    d = device / predicted
    out.verdict = f"{bound}-bound"
    out.explanation = (f"the host runs ahead of the device (its syncs return before the device finishes): the "
                          f"observed step ({_ms(observed)}) is {fmt_ratio(ratio)} the prediction ({_ms(predicted)}); "
                          f"the device's busy time per step ({_ms(device)}) is {fmt_ratio(d)} the prediction" + (
                              ": the device's kernels run below the roofline (small or unfused ops, or a peak "
                              "they cannot reach)" if d > OVERHEAD_RATIO else ""))


def _from_breakdown(out: RooflineSection, split: dict[str, Any], found: list[Sink], ratio: float,
                    observed: float, predicted: float, bound: str) -> None:
    """An overhead-bound step's verdict from where its time goes: the largest component of the steady breakdown
    (input-, host-, launch-, device-bound), with its ms and share, and the finding behind it when that finding
    was raised (a warning: its own cost is real) - never a finding whose cost is small."""
    largest = split["largest"]
    verdict, kind = _BOUND_BY.get(largest, ("overhead-bound", None))
    ms_part, share = split["components_s"][largest], split["share"][largest]
    behind = [f for f in found if kind and f.kind == kind]
    out.verdict = verdict
    out.bound_by = {"component": largest, "seconds_per_step": ms_part, "share": share,
                       "finding": kind if behind else None}
    out.related_findings = [kind] if behind else []
    what = {"data": "waiting for input", "host": "the host's Python and tracing", "launch": "launching graphs",
            "device": "waiting for the device", "read_wait": "waiting in host reads",
            "compile": "compiling", "other": "time no part of the step accounts for",
            "profiler": "ptxla_perf's own work at the step boundary, not the program's"}[largest]
    out.explanation = (f"the steady step takes {fmt_ratio(ratio)} the {bound}-bound prediction ({_ms(observed)} "
                          f"observed vs {_ms(predicted)} predicted); its largest part is {what}: "
                          f"{_ms(ms_part)} per step ({share:.0%})" + (f" ({kind})" if behind else ""))


def _explains(f: Sink, gap_s: float) -> bool:
    """A finding explains an overhead-bound step unless its own measured cost per step is a small part of the gap
    between observed and predicted (a finding whose cost was not measured is named, as possibly explaining)."""
    wait_ms = f.ms_per_step
    if wait_ms is None or not gap_s:
        return True
    return wait_ms / 1e3 >= threshold("roofline_explains_share") * gap_s


def top_ops(ops: list[dict], modules: dict[str, str], peak: Peak, limit: int = 10) -> list[dict[str, Any]]:
    """A capture's top ops (trace.top_ops: name, module, self time, occurrences) joined with the cost of the same
    instruction in the optimized HLO of its module (hlo_cost.instruction_costs): FLOPs, bytes, time per
    execution, achieved rate, and whether it is compute- or memory-bound on this device. Ops whose module's HLO is
    not known are left out."""
    costs: dict[str, dict] = {}
    for name, text in modules.items():
        try:
            costs[name] = instruction_costs(text)
        except Exception:  # an HLO text we cannot read: those ops stay out
            continue
    rows = []
    for op in ops:
        c = costs.get(op.get("module") or "", {}).get(op.get("name"))
        if c is None:
            continue
        per_device = max(op.get("occurrences", 1) / max(op.get("devices", 1), 1), 1.0)
        t = (op.get("self_time_ms_per_device") or 0.0) / 1e3 / per_device
        compute = c["flops"] / peak.flops_per_s if peak.flops_per_s else None
        memory = c["bytes"] / peak.bytes_per_s if peak.bytes_per_s else None
        predicted = max(x for x in (compute, memory) if x is not None) if (compute or memory) else None
        bound = ("collective" if op.get("category") == "collective" else
                 "compute" if (compute or 0.0) >= (memory or 0.0) and c["flops"] else "memory")
        rows.append({"name": op["name"], "module": op.get("module"), "category": op.get("category"),
                     "share": op.get("share"), "flops": c["flops"], "bytes": c["bytes"],
                     "arithmetic_intensity": c["flops"] / c["bytes"] if c["bytes"] else None,
                     "time_s": t, "achieved_flops_per_s": c["flops"] / t if t else None,
                     "achieved_bytes_per_s": c["bytes"] / t if t else None,
                     "predicted_s": predicted, "observed_over_predicted": t / predicted if t and predicted else None,
                     "bound": bound})
        if len(rows) >= limit:
            break
    return rows


def summary_lines(sec: dict[str, Any] | None) -> list[str]:
    """The console's roofline lines: FLOPs per step, achieved TFLOP/s and HFU against which peak (model-FLOPs MFU
    where given); predicted vs
    observed step time and the verdict (with the findings that explain an overhead-bound step)."""
    if not sec:
        return []
    if sec.get("flops_per_step") is None:
        return [f"  roofline    unavailable: {sec.get('explanation') or sec.get('source')}"]
    peak = sec.get("peak") or {}
    at_least = "≥ " if sec.get("flops_lower_bound") else ""  # a partial count is a lower bound, never a measurement
    first = (f"  roofline    {at_least}{_flops(sec['flops_per_step'])}FLOP/step "
             f"({sec.get('flops_source') or sec.get('source')})")
    if sec.get("achieved_flops_per_s") is not None:
        first += f";  {at_least}{sec['achieved_flops_per_s'] / 1e12:.3g} TFLOP/s achieved"
    hfu = sec.get("hfu", sec.get("mfu"))  # before issue 31: `mfu` only (the same figure)
    if hfu is not None:
        first += (f";  HFU {at_least}{hfu:.1%} of {peak['flops_per_s'] / 1e12:.3g} TFLOP/s {peak.get('dtype')} "
                  f"({peak.get('name')}; {sec.get('mfu_time_basis') or 'wall'} time; XLA's FLOPs, remat included)")
    if sec.get("model_mfu") is not None:
        first += f";  MFU {sec['model_mfu']:.1%} (model {_flops(sec['model_flops_per_step'])}FLOP/step)"
    lines = [first]
    if sec.get("predicted_step_time_s") is not None:
        why = f" (see {', '.join(sec['related_findings'])})" if sec.get("related_findings") and \
            sec.get("verdict") == "overhead-bound" else ""
        by = sec.get("bound_by")
        if by:  # the verdict from the breakdown: its largest part, and the finding behind it
            why = (f" ({by['component'].replace('_', ' ')} {_ms(by['seconds_per_step'])}/step, {by['share']:.0%}"
                   + (f"; see {by['finding']}" if by.get("finding") else "") + ")")
        device = sec.get("device_step_time_s")
        busy = (f", device busy {_ms(device)}/step ({fmt_ratio(sec['device_over_predicted'])}; all its work, "
                f"overlap with the host included)"
                if device is not None and sec.get("device_over_predicted") is not None else "")
        lines.append(f"              predicted {_ms(sec['predicted_step_time_s'])} vs observed "
                     f"{_ms(sec['observed_step_time_s'])} ({fmt_ratio(sec['observed_over_predicted'])}){busy}: "
                     f"{sec['verdict']}{why}")
    return lines




def _flops(v: float) -> str:
    for unit, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if v >= scale:
            return f"{v / scale:.3g} {unit}"
    return f"{v:.3g} "
