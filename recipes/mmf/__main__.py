"""Standalone driver (development): ``python -m recipes.mmf [key=value ...]`` from the repo root.

Loads ``configs/recipe/mmf.yaml``, applies dot-list overrides, trains without a ptxla_perf session
and prints the returned info as JSON.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from omegaconf import OmegaConf


def main(argv: list[str]) -> int:
    os.environ.setdefault("PJRT_DEVICE", "CPU")
    yaml = Path(__file__).resolve().parents[2] / "configs" / "recipe" / "mmf.yaml"
    cfg = OmegaConf.merge(OmegaConf.load(yaml), OmegaConf.from_dotlist(argv))
    t0 = time.perf_counter()
    from . import run

    info = run(cfg, None)
    info["wall_s"] = round(time.perf_counter() - t0, 2)
    print(json.dumps(info, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
