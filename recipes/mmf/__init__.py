"""Recipe ``mmf``: MMF's MMBT trained on the XLA device with MMF's own trainer step methods.

``run(cfg, session)`` is the recipe entry point (``cfg`` is the ``recipe`` node of the Hydra config,
``configs/recipe/mmf.yaml``).  See ``docs/recipe-mmf.md``.  Run it with
``python -m ptxla_perf.run +recipe=mmf [recipe.steps=5 recipe.model.hidden_size=32 ...]``.
"""

from __future__ import annotations

from typing import Any


def run(cfg, session: Any = None) -> dict:
    """Train ``cfg.steps`` updates and return the report's ``extra`` info (model, sizes, versions...)."""
    from .train import train

    return train(cfg, session)
