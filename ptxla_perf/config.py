"""The runner's configuration as types: Hydra structured configs registered in the ConfigStore.

`configs/config.yaml` and `configs/recipe/*.yaml` extend these schemas (their defaults lists name `base_config`
and `base_<recipe>`), so an override of the wrong type (`recipe.steps=abc`) or an unknown key fails before anything
runs, naming the key. docs/config.md is generated from these classes (`python -m ptxla_perf.config`) and a test
checks it is current. Each field's doc is the `help` in its metadata.
"""
from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, List, Optional

if TYPE_CHECKING:  # Hydra is imported by the runner only: guard.py and the adapters read defaults from here
    from hydra.core.config_store import ConfigStore


def _f(default: Any, help: str, factory: bool = False):
    """A field with its documentation (docs/config.md is generated from `help`)."""
    if factory:
        return field(default_factory=default, metadata={"help": help})
    return field(default=default, metadata={"help": help})


DEFAULT_PORT = 9012  # the profiler server's port, unless one is given (the runner, `profile`, the API)
MAX_WARMUP = 5  # the most iterations counted as warm-up (compiles.classify)


# --- top level --------------------------------------------------------------------------------------------------
@dataclass
class CaptureConfig:
    start_step: Optional[int] = _f(None, "trace a window of steps into <run dir>/tensorboard from this step; null = "
                                         "off (e.g. 5 skips 5 warm-up steps)")
    num_steps: int = _f(3, "steps in the traced window")
    analyze: bool = _f(True, "analyze the capture and merge its `trace` section and findings into the report")


@dataclass
class ProfilerConfig:
    port: Optional[int] = _f(DEFAULT_PORT, "profiler server port (TensorBoard > Capture Profile); null disables "
                                           "it; the default gives way to the next free port when taken, a port you "
                                           "set does not")
    scalars: bool = _f(True, "per-step scalars as TensorBoard event files in <run dir>/tensorboard (docs/html.md)")
    steps_file: Optional[str] = _f(None, "stream every step's record to this JSON-lines file as it happens (relative: "
                                         "in the run directory); null = none (docs/report.md#step-retention)")
    capture: CaptureConfig = _f(CaptureConfig, "in-process capture of a step window", factory=True)


@dataclass
class AttributionConfig:
    mode: str = _f("auto", "auto | always | off (docs/attribution.md)")
    initial_steps: int = _f(3, "graph-capture steps at the start (warm-up compiles happen there)")
    rearm_steps: int = _f(2, "attribution steps after an anomaly that has no line yet")
    max_steps: int = _f(20, "attribution budget per run (auto mode)")
    hlo: bool = _f(True, "capture graphs on attribution steps to explain recompiles")


@dataclass
class RooflineConfig:
    peak_tflops: Optional[float] = _f(None, "the device's peak FLOP/s in TFLOP/s; null = from the device kind (CPU: "
                                            "calibrated) (docs/roofline.md)")
    peak_gbps: Optional[float] = _f(None, "its peak memory bandwidth in GB/s; null = likewise")
    device_memory_gb: Optional[float] = _f(None, "the device's memory in GiB for the memory section's capacity and "
                                                 "headroom (\"would it fit on X\") and memory_growth's rating; null = "
                                                 "from the runtime or the spec table (docs/report.md#memory)")
    model_flops_per_step: Optional[float] = _f(None, "the model's FLOPs per training step (e.g. 6 x parameters x "
                                                     "tokens) for model-FLOPs MFU beside HFU; null = not given")


