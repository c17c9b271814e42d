"""ptxla_perf's overhead on a steady training loop, measured side by side in one run.

Modes, alternated in rotating order for each pair so drift and noise hit all of them alike:
  plain       python workload.py
  profile     python -m ptxla_perf profile (default: attribution on the first steps and after anomalies)
  always      python -m ptxla_perf profile --attribution always (line attribution on every step)
  debug2      PT_XLA_DEBUG_LEVEL=2 python workload.py (torch_xla's own analysis, for reference)
  base        `profile` of the ptxla_perf checkout at --base DIR (an earlier version: is a change's cost within
              the noise?), added whenever --base is given
Per run: median ms/step over the steady steps (the workload times itself). Per mode: ratio to the plain run
of the same pair, median (min-max) over pairs. Plus the toolkit's own host time per step, timed inside the
toolkit (report summary.overhead_us_per_step: p50 and mean over the run's steady steps, median over its runs),
which is far less noisy than wall-clock ratios.

    python benchmarks/overhead.py [--pairs 10] [--steps 80] [--modes profile,always,debug2] [--target 1.03]
                                  [--base DIR]

The overhead target (issue 18), on a quiet machine: `python benchmarks/overhead.py --pairs 8 --modes profile`
(plain and profile only, 8 alternating pairs, ~3 min on 2 cores): the default `profile` mode's median ratio
against the plain run is at most `--target`; the last line says whether it is.
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
MODES = ("profile", "always", "debug2")


def run(mode: str, steps: int, tmp: Path, base: str | None = None) -> tuple[float, dict | None]:
    env = dict(os.environ, PJRT_DEVICE=os.environ.get("PJRT_DEVICE", "CPU"), TF_CPP_MIN_LOG_LEVEL="2")
    root = base if mode == "base" else str(HERE.parent)
    env["PYTHONPATH"] = os.pathsep.join([root, env.get("PYTHONPATH", "")])
    report = tmp / f"{mode}.json"
    cmd = [sys.executable, str(WORKLOAD), str(steps)]
    if mode in ("profile", "always", "base"):
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
    ap.add_argument("--modes", default=",".join(MODES), help="compared against plain: " + ", ".join(MODES))
    ap.add_argument("--target", type=float, default=1.03, help="the profile mode's median ratio it must not exceed")
    ap.add_argument("--base", help="a checkout of an earlier ptxla_perf (the folder holding its ptxla_perf/): "
                                   "adds the mode `base`, its profile run")
    args = ap.parse_args()
    asked = [m.strip() for m in args.modes.split(",") if m.strip()]
    unknown = [m for m in asked if m not in MODES]
    if unknown or not asked:
        ap.error(f"--modes: {', '.join(unknown) or 'none given'}; pick from {', '.join(MODES)}")
    if args.pairs < 1:
        ap.error("--pairs must be at least 1")
    if args.base and not (Path(args.base) / "ptxla_perf" / "__init__.py").is_file():
        ap.error(f"--base: no ptxla_perf/ package in {args.base}")
    modes = ["plain"] + asked + (["base"] if args.base else [])
    ms: dict[str, list[float]] = {m: [] for m in modes}
    own: dict[str, list[tuple[float, float]]] = {m: [] for m in modes}  # per run: (p50, mean) us
    with tempfile.TemporaryDirectory() as tmp:
        for pair in range(args.pairs):
            order = modes[pair % len(modes):] + modes[:pair % len(modes)]
            for mode in order:
                value, report = run(mode, args.steps, Path(tmp), args.base)
                ms[mode].append(value)
                stats = (report or {}).get("summary", {}).get("overhead_us_per_step")
                if stats:
                    own[mode].append((stats["p50"], stats["mean"]))
            print(f"pair {pair + 1}/{args.pairs}: " + "  ".join(f"{m} {ms[m][-1]:.2f} ms" for m in modes),
                  file=sys.stderr, flush=True)
    print(f"\nsteady step time, median over {args.pairs} alternating pairs ({args.steps} steps per run, "
          "10 warm-up steps dropped)")
    print(f"{'mode':10s} {'ms/step':>9s} {'ratio vs plain':>16s} {'min':>7s} {'max':>7s} "
          f"{'own us/step p50 (mean)':>24s}")
    for m in modes:
        ratios = [v / p for v, p in zip(ms[m], ms["plain"])]
        own_s = (f"{statistics.median(p for p, _ in own[m]):.1f} ({statistics.median(a for _, a in own[m]):.1f})"
                 if own[m] else "-")
        print(f"{m:10s} {statistics.median(ms[m]):9.2f} {statistics.median(ratios):16.3f} {min(ratios):7.3f} "
              f"{max(ratios):7.3f} {own_s:>24s}")
    if "profile" in modes:
        ratio = statistics.median(v / p for v, p in zip(ms["profile"], ms["plain"]))
        enough = args.pairs >= 8
        print(f"\ntarget: profile median ratio {ratio:.3f} {'<=' if ratio <= args.target else '>'} {args.target} "
              f"over {args.pairs} pairs: {'met' if ratio <= args.target and enough else 'not met'}"
              + ("" if enough else " (fewer than 8 pairs: not a measurement of the target)"))


if __name__ == "__main__":
    main()
