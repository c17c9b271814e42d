"""`capture --service HOST:PORT`: capture a profile from a running job's profiler server (what TensorBoard's
"Capture Profile" button does) into LOGDIR/plugins/profile/<run>/<host>.xplane.pb."""
from __future__ import annotations

import argparse
import sys

from ..cli import COMMANDS, UsageError, describe, number
from ..trace.capture import CaptureError, capture
from ..trace import analyze_trace
from ..trace.render import print_table
from ..trace.capture import parse_service_addr
from ..trace.ownership import record


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("capture", help=COMMANDS["capture"],
                       description=describe(__doc__), epilog="See docs/capture.md.")
    p.add_argument("--service", required=True, metavar="HOST:PORT[,HOST:PORT...]",
                   help="the job's profiler server (torch_xla.debug.profiler.start_server / jax.profiler.start_server); "
                        "a comma-separated list captures every host of a multi-host job into one run folder")
    p.add_argument("--duration-ms", type=number(int, 0, above=True), default=2000, metavar="N", help="capture length (default: %(default)s)")
    p.add_argument("--logdir", default="profiles", metavar="DIR",
                   help="TensorBoard logdir to write into (default: %(default)s)")
    p.add_argument("--host-tracer-level", type=int, default=2, choices=[0, 1, 2, 3],
                   help="host (CPU) trace detail: 1 critical, 2 info, 3 verbose (default: %(default)s)")
    p.add_argument("--device-tracer-level", type=int, default=1, choices=[0, 1],
                   help="device (TPU/GPU) tracing on/off (default: %(default)s)")
    p.add_argument("--python-tracer-level", type=int, default=0, choices=[0, 1],
                   help="trace Python function calls (large captures; default: %(default)s)")
    p.add_argument("--delay-ms", type=number(int, 0), default=0, metavar="N", help="start the capture N ms later")
    p.add_argument("--attempts", type=number(int, 1, 10), default=1, metavar="N",
                   help="capture attempts when nothing was recorded (each one takes --duration-ms; default: 1)")
    p.add_argument("--analyze", action="store_true", help="print `analyze` output for the new capture")
    return p


def run(args) -> int:

    try:
        res = capture(args.service, args.logdir, args.duration_ms, args.host_tracer_level, args.device_tracer_level,
                      args.attempts, python_tracer_level=args.python_tracer_level, delay_ms=args.delay_ms)
    except ValueError as exc:
        raise UsageError(f"--service: {exc}") from None
    except CaptureError as exc:
        print(f"ptxla_perf: capture failed: {exc}", file=sys.stderr)
        return 1
    record(res.path if res.path.is_dir() else res.path.parent,
           [parse_service_addr(s.strip()) for s in args.service.split(",") if s.strip()])
    print(f"captured {res.duration_ms} ms from {args.service} in {res.seconds:.1f} s: {res.path} "
          f"({res.size_bytes / 1e6:.1f} MB)")
    print(f"view: tensorboard --logdir {res.logdir}   |   analyze: python -m ptxla_perf analyze {res.logdir} "
          f"--run {res.run}")
    if args.analyze:

        print_table(analyze_trace(res.path))
    return 0