@dataclass
class RetentionConfig:
    trim_above: int = _f(2000, "a report of at most this many iterations keeps every step; above it, steps[] is "
                               "trimmed and step_buckets sum up every step (docs/report.md#step-retention)")
    first: int = _f(200, "iterations kept in full at the start (warm-up, compiles, attribution)")
    last: int = _f(200, "iterations kept in full at the end")
    around: int = _f(2, "iterations kept on each side of an anomaly (a compile, an outlier, a finding's step)")
    max_anomalies: int = _f(500, "anomalies kept between the first and the last steps (the earliest)")
    outlier_ratio: float = _f(3.0, "a steady step slower than this multiple of the run's p50 step time is an anomaly")
    named_share: float = _f(0.1, "a finding's steps mark anomalies only when they are at most this share of the run "
                                 "(an every-step pattern marks none)")
    bucket_min: int = _f(100, "the narrowest step bucket, in iterations")
    max_buckets: int = _f(1000, "buckets widen (by bucket_min iterations) so that a run never has more")
    fold_after: int = _f(4096, "step boundaries held in full in memory; past them the older plain iterations are "
                               "folded into repeat-counted records (memory and finish time bounded at any length)")
    fold_window: int = _f(1024, "the latest step boundaries never folded (measurements still settling)")
    fold_records: int = _f(2000, "the most records the folded part of a run holds (neighbours merge beyond)")


@dataclass
class GuardConfig:
    runaway_compiles: int = _f(40, "torch_xla: a step with this many compiles...")
    runaway_reads: int = _f(40, "...and this many host reads is runaway (graph after graph at host reads)")
    stop_after: int = _f(2, "stop when this many runaway steps come in a row")
    min_available_memory: float = _f(0.1, "or at a runaway step when less than this share of memory is available")


@dataclass
class Config:
    report: str = _f("report.json", "report file, in Hydra's run directory")
    profiler: ProfilerConfig = _f(ProfilerConfig, "profiler server and capture window", factory=True)
    attribution: AttributionConfig = _f(AttributionConfig, "line attribution (docs/attribution.md)", factory=True)
    max_warmup: int = _f(MAX_WARMUP, "most iterations counted as warm-up")
    step_retention: RetentionConfig = _f(RetentionConfig, "which steps a long run's report keeps in full "
                                                          "(docs/report.md#step-retention)", factory=True)
    roofline: RooflineConfig = _f(RooflineConfig, "HFU, model-FLOPs MFU and predicted step time (docs/roofline.md)", factory=True)
    guard: Optional[GuardConfig] = _f(GuardConfig, "runaway-compilation guard (docs/guard.md); null turns it off",
                                      factory=True)
    progress_every_s: float = _f(10.0, "a one-line progress note on stderr every this many seconds (process 0)")
    recipe: Any = _f(None, "the recipe group: +recipe=NAME (configs/recipe/NAME.yaml)")


# --- recipes ----------------------------------------------------------------------------------------------------
@dataclass
class RecipeConfig:
    name: str = _f("???", "the recipe's name (run directory suffix, report `run.recipe`)")
    backend: str = _f("torch_xla", "torch_xla | jax")
    entry: str = _f("", "module:function that runs it, called as fn(recipe_cfg, session); empty = "
                        "ptxla_perf.recipes.<name>:run. Point it at your own module to run your own recipe")


@dataclass
class MlpRecipe(RecipeConfig):
    name: str = "mlp"
    steps: int = _f(20, "training steps")
    batch_size: int = _f(32, "samples per step")
    in_features: int = _f(64, "input width")
    hidden: int = _f(256, "hidden width")
    classes: int = _f(10, "output classes")
    lr: float = _f(0.05, "SGD learning rate")
    log_every: int = _f(0, ">0: read the loss on the host every N steps (a device-to-host sync at that line)")
    mode: str = _f("lazy", "lazy (StepTrace) | dynamo (torch.compile, backend openxla) | eager (eager mode + "
                           "torch_xla.compile'd step) | spmd (batch sharded over a mesh of all devices) (docs/modes.md)")
    spmd_devices: int = _f(4, "mode=spmd on the CPU: PJRT CPU devices (CPU_NUM_DEVICES, unless set); "
                              "batch_size must be a multiple")
    keep_losses: bool = _f(False, "true: keep every step's loss tensor in a list (losses.append(loss)): the classic "
                                  "leak -> memory_growth at that line")


