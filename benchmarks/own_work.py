"""ptxla_perf's own work per steady call of the JAX small step, counted, not timed (issue 36): on 2 shared cores a
wall-clock or CPU-clock figure of a few microseconds is lost in the noise; the bytecodes our functions execute and
the Python calls they make are the same in every run.

    python benchmarks/own_work.py [--short 300] [--long 1300] [--top 40]

Runs `python -m ptxla_perf profile workloads/jax_step.py small N` in this process twice (N = short, long steady
calls) with a `sys.settrace` opcode counter on ptxla_perf's frames (and the dataclass `__init__`s they call, file
"<string>"), and prints the difference per steady call: start-up, compile and the final report cancel out. The
trace stops when the session finishes. Printed: bytecodes and calls per call, per function, largest first. Tracing
slows the run ~10x: the counts, not the times, are the measurement. Compare two checkouts by running each one's
copy of this script (PYTHONPATH is set to the checkout holding it)."""
from __future__ import annotations

import argparse
import collections
import contextlib
import io
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORKLOAD = ROOT / "benchmarks" / "workloads" / "jax_step.py"


class Counter:
    """Bytecodes executed and calls made, per code object of ours, while on."""

    def __init__(self):
        self.ops: collections.Counter = collections.Counter()
        self.calls: collections.Counter = collections.Counter()
        self.on = True

    def _local(self, frame, event, arg):
        if event == "opcode":
            self.ops[frame.f_code] += 1
        return self._local

    def _global(self, frame, event, arg):
        code = frame.f_code
        if self.on and ("ptxla_perf" in code.co_filename or code.co_filename == "<string>"):
            self.calls[code] += 1
            frame.f_trace_opcodes = True
            return self._local
        return None

    def by_name(self) -> dict[str, tuple[int, int]]:
        """name -> (calls, bytecodes); dataclass __init__s told apart by their first parameters."""
        out: dict[str, tuple[int, int]] = {}
        for code, n in self.calls.items():
            name = (f"{code.co_filename}:{code.co_firstlineno}({code.co_name})" if code.co_filename != "<string>"
                    else f"__init__{code.co_varnames[1:3]}")
            name = name.replace(str(ROOT) + os.sep, "")
            calls, ops = out.get(name, (0, 0))
            out[name] = (calls + n, ops + self.ops[code])
        return out


def counted(steps: int) -> dict[str, tuple[int, int]]:
    """One in-process `profile` run of the small step with `steps` steady calls, counted until the session ends."""
    from ptxla_perf import session as S
    from ptxla_perf.cli import main
    counter = Counter()
    real_finish = S.Session.finish

    def finish(self, *args, **kwargs):
        counter.on = False
        sys.settrace(None)
        return real_finish(self, *args, **kwargs)
    S.Session.finish = finish
    argv = sys.argv
    sys.settrace(counter._global)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            with contextlib.redirect_stdout(io.StringIO()):  # the workload's lines and the report's summary
                main(["profile", "--port", "none", "--report", str(Path(tmp) / "report.json"), str(WORKLOAD),
                      "small", str(steps)])
    finally:
        sys.settrace(None)
        S.Session.finish = real_finish
        sys.argv = argv
    return counter.by_name()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--short", type=int, default=300)
    ap.add_argument("--long", type=int, default=1300)
    ap.add_argument("--top", type=int, default=40)
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    a, b = counted(args.short), counted(args.long)
    n = args.long - args.short
    rows = []
    for name in set(a) | set(b):
        calls = (b.get(name, (0, 0))[0] - a.get(name, (0, 0))[0]) / n
        ops = (b.get(name, (0, 0))[1] - a.get(name, (0, 0))[1]) / n
        if calls >= 0.005:
            rows.append((ops, calls, name))
    rows.sort(reverse=True)
    print(f"per steady call ({n} calls): {sum(r[0] for r in rows):.0f} bytecodes, {sum(r[1] for r in rows):.1f} "
          f"Python calls of ptxla_perf's")
    print(f"{'bytecodes':>9} {'calls':>6}  function")
    for ops, calls, name in rows[:args.top]:
        print(f"{ops:9.1f} {calls:6.2f}  {name}")


if __name__ == "__main__":
    main()
