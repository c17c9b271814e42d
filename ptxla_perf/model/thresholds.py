"""Every threshold a rule compares against, named once with what it means: the rules (rules/iteration.py, rules/ranks.py,
trace/rules.py, roofline.py, backends' own rules) read them from here, and docs/report.md renders this table (a test checks)."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Threshold:
    name: str
    value: float
    meaning: str


_ALL = (
    Threshold("recurring_min_hits", 2,
              "a finding recurs (warning) when it hits at least this many iterations..."),
    Threshold("recurring_share", 0.5, "...and at least this share of its phase's iterations"),
    Threshold("eager_recurring_min_hits", 3,
              "eager (JAX) ops at one line compile in at least this many training iterations (and recurring_share "
              "of them) to be a warning"),
    Threshold("cycle_min_boundaries", 6,
              "no optimizer in the run: at least this many boundaries taking turns in a fixed cycle of sync sites "
              "before the cycle is called a graph break"),
    Threshold("cycle_max_sites", 4, "...with at most this many sites in the cycle"),
    Threshold("input_bound_share", 0.3,
              "input_bound: the loop waits for its next batch this share of the steady step (on average, and in "
              "recurring_share of the steady steps)"),
    Threshold("input_bound_min_s", 0.005,
              "...and at least this many seconds per step (a loader's own sub-millisecond queue hand-off in a toy "
              "step is no input pipeline problem)"),
    Threshold("straggler_share", 0.25,
              "a rank is a straggler when its typical step is this share slower than the others'..."),
    Threshold("straggler_min_s", 0.002, "...and at least this many seconds slower..."),
    Threshold("straggler_consistency", 0.75, "...in at least this share of the steady steps compared step by step"),
    Threshold("straggler_min_steps", 3, "a rank needs at least this many steady steps to be compared"),
    Threshold("straggler_part_share", 0.05,
              "equal step times (a synchronous job): a rank's own work (data, host, launch, other) longer than the "
              "others' by this share of the step (and straggler_min_s)..."),
    Threshold("straggler_wait_match", 0.5,
              "...is a straggler when the other ranks wait on the device longer than it does by at least this "
              "share of that difference (they wait for it in the collective)"),
    Threshold("roofline_overhead_ratio", 2.0,
              "observed steady step above this multiple of the roofline prediction: overhead-bound"),
    Threshold("roofline_explains_share", 0.1,
              "an overhead-bound verdict names a finding only if its measured cost per step is at least this share "
              "of the gap between observed and predicted step time"),
    Threshold("roofline_under_ratio", 0.5,
              "observed step below this multiple of the prediction: the wall time cannot cover the device's work"),
    Threshold("roofline_calibrated_slack", 1.15,
              "on a calibrated CPU peak (a measured rate, not a hardware limit), an achieved rate up to this multiple "
              "of it is HFU 100 % (with a note); above it, HFU is not given"),
    Threshold("eager_ops_share", 0.25,
              "torch_xla eager mode: eager ops outside the compiled step are a warning when they run in recurring "
              "iterations and the loop spends at least this share of the steady step outside the compiled step "
              "(data wait excluded)..."),
    Threshold("eager_ops_min_s", 0.001, "...and at least this many seconds per step"),
    Threshold("memory_growth_min_samples", 4,
              "memory_growth: at least this many live-memory samples after warm-up (torch_xla: every step; JAX: "
              "every few steps)..."),
    Threshold("memory_growth_share", 0.75, "...the live count went up in at least this share of the intervals..."),
    Threshold("memory_growth_min_per_step", 0.5, "...by at least this many device arrays per step on average"),
    Threshold("memory_growth_run_steps", 1_000_000,
              "memory_growth is rated by what it costs over a realistic run of this many steps: bytes/step x this "
              "is the projected growth..."),
    Threshold("memory_growth_capacity_share", 0.1,
              "...a warning when the projected growth is at least this share of a known device capacity..."),
    Threshold("memory_growth_min_bytes", 1 << 30,
              "...or, the capacity unknown, at least this many bytes (1 GiB: ~1 KiB/step; a few scalars a step, "
              "megabytes in a million steps, are info with the projected figure)"),
    Threshold("eager_upload_min_s", 0.001,
              "JAX eager uploads (jnp.array of host data outside any jitted call) are rated by their dispatch "
              "time: a warning when they recur and take at least this many seconds per step..."),
    Threshold("eager_upload_share", 0.1, "...and at least this share of the steady step"),
    Threshold("memory_headroom_share", 0.1,
              "memory_headroom: the largest graph's peak leaves less than this share of a known device capacity free"),
    Threshold("host_bound_share", 0.5,
              "host_bound: the main thread's Python and graph tracing take this share of the steady step's measured "
              "time (its wall time less `other`; on average, and in recurring_share of the steady steps)..."),
    Threshold("host_bound_min_s", 0.005, "...and at least this many seconds per step"),
    Threshold("host_bound_user_share", 0.5,
              "host_bound is a warning (the user's own Python to fix) when the user's lines hold at least this share "
              "of the main thread's sampled time; below it the framework's tracing dominates and it is info"),
    Threshold("launch_bound_share", 0.4,
              "launch_bound: launching the step's graphs (the sync call, net of compile and device wait; JAX: "
              "dispatch) takes this share of the steady step's measured time (on average, and in recurring_share of "
              "the steps)..."),
    Threshold("launch_bound_min_s", 0.0001, "...and at least this many seconds per step"),
    Threshold("trace_input_bound_share", 0.15,
              "a capture's input_bound (warning): data loading or transfer with no op running takes this share of the "
              "traced steady step"),
    Threshold("trace_idle_share", 0.3,
              "a capture's input_bound (info): untraced time with no op running takes this share of the traced step "
              "(often loading outside the step annotation)"),
    Threshold("trace_host_bound_share", 0.25,
              "a capture's host_bound: host tracing, graph building and dispatch take this share of the traced step "
              "and longer than execution"),
    Threshold("trace_collective_share", 0.3,
              "a capture's collective_bound: collectives take this share of each device's op time (mean over "
              "devices)"),
)
THRESHOLDS: dict[str, Threshold] = {t.name: t for t in _ALL}


def value(name: str) -> float:
    return THRESHOLDS[name].value


def markdown_table() -> str:
    """The table docs/report.md carries (regenerate it from here when a threshold changes)."""
    rows = ["| threshold | value | meaning |", "|---|---|---|"]
    rows += [f"| `{t.name}` | {t.value:g} | {t.meaning} |" for t in _ALL]
    return "\n".join(rows) + "\n"