@dataclass
class MmfModel:
    hidden_size: int = 128
    num_hidden_layers: int = 2
    num_attention_heads: int = 2
    intermediate_size: int = 512
    vocab_size: int = _f(30522, "token ids of the synthetic text are drawn from [1, vocab_size)")
    max_position_embeddings: int = 512
    modal_hidden_size: int = _f(2048, "size of one image region feature")
    num_labels: int = 2
    training_head_type: str = "classification"
    losses: List[str] = _f(lambda: ["logit_bce"], "MMF losses", factory=True)
    use_modal_start_token: bool = True
    use_modal_end_token: bool = True
    freeze_text: bool = False
    freeze_modal: bool = False
    finetune_lr_multiplier: float = 1.0


@dataclass
class MmfData:
    batch_size: int = 8
    tokens: int = _f(32, "text sequence length")
    regions: int = _f(36, "image regions per sample")
    train_samples: int = _f(256, "synthetic train set size (the loader cycles over it)")
    eval_samples: int = _f(27, "val set size; not a multiple of batch_size so the last eval batch is smaller")
    num_workers: int = 0


@dataclass
class MmfOptim:
    type: str = "adam_w"
    lr: float = 1.0e-05
    eps: float = 1.0e-08
    scheduler: str = "warmup_linear"
    num_warmup_steps: int = 2000
    num_training_steps: int = 22000
    clip_gradients: bool = False
    max_grad_l2_norm: float = 0.25


@dataclass
class MmfRecipe(RecipeConfig):
    name: str = "mmf"
    model_name: str = _f("mmbt", "MMF registry key; the model is built by mmf.utils.build.build_model")
    steps: int = _f(20, "training updates (one XLA step each)")
    seed: int = 0
    log_interval: int = _f(0, "N>0: read the reduced loss on the host every N updates -> device_to_host_sync")
    eval_every: int = _f(0, "K>0: evaluation pass over the val set every K updates")
    eval_drop_last: bool = _f(True, "false: the eval pass's last batch is smaller -> a one-off recompilation")
    detect_anomaly: bool = _f(False, "true: torch.autograd.set_detect_anomaly(True) -> one sync per autograd op")
    anomaly_sync_cap: int = _f(10, "with detect_anomaly: stop inside the update that passes this many compiles + "
                                   "host transfers")
    model: MmfModel = _f(MmfModel, "MMBT model sizes", factory=True)
    data: MmfData = _f(MmfData, "synthetic data", factory=True)
    optim: MmfOptim = _f(MmfOptim, "MMF's Hateful Memes MMBT optimizer settings", factory=True)
    cache_dir: Optional[str] = _f(None, "random-init BERT cache; null: $PTXLA_PERF_CACHE_DIR or "
                                        "~/.cache/ptxla_perf, + /mmf")


@dataclass
class RnnJaxRecipe(RecipeConfig):
    name: str = "rnn_jax"
    backend: str = "jax"
    variant: str = _f("initial", "initial (state and batches in NumPy) | fixed (on the device once)")
    steps: int = 30
    batch_size: int = 64
    num_batches: int = 4
    seq_len: int = 32
    features: int = 16
    hidden: int = 64
    lr: float = 0.05
    seed: int = 0
    block_each_step: bool = _f(True, "fixed: wait for each step so step time is compute time")
    donate: bool = _f(True, "fixed: donate the parameters to the step (donate_argnums=0); false -> "
                            "missing_donation (the old and new parameters both on the device during each step)")


@dataclass
class VitMeshRecipe(RecipeConfig):
    name: str = "vit_mesh"
    backend: str = "jax"
    steps: int = 8
    batch_size: int = _f(64, "global; a multiple of the mesh size")
    num_batches: int = 2
    cpu_devices: int = _f(8, "host-platform devices on the CPU (ignored on TPU/GPU)")
    mesh_shape: List[int] = _f(lambda: [8], "mesh shape", factory=True)
    mesh_axes: List[str] = _f(lambda: ["data"], "the batch is sharded over these; parameters are replicated",
                              factory=True)
    image_size: int = 32
    patch: int = 8
    channels: int = 3
    dim: int = 64
    depth: int = 2
    heads: int = 4
    classes: int = 10
    lr: float = 0.01
    seed: int = 0
    capture_start_step: Optional[int] = _f(3, "the recipe's own capture window when profiler.capture.start_step "
                                              "is null; null = off")
    capture_num_steps: int = 3


