"""The report's `summary` keys, named once with their units: figures.py writes them, every view reads them by these
names (render, html, merge, diff, sweep). docs/report.md's summary table lists the same keys (a test checks)."""
from __future__ import annotations

# per-step keys the assembler adds to each `steps[]` record from figures.py (values.StepRow)
STEP_STEADY = "steady"
STEP_TIME_S = "step_time_s"  # the iteration's step time: wall time net of its compile time (figures.step_time_s)
STEP_HOST_READS = "host_reads"
STEP_BREAKDOWN = "time_breakdown"  # where the iteration's time went: component -> seconds (breakdown.py)
STEP_D2H_TRANSFERS = "device_to_host_transfers"  # every device-to-host transfer: {count, bytes} (gross)
OLD_STEP_D2H = "device_to_host"  # its name before 0.5.0

STEPS = "steps"
WARMUP_STEPS = "warmup_steps"
STEADY_STEPS = "steady_steps"
EVAL_STEPS = "eval_steps"
BOUNDARIES = "boundaries"
WALL_TIME = "wall_time_s"
STEP_TIME = "step_time_s"
STEP_TIME_BASIS = "step_time_basis"
EVAL_STEP_TIME = "eval_step_time_s"
COMPILES = "compiles"
COMPILE_TIME = "compile_time_s"
CACHED_COMPILES = "cached_compiles"
RECOMPILES = "recompiles_after_warmup"
DISTINCT_GRAPHS = "distinct_graphs"
EXECUTIONS = "executions"
D2H = "device_to_host"
FALLBACK_COPIES = "fallback_copies"
H2D = "host_to_device"
D2H_TRANSFERS = "device_to_host_transfers"
D2H_TRANSFER_BYTES = "device_to_host_transfer_bytes"
OLD_D2H_BYTES = "device_to_host_bytes"  # before 0.5.0
H2D_BYTES = "host_to_device_bytes"
EXECUTIONS_PER_STEP = "executions_per_step"
D2H_PER_STEP = "device_to_host_per_step"
FALLBACK_COPIES_PER_STEP = "fallback_copies_per_step"
H2D_PER_STEP = "host_to_device_per_step"
D2H_TRANSFERS_PER_STEP = "device_to_host_transfers_per_step"
D2H_TRANSFER_BYTES_PER_STEP = "device_to_host_transfer_bytes_per_step"
OLD_D2H_BYTES_PER_STEP = "device_to_host_bytes_per_step"  # before 0.5.0
H2D_BYTES_PER_STEP = "host_to_device_bytes_per_step"
FALLBACK_OPS = "fallback_ops"
THROUGHPUT = "throughput"
OVERHEAD = "overhead_us_per_step"
HOST_TIME = "host_time_s"
DATA_WAIT = "data_wait_s"
FINDINGS_BY_SEVERITY = "findings_by_severity"
MFU = "mfu"
HFU = "hfu"
MODEL_MFU = "model_mfu"
ACHIEVED_TFLOPS = "achieved_tflops_per_s"
FLOPS_PER_STEP = "flops_per_step"
ROOFLINE_VERDICT = "roofline_verdict"
PEAK_BYTES = "peak_bytes"
TEMP_BYTES = "temp_bytes"
ARGUMENT_BYTES = "argument_bytes"
DEVICE_MEMORY = "device_memory_bytes"
MEMORY_HEADROOM = "memory_headroom_bytes"
LIVE_BYTES_PER_STEP = "live_bytes_per_step"
TIME_BREAKDOWN = "time_breakdown"

