"""ptxla_perf's overhead on a steady training loop, measured side by side in one run.

Modes, alternated in rotating order for each pair so drift and noise hit all of them alike:
  plain       python workload.py
  profile     python -m ptxla_perf profile (default: attribution on the first steps and after anomalies)
  always      python -m ptxla_perf profile --attribution always (line attribution on every step)
  debug2      PT_XLA_DEBUG_LEVEL=2 python workload.py (torch_xla's own analysis, for reference)
Per run: median ms/step over the steady steps (the workload times itself). Per mode: ratio to the plain run
of the same pair, median (min-max) over pairs. Plus the toolkit's own host time per step, timed inside the
toolkit (report summary.overhead_us_per_step), which is far less noisy than wall-clock ratios.

    python benchmarks/overhead.py [--pairs 10] [--steps 80] [--modes profile,always,debug2]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
WORKLOAD = HERE / "workloads" / "encoder_loop.py"


def run(mode: str, steps: int, tmp: Path) -> tuple[float, dict | None]:
    env = dict(os.environ, PJRT_DEVICE=os.environ.get("PJRT_DEVICE", "CPU"), TF_CPP_MIN_LOG_LEVEL="2")
    env["PYTHONPATH"] = os.pathsep.join([str(HERE.parent), env.get("PYTHONPATH", "")])
    report = tmp / f"{mode}.json"
    cmd = [sys.executable, str(WORKLOAD), str(steps)]
    if mode in ("profile", "always"):
        cmd = [sys.executable, "-m", "ptxla_perf", "profile", "--port", "none", "--report", str(report),
               *(["--attribution", "always"] if mode == "always" else []), str(WORKLOAD), str(steps)]
    if mode == "debug2":
        env["PT_XLA_DEBUG_LEVEL"] = "2"
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("BENCH ")), None)
    if proc.returncode or line is None:
        raise SystemExit(f"{mode} run failed ({proc.returncode}): {proc.stderr[-2000:]}")
    ms = statistics.median(json.loads(line[6:])["step_ms"])
    data = json.loads(report.read_text()) if report.exists() else None
    return ms, data


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=10)
    ap.add_argument("--steps", type=int, default=80)
    ap.add_argument("--modes", default="profile,always,debug2")
    args = ap.parse_args()
    modes = ["plain"] + args.modes.split(",")
    ms: dict[str, list[float]] = {m: [] for m in modes}
    own: dict[str, list[float]] = {m: [] for m in modes}
    with tempfile.TemporaryDirectory() as tmp:
        for pair in range(args.pairs):
            order = modes[pair % len(modes):] + modes[:pair % len(modes)]
            for mode in order:
                value, report = run(mode, args.steps, Path(tmp))
                ms[mode].append(value)
                stats = (report or {}).get("summary", {}).get("overhead_us_per_step")
                if stats:
                    own[mode].append(stats["mean"])
            print(f"pair {pair + 1}/{args.pairs}: " + "  ".join(f"{m} {ms[m][-1]:.2f} ms" for m in modes),
                  file=sys.stderr, flush=True)
    print(f"\nsteady step time, median over {args.pairs} alternating pairs ({args.steps} steps per run, "
          "10 warm-up steps dropped)")
    print(f"{'mode':10s} {'ms/step':>9s} {'ratio vs plain':>16s} {'min':>7s} {'max':>7s} {'own us/step':>12s}")
    for m in modes:
        ratios = [v / p for v, p in zip(ms[m], ms["plain"])]
        own_s = f"{statistics.median(own[m]):.1f}" if own[m] else "-"
        print(f"{m:10s} {statistics.median(ms[m]):9.2f} {statistics.median(ratios):16.3f} {min(ratios):7.3f} "
              f"{max(ratios):7.3f} {own_s:>12s}")


if __name__ == "__main__":
    main()
