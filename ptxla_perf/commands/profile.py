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
from ..which_backend import detect_backend
from ..session import SessionError, open_session


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("profile", help=COMMANDS["profile"],
                       description=describe(__doc__))
    p.add_argument("--report", default="ptxla_perf_report.json", help="JSON report path (default: %(default)s)")
    p.add_argument("--backend", choices=["auto", "torch_xla", "jax"], default="auto")
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
    try:
        source = open(script, encoding="utf-8", errors="replace").read()
    except OSError as exc:
        raise UsageError(f"cannot read {script}: {exc.strerror}") from None
    port = parse_port(args.port)
    backend = (detect_backend(source) or "torch_xla") if args.backend == "auto" else args.backend
    try:
        session = open_session(
            backend, server_off="--port none", report_path=args.report, port=port,
            run={"kind": "script", "script": os.path.abspath(script), "argv": [script] + args.args,
                 "backend_choice": args.backend},
            attribution={"mode": args.attribution}, max_warmup=args.max_warmup,
            guard=None if args.guard == "off" else "default", tensorboard_dir=args.tensorboard,
            steps_file=os.path.abspath(args.steps_file) if args.steps_file else None,
            roofline=RooflineConfig(args.peak_tflops, args.peak_gbps, args.device_memory_gb,
                                    model_flops_per_step=args.model_flops_per_step),
            port_fallback=args.port is None)
    except SessionError as exc:
        raise UsageError(str(exc)) from None
    sys.argv = [script] + list(args.args)
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))

    def on_end(end, exc) -> None:
        if isinstance(exc, SystemExit) and exc.code is not None and not isinstance(exc.code, int):
            print(exc.code, file=sys.stderr)  # sys.exit("message"), as Python prints it
        elif exc is not None and not isinstance(exc, (SystemExit, KeyboardInterrupt)):
            print_user_traceback(exc)  # the user's own crash: their traceback, as Python would show it
    # __file__ absolute, as under `python script.py`
    end, _ = session.run(lambda: runpy.run_path(os.path.abspath(script), run_name="__main__"), on_end)
    return end.exit_code