@dataclass
class MatmulRecipe(RecipeConfig):
    name: str = "matmul"
    mode: str = _f("matmul", "matmul (one big matmul per step, forward) | ffw (a mock transformer FFW block, "
                             "trained)")
    steps: int = 12
    batch: int = _f(4, "B")
    seq: int = _f(128, "T")
    d_model: int = _f(512, "D")
    d_ff: int = _f(2048, "F")
    dtype: str = _f("float32", "float32 | bfloat16")
    wait_each_step: bool = _f(True, "wait for the device after each step: both backends return before the device "
                                    "finishes, so independent steps would time only dispatch")


@dataclass
class DpJaxRecipe(RecipeConfig):
    name: str = "dp_jax"
    backend: str = "jax"
    processes: int = _f(2, "local JAX processes (jax.distributed.initialize on localhost, gloo CPU collectives)")
    steps: int = 20
    batch_size: int = _f(32, "per process")
    features: int = 64
    lr: float = 0.01
    seed: int = 0
    slow_rank: Optional[int] = _f(None, "this rank sleeps slow_ms before each step (a slow input pipeline): "
                                        "straggler")
    slow_ms: float = 0.0
    block_each_step: bool = _f(False, "wait for each step: every rank's step is as long as the slowest's")
    read_loss_rank: Optional[int] = _f(None, "this rank alone prints the loss every step (a host sync): "
                                             "rank_divergence")
    coordinator_port: Optional[int] = _f(None, "null: a free port on localhost")
    timeout_s: float = _f(300.0, "a rank still running after this is killed")


RECIPES = {"mlp": MlpRecipe, "mmf": MmfRecipe, "rnn_jax": RnnJaxRecipe, "vit_mesh": VitMeshRecipe,
           "matmul": MatmulRecipe, "dp_jax": DpJaxRecipe}


def register(cs: ConfigStore | None = None) -> None:
    """Put the schemas in Hydra's ConfigStore (the YAML files' defaults lists name them)."""
    from hydra.core.config_store import ConfigStore
    cs = cs or ConfigStore.instance()
    cs.store(name="base_config", node=Config)
    for name, node in RECIPES.items():
        cs.store(group="recipe", name=f"base_{name}", node=node, package="recipe")


# --- docs/config.md ---------------------------------------------------------------------------------------------
def _rows(cls, prefix: str):
    for f in dataclasses.fields(cls):
        default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        if dataclasses.is_dataclass(default):
            yield from _rows(type(default), f"{prefix}{f.name}.")
            continue
        typ = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))
        shown = "null" if default is None else ("true" if default is True else "false" if default is False
                                                 else default)
        yield f"| `{prefix}{f.name}` | `{typ}` | `{shown}` | {f.metadata.get('help', '').replace('|', chr(92) + '|')} |"


def markdown() -> str:
    lines = ["# Runner configuration reference", "",
             "Generated from `ptxla_perf/config.py` (`python -m ptxla_perf.config > docs/config.md`); a test checks",
             "it is current. Overrides are typed: a value of the wrong type or an unknown key stops the run before",
             "anything starts, with one line naming the key. How to run: [runner.md](runner.md).", "",
             "## Top level (`configs/config.yaml`)", "", "| key | type | default | meaning |", "|---|---|---|---|"]
    lines += [r for r in _rows(Config, "") if not r.startswith("| `recipe`")]
    for name, cls in RECIPES.items():
        lines += ["", f"## `+recipe={name}` (`configs/recipe/{name}.yaml`)", "", "| key | type | default | meaning |",
                  "|---|---|---|---|"]
        lines += list(_rows(cls, "recipe."))
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.stdout.write(markdown())
