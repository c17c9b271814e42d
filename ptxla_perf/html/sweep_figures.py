"""The figures a sweep shows, in table order: the console table (sweep.py) and the sweep page
(html/sweep_page.py) read the same list."""
from __future__ import annotations

from typing import Any, Callable, NamedTuple

from ..model import fmt
from ..model.summary import Summary


def _p50(s: Summary) -> float | None:
    return s.step_time_s.p50 if s.step_time_s is not None else None


class Figure(NamedTuple):
    """A summary figure the sweep shows: its console column (None: not in the table), its chart on the sweep
    page (None: no chart), its value read from the typed summary, and its text in each."""

    column: str | None
    chart: str | None
    value: Callable[[Summary], Any]
    text: Callable[[Any], str]
    chart_text: Callable[[float], str]


FIGURES = [  # in table order; html/sweep_page.py charts the same figures
    Figure("steps", None, lambda s: s.steps, str, fmt.num),
    Figure("step p50 ms", "step time p50", _p50, lambda v: fmt.ms(v, 2, unit=False), lambda v: fmt.ms(v, 2)),
    Figure("us/sample", "µs per sample", lambda s: s.throughput.get("us_per_sample"), lambda v: fmt.num(v, 1),
           lambda v: f"{v:.1f}"),
    Figure(None, "samples/s", lambda s: s.throughput.get("samples_per_s"), str, lambda v: f"{v:.1f}"),
    Figure("FLOP/s", None, lambda s: s.achieved_tflops_per_s, fmt.flops_rate, fmt.flops_rate),
    # XLA's cost-analysis FLOPs (remat, auxiliary ops counted): hardware FLOPs utilisation; `mfu` is its old name
    Figure("HFU", None, lambda s: s.hfu if s.hfu is not None else s.mfu, lambda v: fmt.pct(v, 1), fmt.num),
    # model-FLOPs MFU only where model FLOPs were given (--model-flops-per-step, a recipe's); "-" else, and the
    # column is left out where no job has it
    Figure("MFU", None, lambda s: s.model_mfu, lambda v: fmt.pct(v, 1), fmt.num),
    Figure("compiles", "compiles", lambda s: s.compiles, str, fmt.num),
    Figure("h2d/step", "host→device / step", lambda s: s.host_to_device_per_step, lambda v: fmt.num(v, 2), fmt.num),
    Figure("d2h/step", "host reads / step", lambda s: s.device_to_host_per_step, lambda v: fmt.num(v, 2), fmt.num),
    Figure("warnings", "warnings", lambda s: (s.findings_by_severity or {}).get("warning", 0), str, fmt.num),
    Figure("peak mem", "peak memory", lambda s: s.peak_bytes, fmt.nbytes, fmt.nbytes),  # memory.py: largest graph
]


