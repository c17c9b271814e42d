"""Build MMF's own ``mmbt`` from the recipe config, with a small random-init BERT (no downloads).

MMF's text encoder always calls ``AutoModel.from_pretrained(bert_model_name)``.  No weights can be
downloaded here, so on first use a random-init BERT of the configured sizes is saved with
transformers 2.3's ``BertModel(BertConfig(...)).save_pretrained(dir)`` into a cache folder, and
``bert_model_name`` points at it.  transformers 2.3's ``AutoModel`` picks the class from the *name*
of that folder, so the name contains ``bert``.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from omegaconf import DictConfig, OmegaConf


def cache_root(cfg: DictConfig) -> Path:
    base = cfg.get("cache_dir") or os.path.join(
        os.environ.get("PTXLA_PERF_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "ptxla_perf"),
        "mmf",
    )
    root = Path(os.path.expanduser(str(base)))
    root.mkdir(parents=True, exist_ok=True)
    return root


def _bert_config_dict(cfg: DictConfig) -> dict:
    m = cfg.model
    return dict(
        vocab_size=int(m.vocab_size),
        hidden_size=int(m.hidden_size),
        num_hidden_layers=int(m.num_hidden_layers),
        num_attention_heads=int(m.num_attention_heads),
        intermediate_size=int(m.intermediate_size),
        max_position_embeddings=int(m.max_position_embeddings),
    )


def ensure_random_bert(cfg: DictConfig) -> Path:
    """Return the folder of a random-init BERT with the configured sizes, creating it on first use."""
    sizes = _bert_config_dict(cfg)
    seed = int(cfg.get("seed", 0))
    key = hashlib.sha1(json.dumps([sizes, seed], sort_keys=True).encode()).hexdigest()[:10]
    m = cfg.model
    folder = cache_root(cfg) / (
        f"bert-random-h{m.hidden_size}-l{m.num_hidden_layers}-a{m.num_attention_heads}-{key}"
    )
    if (folder / "config.json").exists() and (folder / "pytorch_model.bin").exists():
        return folder

    import torch
    from transformers import BertConfig, BertModel

    tmp = folder.with_name(folder.name + f".tmp{os.getpid()}")
    tmp.mkdir(parents=True, exist_ok=True)
    state = torch.random.get_rng_state()
    try:
        torch.manual_seed(seed)
        BertModel(BertConfig(**sizes)).save_pretrained(str(tmp))
    finally:
        torch.random.set_rng_state(state)
    try:
        os.replace(tmp, folder)  # atomic publish; a concurrent creator may have won the race
    except OSError:
        if not (folder / "pytorch_model.bin").exists():
            raise
    return folder


def mmf_config(cfg: DictConfig, bert_dir: Path, cache_dir: Path) -> DictConfig:
    """The global MMF config (what MMF's ``Configuration`` would assemble from its yaml files)."""
    m, d, o = cfg.model, cfg.data, cfg.optim
    name = str(cfg.get("model_name", "mmbt"))
    model_cfg = {
        "training_head_type": str(m.training_head_type),
        "bert_model_name": str(bert_dir),
        "direct_features_input": True,  # image_feature_0 (regions x modal_hidden_size) goes straight in
        "freeze_text": bool(m.freeze_text),
        "freeze_modal": bool(m.freeze_modal),
        "freeze_complete_base": False,
        "finetune_lr_multiplier": float(m.finetune_lr_multiplier),
        "modal_hidden_size": int(m.modal_hidden_size),
        "text_hidden_size": int(m.hidden_size),
        "num_labels": int(m.num_labels),
        # "default" = identity on region features; ModalEmbeddings projects them to hidden_size
        "modal_encoder": {"type": "default", "params": {"in_dim": int(m.modal_hidden_size)}},
        "use_modal_start_token": bool(m.use_modal_start_token),
        "use_modal_end_token": bool(m.use_modal_end_token),
        "fused_feature_only": False,
        "output_dim": int(m.hidden_size),
        "text_encoder": {
            "type": "transformer",
            "params": {
                "bert_model_name": str(bert_dir),
                **_bert_config_dict(cfg),
                "output_attentions": False,
                "output_hidden_states": False,
            },
        },
        "losses": [{"type": str(x)} for x in m.losses],
    }
    return OmegaConf.create(
        {
            "model": name,
            "datasets": "ptxla_synthetic",
            "model_config": {name: model_cfg},
            "dataset_config": {"ptxla_synthetic": {"data_dir": str(cache_dir)}},
            "optimizer": {
                "type": str(o.type),
                "params": {"lr": float(o.lr), "eps": float(o.eps)},
            },
            "scheduler": {
                "type": str(o.scheduler),
                "params": {
                    "num_warmup_steps": int(o.num_warmup_steps),
                    "num_training_steps": int(o.num_training_steps),
                },
            },
            "training": {
                "batch_size": int(d.batch_size),
                "max_updates": int(cfg.steps),
                "log_interval": int(cfg.log_interval) or 1,
                "evaluation_interval": int(cfg.eval_every) or 1,
                "clip_gradients": bool(o.clip_gradients),
                "max_grad_l2_norm": float(o.max_grad_l2_norm),
                "clip_norm_mode": "all",
                "lr_scheduler": True,
                "seed": int(cfg.get("seed", 0)),
                "logger_level": "info",
                "tensorboard": False,
                "evaluate_metrics": False,
                "experiment_name": "ptxla_perf",
                "should_not_log": False,
            },
            "evaluation": {"metrics": [], "predict": False},
            "env": {"cache_dir": str(cache_dir), "save_dir": str(cache_dir / "save")},
            "distributed": {"init_method": None, "rank": 0, "world_size": 1},
            "device_id": 0,
        }
    )


def build_mmbt(config: DictConfig):
    """Build the model exactly as MMF's trainer does (``load_model_and_optimizer``), on the CPU."""
    import omegaconf
    from mmf.utils.build import build_model

    attributes = config.model_config[config.model]
    with omegaconf.open_dict(attributes):
        attributes.model = config.model
    model = build_model(attributes)
    if not type(model).__module__.startswith("mmf."):
        raise RuntimeError(f"expected an MMF model, got {type(model).__module__}.{type(model).__name__}")
    return model
