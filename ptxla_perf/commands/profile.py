"""`profile SCRIPT [ARGS...]`: run an unmodified training script as __main__ (like `python -m cProfile`) inside
a session, write the report, print the summary, exit with the script's own exit code."""
from __future__ import annotations

import argparse
import os
import runpy
import sys

from ..cli import COMMANDS, UsageError, describe, number
from ..config import DEFAULT_PORT, MAX_WARMUP, RooflineConfig
from ..frames import print_user_traceback
from ..runner.requires import missing_framework
from ..session import SessionError, check_options, open_session
from ..session.on_import import SessionOnImport


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("profile", help=COMMANDS["profile"],
                       description=describe(__doc__))
    p.add_argument("--report", default="ptxla_perf_report.json", help="JSON report path (default: %(default)s)")
    p.add_argument("--backend", choices=["auto", "torch_xla", "jax"], default="auto",
                   help="auto: the framework the program imports (torch_xla where it imports both before its first "
                        "jitted JAX call); the session starts when that import completes (default: %(default)s)")
    p.add_argument("--port", default=None,
                   help=f"profiler server port, or 'none' (default: {DEFAULT_PORT}, or the next free port when it is "
                        "taken)")
    p.add_argument("--attribution", choices=["auto", "always", "off"], default="auto",
                   help="line attribution: first steps and after anomalies (auto), every step, or never")
    p.add_argument("--guard", choices=["on", "off"], default="on",
                   help="stop runaway compilation before it exhausts memory (docs/guard.md; default: on)")
    p.add_argument("--max-warmup", type=number(int, 0), default=MAX_WARMUP,
                   help="most steps counted as warm-up (default: %(default)s)")
    p.add_argument("--tensorboard", default=None, metavar="DIR",
                   help="write per-step scalars (step time, compiles, transfers) as TensorBoard event files into "
                        "DIR, e.g. the logdir your captures go to (default: none)")
    p.add_argument("--steps-file", default=None, metavar="PATH",
                   help="stream every step's record to PATH as JSON lines while the run goes (a long run's report "
                        "keeps only some steps in full; docs/report.md#step-retention) (default: none)")
    p.add_argument("--peak-tflops", type=number(float, 0, above=True), default=None, metavar="X",
                   help="the device's peak FLOP/s in TFLOP/s for HFU and model-FLOPs MFU (default: from the device kind; "
                        "calibrated on a CPU; docs/roofline.md)")
    p.add_argument("--peak-gbps", type=number(float, 0, above=True), default=None, metavar="Y",
                   help="the device's peak memory bandwidth in GB/s (default: as --peak-tflops)")
    p.add_argument("--device-memory-gb", type=number(float, 0, above=True), default=None, metavar="G",
                   help="the device's memory in GiB for the report's memory headroom, e.g. 16 to ask whether the step "
                        "would fit on a TPU v5e (default: from the runtime or the device kind; unknown on a CPU)")
    p.add_argument("--model-flops-per-step", type=number(float, 0, above=True), default=None, metavar="F",
                   help="the model's FLOPs per training step (6 x parameters x tokens for a transformer) for "
                        "model-FLOPs MFU beside HFU (default: not given; docs/roofline.md)")
    p.add_argument("script", help="the training script")
    p.add_argument("args", nargs=argparse.REMAINDER, help="the script's own arguments")
    return p


def parse_port(text: str | None) -> int | None:
    if text is None:
        return DEFAULT_PORT
    if text.lower() in ("none", "null", "off", "0"):
        return None
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise UsageError(f"--port must be a number from 1 to 65535 or 'none', not {text!r}")
    return int(text)


def run(args) -> int:
    script = args.script
    if not os.path.isfile(script):
        raise UsageError(f"no such script: {script}")
    if not os.access(script, os.R_OK):
        raise UsageError(f"cannot read {script}")
    port = parse_port(args.port)
    named = None if args.backend == "auto" else args.backend
    missing = missing_framework(named) if named else None
    if missing:
        raise UsageError(f"--backend {named} {missing}")
    try:  # what the session, opened at the framework's import, would fail on: said now, before the script runs
        check_options(server_off="--port none", port=port, port_fallback=args.port is None)
    except SessionError as exc:
        raise UsageError(str(exc)) from None

    def open_for(backend: str, detection: str):
        return open_session(
            backend, server_off="--port none", report_path=args.report, port=port,
            run={"kind": "script", "script": os.path.abspath(script), "argv": [script] + args.args,
                 "backend_choice": args.backend, "backend_detection": detection},
            attribution={"mode": args.attribution}, max_warmup=args.max_warmup,
            guard=None if args.guard == "off" else "default", tensorboard_dir=args.tensorboard,
            steps_file=os.path.abspath(args.steps_file) if args.steps_file else None,
            roofline=RooflineConfig(args.peak_tflops, args.peak_gbps, args.device_memory_gb,
                                    model_flops_per_step=args.model_flops_per_step),
            port_fallback=args.port is None)
    sys.argv = [script] + list(args.args)
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))

    def on_end(end, exc) -> None:
        if isinstance(exc, SystemExit) and exc.code is not None and not isinstance(exc.code, int):
            print(exc.code, file=sys.stderr)  # sys.exit("message"), as Python prints it
        elif exc is not None and not isinstance(exc, (SystemExit, KeyboardInterrupt)):
            print_user_traceback(exc)  # the user's own crash: their traceback, as Python would show it
    # the session opens when the program imports its framework (session/on_import.py); __file__ absolute, as
    # under `python script.py`
    return SessionOnImport(named, open_for).run(
        lambda: runpy.run_path(os.path.abspath(script), run_name="__main__"), on_end)
