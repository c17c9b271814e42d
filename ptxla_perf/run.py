"""`python -m ptxla_perf.run +recipe=NAME [overrides]`: a Hydra app that runs a recipe inside a Session.

The report and logs go to Hydra's run directory; `-m` sweeps give one report per job plus a comparison table.
"""
from __future__ import annotations

import dataclasses
import importlib
import logging
import os
import re
import sys
from pathlib import Path
from typing import Callable

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from .runner import requires
from .config import Config, register
from .model.outcome import RunStopped, SessionError
from .report.render import summary_lines
from .session import open_session
from .runner.quiet import drop_pjrt_default

DEFAULT_RECIPE = "mmf"
_HERE = Path(__file__).resolve().parent
CONFIG_DIR = str(_HERE / "configs" if (_HERE / "configs" / "config.yaml").is_file() else _HERE.parent / "configs")
register()  # the structured configs the YAML files extend (ptxla_perf/config.py)


def load_recipe(recipe) -> Callable:
    """The function that runs a recipe: `recipe.entry` ("module:function"), by default
    ptxla_perf.recipes.<name>:run. A config chooses the implementation; a user's own module works the same way."""
    entry = recipe.get("entry") or f"ptxla_perf.recipes.{recipe.name}:run"
    module_name, _, fn_name = entry.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is None or not module_name.startswith(exc.name):
            if (need := requires.missing_package(exc)) is not None:  # an optional framework/package: one line
                print(f"ptxla_perf: error: recipe {recipe.name!r} {need}", file=sys.stderr)
                raise SystemExit(2) from None
            raise
        raise SystemExit(f"ptxla_perf: error: recipe {recipe.name!r}: no module {module_name!r} "
                         f"(recipe.entry={entry!r})") from None
    fn = getattr(module, fn_name or "run", None)
    if not callable(fn):
        raise SystemExit(f"ptxla_perf: error: recipe {recipe.name!r}: {module_name} has no function "
                         f"{fn_name or 'run'!r} (recipe.entry={entry!r})")
    return fn


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
    recipe = cfg.recipe
    _quiet_library_info()
    if "PJRT_DEVICE" not in os.environ:  # our recipe, not the user's program: torch_xla's CPU default is documented
        drop_pjrt_default()
    out_dir = HydraConfig.get().runtime.output_dir
    _cpu_devices(recipe.get("cpu_devices"))
    if (need := requires.missing_framework(recipe.get("backend", "torch_xla"))) is not None:
        print(f"ptxla_perf: error: recipe {recipe.name!r} {need}", file=sys.stderr)
        return 2
    run_fn = load_recipe(recipe)
    conf: Config = OmegaConf.to_object(cfg)  # the typed configs (config.py), as the session takes them
    overrides = list(HydraConfig.get().overrides.task)
    try:
        session = open_session(
            recipe.get("backend", "torch_xla"), server_off="profiler.port=null",
            report_path=os.path.join(out_dir, conf.report), port=conf.profiler.port,
            run={"kind": "recipe", "recipe": recipe.name, "config": _as_dict(conf), "overrides": overrides,
                 "output_dir": out_dir},
            attribution=conf.attribution, max_warmup=conf.max_warmup, guard=conf.guard,
            progress_every_s=conf.progress_every_s,
            tensorboard_dir=os.path.join(out_dir, "tensorboard") if conf.profiler.scalars else None,
            retention=conf.step_retention,
            steps_file=os.path.join(out_dir, conf.profiler.steps_file) if conf.profiler.steps_file else None,
            roofline=conf.roofline, port_fallback=not any(o.lstrip("+").startswith("profiler.port=")
                                                          for o in overrides))
    except SessionError as exc:
        print(f"ptxla_perf: error: {exc}", file=sys.stderr)
        return 2
    capture = conf.profiler.capture
    if capture.start_step is not None:  # the session owns the window and its analysis
        session.open_capture(os.path.join(out_dir, "tensorboard"), capture.start_step, capture.num_steps,
                             analyze=capture.analyze)
    end, exc = session.run(lambda: session.extra.update(run_fn(recipe, session) or {}))
    _log_summary(session)
    if exc is not None and not isinstance(exc, (RunStopped, KeyboardInterrupt, SystemExit)):
        raise exc  # the recipe's crash, as Hydra shows it (the report is written)
    return end.exit_code


def _as_dict(conf: Config) -> dict:
    """The whole configuration as the report records it (`run.config`): plain values."""
    return dataclasses.asdict(conf)


def _log_summary(session) -> None:
    """The summary the console shows, also in Hydra's `run.log` of the run directory (it was empty)."""
    try:
        report = session.finish()  # already finished: the same report (idempotent)
        files = [h for h in logging.getLogger().handlers if isinstance(h, logging.FileHandler)]
        for line in summary_lines(report, session.report_file()):
            record = logging.LogRecord("ptxla_perf", logging.INFO, __file__, 0, line, None, None)
            for h in files:  # the run.log file only: the console has printed the summary already
                h.handle(record)
    except Exception:  # noqa: BLE001 - a log of a view: never fail the run for it
        pass


@hydra.main(config_path=CONFIG_DIR, config_name="config", version_base="1.3")
def _main(cfg: DictConfig) -> None:
    code = run_recipe(cfg)
    if code:
        sys.exit(code)


def _one_line(exc: BaseException) -> str:
    """Hydra's message on one line, keeping what fixes it: its hint ("To append to your default list use
    +recipe=mlp") and, for a config group option that does not exist, the options there are."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    if not lines:
        return type(exc).__name__
    msg = lines[0]
    hints = [line for line in lines[1:] if line.startswith("To ")]
    if hints:
        msg = f"{msg.rstrip('.')}. {hints[0]}"
    if "Available options in" in str(exc):
        after = lines[next(i for i, line in enumerate(lines) if line.startswith("Available options in")) + 1:]
        options = [o for o in after[: next((i for i, o in enumerate(after) if o.endswith(":")), len(after))]
                   if not o.startswith("base_")]  # base_*: the structured schemas the recipes extend
        if options:
            msg += f" (available: {', '.join(options)})"
    return msg


def check_overrides(argv: list[str]) -> str | None:
    """Compose the config with these overrides before anything runs: a value of the wrong type or an unknown key
    -> one line naming the key. Sweeps (-m) and anything this check cannot judge are left to Hydra."""
    if any(a in ("-m", "--multirun") or a.startswith("--") for a in argv) or any("," in a for a in argv):
        return None
    from hydra import compose, initialize_config_dir
    from hydra.errors import ConfigCompositionException
    from omegaconf.errors import OmegaConfBaseException
    try:
        with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
            compose("config", overrides=[a for a in argv if not a.startswith("hydra.")])
    except (ConfigCompositionException, OmegaConfBaseException) as exc:
        cause = exc.__cause__ if isinstance(exc.__cause__, OmegaConfBaseException) else exc
        key = getattr(cause, "full_key", None)
        msg = _one_line(cause)
        return f"{key}: {msg}" if key and key not in msg else msg
    except Exception:  # not a config error this check understands: Hydra reports it its own way
        return None
    return None


def main() -> None:
    if not any(re.match(r"^\+{0,2}recipe=", a) for a in sys.argv[1:]):
        sys.argv.append(f"+recipe={DEFAULT_RECIPE}")
    problem = check_overrides(sys.argv[1:])
    if problem:
        print(f"ptxla_perf: error: invalid configuration: {problem}", file=sys.stderr)
        sys.exit(2)
    _main()


if __name__ == "__main__":
    main()