# key -> (unit, what it is): the contract docs/report.md renders
FIELDS: dict[str, tuple[str, str]] = {
    STEPS: ("count", "training iterations"),
    WARMUP_STEPS: ("count", "leading training iterations that hold warm-up compiles"),
    STEADY_STEPS: ("count", "the training iterations the step-time statistics cover"),
    EVAL_STEPS: ("count", "evaluation iterations (counted apart)"),
    BOUNDARIES: ("count", "step boundaries the iterations were grouped from"),
    WALL_TIME: ("s", "wall time of all iterations"),
    STEP_TIME: ("s", "stats over the steady training iterations, each net of its own compile time"),
    STEP_TIME_BASIS: ("text", "which iterations step_time_s covers: steady (after warm-up, no compile, no "
                              "attribution) | attributed_included (the run had no other) | net_of_compile (every "
                              "iteration after warm-up compiled: wall time minus its measured compile time)"),
    EVAL_STEP_TIME: ("s", "stats over evaluation iterations that compiled nothing"),
    COMPILES: ("count", "uncached compiles"),
    COMPILE_TIME: ("s", "time spent compiling"),
    CACHED_COMPILES: ("count", "compiles served from the cache"),
    RECOMPILES: ("count", "compiles classified as recompiles after warm-up"),
    DISTINCT_GRAPHS: ("count", "distinct graph hashes seen (null: not captured)"),
    EXECUTIONS: ("count", "graph launches over the training steps"),
    D2H: ("count", "host reads of the user's code over the training steps, net of CPU-fallback copies"),
    D2H_TRANSFERS: ("count", "every device-to-host transfer over the training steps: host reads and fallback copies"),
    FALLBACK_COPIES: ("count", "device-to-host copies made by CPU-fallback ops over the training steps"),
    H2D: ("count", "host-to-device transfers over the training steps"),
    D2H_TRANSFER_BYTES: ("B", "bytes moved device-to-host over the training steps (reads and fallback copies)"),
    H2D_BYTES: ("B", "bytes moved host-to-device (null where the backend cannot tell)"),
    EXECUTIONS_PER_STEP: ("count/step", "executions / steps"),
    D2H_PER_STEP: ("count/step", "device_to_host / steps"),
    D2H_TRANSFERS_PER_STEP: ("count/step", "device_to_host_transfers / steps"),
    FALLBACK_COPIES_PER_STEP: ("count/step", "fallback_copies / steps"),
    H2D_PER_STEP: ("count/step", "host_to_device / steps"),
    D2H_TRANSFER_BYTES_PER_STEP: ("B/step", "device_to_host_transfer_bytes / steps"),
    H2D_BYTES_PER_STEP: ("B/step", "host_to_device_bytes / steps"),
    FALLBACK_OPS: ("count by op", "aten ops that ran on the CPU, over all iterations"),
    THROUGHPUT: ("per s", "samples_per_s, us_per_sample, tokens_per_s, mb_per_s over the steady iterations"),
    OVERHEAD: ("us", "stats of ptxla_perf's own time per steady iteration"),
    HOST_TIME: ("s", "stats of wall time minus device-to-host wait per steady iteration (null: not measured)"),
    DATA_WAIT: ("s", "stats of session.data_wait() time per steady iteration (null: not measured)"),
    FINDINGS_BY_SEVERITY: ("count by severity", "error / warning / info"),
    MFU: ("fraction", "roofline.mfu: the hardware FLOPs utilisation (= hfu) under its old name, for one version"),
    HFU: ("fraction", "roofline.hfu: achieved FLOP/s (XLA's cost analysis: remat and auxiliary ops counted) / peak"),
    MODEL_MFU: ("fraction", "roofline.model_mfu: model FLOPs per step (given) over the same time / peak; null: "
                            "no model FLOPs given"),
    ACHIEVED_TFLOPS: ("TFLOP/s", "roofline achieved FLOP/s / 1e12"),
    FLOPS_PER_STEP: ("FLOP", "roofline.flops_per_step"),
    ROOFLINE_VERDICT: ("text", "roofline.verdict"),
    PEAK_BYTES: ("B", "memory.peak_bytes: the largest step graph's peak (XLA's memory analysis)"),
    TEMP_BYTES: ("B", "memory.temp_bytes: that graph's temporaries"),
    ARGUMENT_BYTES: ("B", "memory.argument_bytes: that graph's arguments (parameters, state, batch)"),
    DEVICE_MEMORY: ("B", "memory.capacity.bytes (null: unknown, e.g. the CPU without --device-memory-gb)"),
    MEMORY_HEADROOM: ("B", "memory.headroom_bytes: capacity - peak (null: capacity unknown)"),
    LIVE_BYTES_PER_STEP: ("B/step", "memory.live.bytes_per_step: live device memory growth per step after warm-up"),
    TIME_BREAKDOWN: ("s", "where the steady step's time goes: components_s (mean seconds per steady iteration of data, "
                          "host, launch, compile, read_wait, device, other; they sum to wall_s), share (of wall_s), "
                          "largest, steps (null: not measured)"),
}
