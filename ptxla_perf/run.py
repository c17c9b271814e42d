"""`python -m ptxla_perf.run +recipe=NAME [overrides]`: a Hydra app that runs a recipe inside a Session.

The report and logs go to Hydra's run directory; `-m` sweeps give one report per job plus a comparison table.
"""
from __future__ import annotations

import importlib
import logging
import os
import re
import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

DEFAULT_RECIPE = "mmf"
_HERE = Path(__file__).resolve().parent
CONFIG_DIR = str(_HERE / "configs" if (_HERE / "configs" / "config.yaml").is_file() else _HERE.parent / "configs")


def _recipes_of_this_tree() -> None:
    """In a source checkout the recipes come from the same tree as the configs (CONFIG_DIR): an editable install
    of another checkout maps ptxla_perf.recipes to its own folder."""
    tree = _HERE.parent / "recipes"
    if not (_HERE / "configs").is_dir() and (tree / "__init__.py").is_file():
        try:
            import ptxla_perf.recipes as pkg
        except ImportError:
            return
        if str(tree) not in list(pkg.__path__):
            pkg.__path__.insert(0, str(tree))


def load_recipe(name: str):
    _recipes_of_this_tree()
    try:
        return importlib.import_module(f"ptxla_perf.recipes.{name}")
    except ModuleNotFoundError as exc:
        if exc.name not in (f"ptxla_perf.recipes.{name}", "ptxla_perf.recipes"):
            raise
    raise SystemExit(f"ptxla_perf: error: unknown recipe {name!r} (configs/recipe/{name}.yaml has no module)")


def _cpu_devices(n: int | None) -> None:
    """A recipe that needs N devices gets N host-platform devices on the CPU (JAX reads XLA_FLAGS when its
    backend starts, which is later); a device count the user set is kept, and TPUs/GPUs ignore the flag."""
    flags = os.environ.get("XLA_FLAGS", "")
    if n and "xla_force_host_platform_device_count" not in flags:
        os.environ["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count={int(n)}".strip()


def _quiet_library_info() -> None:
    """Hydra sets the root logger to INFO, so JAX's start-up INFO lines ("Unable to initialize backend 'tpu'") print
    in Hydra's format and look like failures. Library loggers the user left unset stay at WARNING, as in a plain
    Python run."""
    for name in ("jax", "absl"):
        lg = logging.getLogger(name)
        if lg.level == logging.NOTSET:
            lg.setLevel(logging.WARNING)


def run_recipe(cfg: DictConfig) -> int:
    from .outcome import outcome
    from .session import RunStopped, Session, SessionError
    recipe = cfg.recipe
    _quiet_library_info()
    out_dir = HydraConfig.get().runtime.output_dir
    _cpu_devices(recipe.get("cpu_devices"))
    module = load_recipe(recipe.name)
    try:
        session = Session(
            recipe.get("backend", "torch_xla"), report_path=os.path.join(out_dir, cfg.report),
            port=cfg.profiler.port,
            run={"kind": "recipe", "recipe": recipe.name, "config": OmegaConf.to_container(cfg, resolve=True),
                 "overrides": list(HydraConfig.get().overrides.task), "output_dir": out_dir},
            attribution=OmegaConf.to_container(cfg.attribution), max_warmup=cfg.max_warmup,
            guard=None if cfg.get("guard") is None else OmegaConf.to_container(cfg.guard),
            progress_every_s=cfg.progress_every_s,
            roofline=OmegaConf.to_container(cfg.roofline) if cfg.get("roofline") is not None else None)
        session.start()
    except SessionError as exc:
        print(f"ptxla_perf: error: {exc}", file=sys.stderr)
        return 2
    capture = cfg.profiler.get("capture")
    if capture and capture.get("start_step") is not None:
        _add_capture(session, capture, out_dir)
    try:
        extra = module.run(recipe, session) or {}
        session.extra.update(extra)
    except BaseException as exc:
        end = outcome(exc)
        session.finish(end.status, end.exit_code, end.reason)
        if isinstance(exc, (RunStopped, KeyboardInterrupt, SystemExit)):
            return end.exit_code
        raise
    session.finish("completed", 0)
    return 0


def _add_capture(session, capture, out_dir: str) -> None:
    """profiler.capture.*: trace a window of steps into <run dir>/tensorboard, then analyze it into the report."""
    from .capture import StepWindowCapture
    window = StepWindowCapture(os.path.join(out_dir, "tensorboard"), int(capture.start_step),
                               int(capture.num_steps), session.backend, tail_steps=1)
    session.capture_window = window

    def close_and_analyze() -> None:
        path = window.close()
        session.profiler.setdefault("captures", []).append(window.to_json())
        if path is None:
            session.say(f"ptxla_perf: no capture: {window.error or 'the run ended before the capture window'}")
        elif capture.get("analyze", True) and session.trace is None:  # a recipe may have analyzed it already
            from .trace import analyze_trace
            try:
                session.trace = analyze_trace(path)
            except Exception as exc:  # the report still goes out without its trace section
                session.say(f"ptxla_perf: could not analyze {path}: {exc}")

    session.add_step_callback(lambda rec: window.on_step_end(rec.index), close=close_and_analyze)


@hydra.main(config_path=CONFIG_DIR, config_name="config", version_base="1.3")
def _main(cfg: DictConfig) -> None:
    code = run_recipe(cfg)
    if code:
        sys.exit(code)


def main() -> None:
    if not any(re.match(r"^\+{0,2}recipe=", a) for a in sys.argv[1:]):
        sys.argv.append(f"+recipe={DEFAULT_RECIPE}")
    _main()


if __name__ == "__main__":
    main()
