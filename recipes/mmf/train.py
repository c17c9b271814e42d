"""Train MMF's ``mmbt`` on the XLA device with MMF's own ``BaseTrainer`` step methods.

The trainer is set up by hand instead of ``BaseTrainer.load()``: ``load()``/``train()`` need MMF's
yaml configs (not shipped in the PyPI wheel) and only know CUDA/CPU devices.  Everything that runs
per update is MMF's code: ``_forward_pass`` (``DatasetLoader.prepare_batch`` -> the dataset's
``prepare_batch`` -> ``SampleList.to(device)``, then the model and ``Report``), ``_extract_loss``,
``_backward`` (``zero_grad``, ``backward``, optional ``clip_gradients``, ``optimizer.step``, the
scheduler), and for ``log_interval`` ``_update_meter`` (the ``.item()`` MMF's logger does).

The profiler annotations are injected by wrapping those bound methods on the trainer *instance*
(MMF's files are not edited): ``StepTrace('train_mmf')`` per update (its exit calls ``mark_step``, so
each update is one XLA step), ``Trace('mmf.batch_prep')`` around ``prepare_batch``,
``Trace('mmf.forward')`` around ``_forward_pass`` + ``_extract_loss`` and
``Trace('mmf.backward_optimizer')`` around ``_backward``.
"""

from __future__ import annotations

import functools
import itertools
import logging
import os
import time
from typing import Any, Callable

from omegaconf import DictConfig

from ptxla_perf.frames import hide_frames
from ptxla_perf.analysis.roofline import non_embedding_params, transformer_flops

from . import compat
from .model import build_mmbt, cache_root, ensure_random_bert, mmf_config

log = logging.getLogger("ptxla_perf.recipes.mmf")


class AnomalySyncCapReached(RuntimeError):
    pass


class _Writer:
    """Stand-in for MMF's ``Logger`` (which wants MMF's log folders); routes to Python logging."""

    def write(self, x, level="info", donot_print=False, log_all=False):
        getattr(log, level if level in ("debug", "info", "warning", "error") else "info")(str(x))


def _counters(met) -> dict[str, int]:
    transfers = met.metric_data("TransferFromDeviceTime")
    return {
        "compiles": int(met.counter_value("UncachedCompile") or 0),
        "executions": int(met.counter_value("ExecuteComputation") or 0),
        "host_transfers": int(transfers[0]) if transfers else 0,
    }


def _delta(a: dict, b: dict) -> dict:
    return {k: max(0, b[k] - a.get(k, 0)) for k in b}


class SyncCap:
    """Stops a run whose syncs explode *inside* an update (``detect_anomaly``: one compile + host copy
    per autograd op, each compiling the whole pending graph; upstream this took minutes per update and
    then crashed).  Checked from forward hooks on every module and gradient hooks on every parameter, so
    it fires in the middle of ``loss.backward()``; the exception propagates out of MMF's ``_backward``."""

    def __init__(self, met, cap: int):
        self.met, self.cap, self.base, self.tripped = met, cap, None, None

    def arm(self) -> None:
        self.base = _counters(self.met)

    def check(self, *_args) -> None:
        if self.base is None or self.tripped is not None:
            return
        d = _delta(self.base, _counters(self.met))
        if d["compiles"] + d["host_transfers"] > self.cap:
            self.tripped = d
            raise AnomalySyncCapReached(f"{d['compiles']} compiles, {d['host_transfers']} host transfers")

    def install(self, model) -> list:
        handles = [m.register_forward_hook(lambda m, i, o: self.check()) for m in model.modules()]
        handles += [p.register_hook(lambda g: self.check()) for p in model.parameters() if p.requires_grad]
        return handles


def _traced(fn: Callable, name: str, xp) -> Callable:
    """`fn` inside a profiler Trace scope. The wrapper's frame is hidden from attribution, so a finding raised
    inside a wrapped MMF method points at the loop line that called it (MMF's own line stays as the library
    detail), not at this wrapper."""
    @hide_frames
    def wrapper(*args, **kwargs):
        with xp.Trace(name):
            return fn(*args, **kwargs)
    return functools.update_wrapper(wrapper, fn)


def annotate_trainer(trainer, xp) -> None:
    """Wrap MMF's bound step methods on this trainer instance with profiler ``Trace`` scopes."""
    trainer.dataset_loader.prepare_batch = _traced(trainer.dataset_loader.prepare_batch, "mmf.batch_prep", xp)
    trainer._forward_pass = _traced(trainer._forward_pass, "mmf.forward", xp)
    trainer._extract_loss = _traced(trainer._extract_loss, "mmf.forward", xp)
    trainer._backward = _traced(trainer._backward, "mmf.backward_optimizer", xp)


def setup_trainer(cfg: DictConfig):
    """MMF objects on the XLA device: config, registry, datasets, model, optimizer, scheduler, trainer."""
    # transformers 2.3 logs every config it loads at INFO (Hydra's root level); keep its warnings only
    logging.getLogger("transformers").setLevel(logging.WARNING)
    compat.import_mmf()
    import torch
    import torch_xla
    from mmf.common.dataset_loader import DatasetLoader
    from mmf.common.meter import Meter
    from mmf.common.registry import registry
    from mmf.trainers.base_trainer import BaseTrainer
    from mmf.utils.build import build_optimizer, build_scheduler

    from .data import SyntheticMMBTDataset, make_loader

    torch.manual_seed(int(cfg.get("seed", 0)))
    device = torch_xla.device()
    cache = cache_root(cfg)
    bert_dir = ensure_random_bert(cfg)
    config = mmf_config(cfg, bert_dir, cache)

    registry.register("config", config)
    registry.register("writer", _Writer())
    registry.register("current_device", device)  # MMF datasets move batches here (prepare_batch)
    registry.register("global_device", 0)
    registry.register("data_parallel", False)
    registry.register("distributed", False)

    train_ds = SyntheticMMBTDataset(cfg, "train")
    val_ds = SyntheticMMBTDataset(cfg, "val", num_samples=int(cfg.data.eval_samples))
    bs, nw = int(cfg.data.batch_size), int(cfg.data.get("num_workers", 0))
    train_loader = make_loader(train_ds, bs, drop_last=True, num_workers=nw)
    val_loader = make_loader(val_ds, bs, drop_last=bool(cfg.eval_drop_last), num_workers=nw)
    if len(train_loader) == 0:
        raise ValueError(f"recipe.data.train_samples={len(train_ds)} < batch_size={bs}")

    trainer = BaseTrainer(config)  # what load() would set, minus MMF's yaml/CUDA/CPU-only parts:
    trainer.run_type = "train"
    trainer.local_rank, trainer.distributed, trainer.device = 0, False, device
    trainer.writer = registry.get("writer")
    trainer.dataset_loader = DatasetLoader(config)
    trainer.dataset_loader.mapping = {"train": train_ds, "val": val_ds}
    trainer.model = build_mmbt(config).to(device)
    trainer.optimizer = build_optimizer(trainer.model, config)
    trainer.training_config = config.training
    trainer.should_clip_gradients = bool(config.training.clip_gradients)
    trainer.log_interval = int(config.training.log_interval)
    trainer.max_updates = int(config.training.max_updates)
    trainer.lr_scheduler = build_scheduler(trainer.optimizer, config)
    trainer.meter = Meter()
    trainer.tb_writer = None
    trainer.not_debug = True
    trainer.current_epoch = trainer.current_iteration = trainer.num_updates = 0
    return trainer, train_loader, val_loader, bert_dir


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for pkg in ("mmf", "transformers", "torch", "torch_xla"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:  # pragma: no cover
            out[pkg] = "unknown"
    return out


def _anomaly_message(tripped: dict, step: int, cap: int) -> str:
    return (
        f"recipe.detect_anomaly=true: update {step + 1} had already made {tripped['compiles']} compiles and "
        f"{tripped['host_transfers']} device-to-host copies without finishing (recipe.anomaly_sync_cap={cap}), "
        "so the run was stopped. torch.autograd.set_detect_anomaly(True), which MMF's BaseTrainer.train() "
        "turns on, checks every autograd op's output for NaN on the host; on XLA each check cuts the graph "
        "(one compile + one host copy per op, each compiling the whole pending graph). Leave it off on XLA."
    )


def static_info(cfg: DictConfig) -> dict:
    """Report facts known before training (so a stopped run's report still has them)."""
    m, d = cfg.model, cfg.data
    bs, tokens = int(d.batch_size), int(d.tokens)
    return {
        "model": str(cfg.get("model_name", "mmbt")),
        "versions": _versions(),
        "sizes": {
            "hidden_size": int(m.hidden_size), "num_hidden_layers": int(m.num_hidden_layers),
            "num_attention_heads": int(m.num_attention_heads), "intermediate_size": int(m.intermediate_size),
            "vocab_size": int(m.vocab_size), "batch_size": bs, "tokens": tokens, "regions": int(d.regions),
            "modal_hidden_size": int(m.modal_hidden_size), "num_labels": int(m.num_labels),
        },
        "samples_per_step": bs,
        "tokens_per_step": bs * tokens,
        "knobs": {k: cfg.get(k) for k in ("log_interval", "eval_every", "eval_drop_last", "detect_anomaly")},
        "xla_no_special_scalars": os.environ.get("XLA_NO_SPECIAL_SCALARS", "") not in ("", "0"),
    }


def train(cfg: DictConfig, session: Any = None) -> dict:
    """Train ``cfg.steps`` updates; with a ptxla_perf ``session`` (already started) report into it."""
    import torch
    import torch_xla.core.xla_model as xm
    import torch_xla.debug.metrics as met
    import torch_xla.debug.profiler as xp

    say = session.say if session is not None else (lambda msg: print(msg, flush=True))
    info = static_info(cfg)
    if session is not None:
        session.extra.update(info)

    t_setup = time.perf_counter()
    trainer, train_loader, val_loader, bert_dir = setup_trainer(cfg)
    annotate_trainer(trainer, xp)
    model = trainer.model
    info.update(
        model_class=f"{type(model).__module__}.{type(model).__qualname__}",
        model_params=sum(p.numel() for p in model.parameters()),
        # N of 6·N·tokens (roofline.transformer_flops): without the embedding tables, which do no multiply-adds
        model_params_non_embedding=non_embedding_params(model),
        bert_model_dir=str(bert_dir),
        compat=list(compat.INSTALLED),
        trainer="mmf.trainers.base_trainer.BaseTrainer (_forward_pass, _extract_loss, _backward)",
    )
    if session is not None:
        session.extra.update(info)
    setup_s = time.perf_counter() - t_setup

    steps = int(cfg.steps)
    log_interval = int(cfg.get("log_interval", 0) or 0)
    eval_every = int(cfg.get("eval_every", 0) or 0)
    detect_anomaly = bool(cfg.get("detect_anomaly", False))
    cap = int(cfg.get("anomaly_sync_cap", 10))
    bs, tokens = info["samples_per_step"], int(cfg.data.tokens)

    n_params = int(info.get("model_params_non_embedding") or 0)

    def step_info(phase: str, samples: int) -> None:
        if session is not None:
            # model FLOPs for model-FLOPs MFU beside HFU (roofline.py): 6·N·tokens a training step, 2·N·tokens
            # a forward-only evaluation step
            flops = transformer_flops(n_params, samples * tokens) * (1.0 if phase == "train" else 1 / 3)
            session.set_step_info(samples=samples, tokens=samples * tokens, phase=phase,
                                  model_flops=flops if n_params else None)

    evals: list[dict] = []
    stopped: str | None = None
    batches = itertools.chain.from_iterable(itertools.repeat(train_loader))

    def evaluate(at_update: int) -> None:
        """An evaluation pass like MMF's (no_grad forward + loss per batch), one XLA step per batch."""
        model.eval()
        sizes = []
        with torch.no_grad():
            for j, batch in enumerate(val_loader):
                step_info("eval", int(batch.get_batch_size()))
                with xp.StepTrace("eval_mmf", step_num=j):
                    report = trainer._forward_pass(batch)
                    trainer._extract_loss(report)
                sizes.append(int(report.batch_size))
        model.train()
        step_info("train", bs)
        evals.append({"after_update": at_update, "batch_sizes": sizes})

    guard = SyncCap(met, cap) if detect_anomaly else None
    hooks = guard.install(model) if guard else []
    prev_anomaly = torch.is_anomaly_enabled()
    if detect_anomaly:
        torch.autograd.set_detect_anomaly(True)  # what MMF's BaseTrainer.train() does
    step_info("train", bs)
    model.train()
    t_train = time.perf_counter()
    try:
        with compat.quiet_known_deprecations(sync_cap=guard is not None):
            for step in range(steps):
                if guard:
                    guard.arm()
                with xp.StepTrace("train_mmf", step_num=step):  # its exit is torch_xla.sync(): one step
                    try:
                        batch = next(batches)
                        trainer.current_iteration += 1
                        report = trainer._forward_pass(batch)
                        loss = trainer._extract_loss(report)
                        trainer._backward(loss)
                        if log_interval and trainer.num_updates % log_interval == 0:
                            trainer._update_meter(report, trainer.meter)  # MMF's logger path: loss .item()
                    except AnomalySyncCapReached:
                        stopped = _anomaly_message(guard.tripped, step, cap)
                        info["stopped_early"] = stopped
                        if session is not None:
                            session.extra.update(info)
                            session.request_stop(stopped)  # raised at this step's boundary (StepTrace exit)
                        else:
                            say(f"[mmf] {stopped}")
                if stopped:
                    break
                if eval_every and trainer.num_updates % eval_every == 0:
                    evaluate(trainer.num_updates)
            xm.wait_device_ops()
    finally:
        torch.autograd.set_detect_anomaly(prev_anomaly)
        for h in hooks:
            h.remove()
    train_s = time.perf_counter() - t_train

    # per-step counts and times are the session's step records (report `steps` / `summary`): not kept twice here
    info.update(updates=trainer.num_updates, stopped_early=stopped, evals=evals,
                recipe_timing={"setup_s": round(setup_s, 2), "train_s": round(train_s, 2)})
    return info
