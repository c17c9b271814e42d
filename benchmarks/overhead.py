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

`--jax` measures JAX workloads instead (benchmarks/workloads/jax_step.py, issue 36): a numpy-fed small step
(launch-bound: a 40-leaf MLP, ~0.2 ms per call), a device-bound step (large matmuls) and the small step fed from
batches already on the device (`small-device`: no upload in the step), each plain and under
`profile` (and `always`, `base` where asked) in alternating pairs: the per-call cost ratio, and how many steady
calls missed JAX's C++ dispatch cache in each run (counted by the workload itself). Target: the small step's
median profile/plain ratio at most `--target` (default 1.10 here).

    python benchmarks/overhead.py --jax [--pairs 8] [--steps N] [--modes profile] [--base DIR] [--sizes small]

`--sizes small` runs the small step alone (a long run of it, `--steps 5000`, is where the garbage collector's full
collections show: every object a profiled step keeps brings the next one sooner).
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
sys.path.insert(0, str(HERE))
from pairs import ratio_stats, run_workload  # noqa: E402

WORKLOAD = HERE / "workloads" / "encoder_loop.py"
MODES = ("profile", "always", "debug2")
JAX_WORKLOAD = HERE / "workloads" / "jax_step.py"
JAX_SIZES = ("small", "large", "small-device")


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


def run_jax(size: str, mode: str, steps: int | None, tmp: Path, base: str | None) -> dict:
    """One run of the JAX workload: its own ms/call and C++ cache misses over the steady calls."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    env.setdefault("JAX_PLATFORMS", "cpu")
    root = base if mode == "base" else str(HERE.parent)
    env["PYTHONPATH"] = os.pathsep.join([root, env.get("PYTHONPATH", "")])
    got = run_workload(JAX_WORKLOAD, [size, *([str(steps)] if steps else [])], profiled=mode != "plain",
                       tag=f"{size}_{mode}", workdir=tmp, env=env, timeout_s=900,
                       profile_args=["--attribution", "always"] if mode == "always" else [])
    if "error" in got:
        raise SystemExit(f"{size} {mode} run failed ({got['exit_code']}): {got['error']} (log: {tmp})")
    return got


def main_jax(args, modes: list[str]) -> None:
    target = args.target if args.target is not None else 1.10
    sizes = args.sizes
    ms = {(z, m): [] for z in sizes for m in modes}
    misses = {(z, m): [] for z in sizes for m in modes}
    calls = {}
    with tempfile.TemporaryDirectory() as tmp:
        for pair in range(args.pairs):
            order = modes[pair % len(modes):] + modes[:pair % len(modes)]
            for size in sizes:
                for mode in order:
                    bench = run_jax(size, mode, args.steps, Path(tmp), args.base)["bench"]
                    ms[size, mode].append(bench["ms_per_step"])
                    misses[size, mode].append(bench["cpp_cache_misses"])
                    calls[size] = bench["steps"]
                print(f"pair {pair + 1}/{args.pairs} {size}: "
                      + "  ".join(f"{m} {ms[size, m][-1]:.3f} ms/call ({misses[size, m][-1]} misses)" for m in modes),
                      file=sys.stderr, flush=True)
    print(f"\nJAX steady calls, median over {args.pairs} alternating pairs (jax_step.py; ms per call timed by the "
          "workload over its steady calls, after 20 warm-up calls)")
    print(f"{'step':12s} {'mode':8s} {'ms/call':>9s} {'ratio vs plain':>15s} {'min':>7s} {'max':>7s} "
          f"{'C++ cache misses / calls':>25s}")
    for size in sizes:
        for m in modes:
            r = ratio_stats(ms[size, m], ms[size, "plain"])
            print(f"{size:12s} {m:8s} {statistics.median(ms[size, m]):9.3f} {r[0]:15.3f} {r[1]:7.3f} {r[2]:7.3f} "
                  f"{statistics.median(misses[size, m]):>17g} / {calls[size]}")
        if "base" in modes and "profile" in modes:  # this checkout against the earlier one, pair by pair
            r = ratio_stats(ms[size, "profile"], ms[size, "base"])
            print(f"{size:12s} profile/base per call {r[0]:.3f} ({r[1]:.3f}-{r[2]:.3f})")
    if "profile" in modes and "small" in sizes:
        ratio = ratio_stats(ms["small", "profile"], ms["small", "plain"])[0]
        enough = args.pairs >= 8
        print(f"\ntarget: small step profile/plain per call {ratio:.3f} {'<=' if ratio <= target else '>'} {target} "
              f"over {args.pairs} pairs: {'met' if ratio <= target and enough else 'not met'}"
              + ("" if enough else " (fewer than 8 pairs: not a measurement of the target)")
              + f"; C++ cache misses under profile: {statistics.median(misses['small', 'profile']):g} of "
              f"{calls['small']} steady calls (plain: {statistics.median(misses['small', 'plain']):g})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=10)
    ap.add_argument("--steps", type=int, default=None,
                    help="steady steps per run (default 80; with --jax: 300 small and small-device, 30 large)")
    ap.add_argument("--modes", default=None, help="compared against plain: " + ", ".join(MODES)
                    + " (default: all; with --jax: profile)")
    ap.add_argument("--target", type=float, default=None, help="the profile mode's median ratio it must not exceed "
                    "(default 1.03; with --jax, the small step's, 1.10)")
    ap.add_argument("--base", help="a checkout of an earlier ptxla_perf (the folder holding its ptxla_perf/): "
                                   "adds the mode `base`, its profile run")
    ap.add_argument("--jax", action="store_true", help="the JAX workloads (a numpy-fed small step, a device-bound "
                                                       "step, a device-fed small step) instead of the torch_xla "
                                                       "encoder loop")
    ap.add_argument("--sizes", default=",".join(JAX_SIZES), help="with --jax: the steps to run, of "
                    + ", ".join(JAX_SIZES) + " (default: all)")
    args = ap.parse_args()
    args.sizes = [z.strip() for z in args.sizes.split(",") if z.strip()]
    if not args.sizes or set(args.sizes) - set(JAX_SIZES):
        ap.error(f"--sizes: pick from {', '.join(JAX_SIZES)}")
    allowed = ("profile", "always") if args.jax else MODES
    asked = [m.strip() for m in (args.modes or ("profile" if args.jax else ",".join(MODES))).split(",")
             if m.strip()]
    unknown = [m for m in asked if m not in allowed]
    if unknown or not asked:
        ap.error(f"--modes: {', '.join(unknown) or 'none given'}; pick from {', '.join(allowed)}")
    if args.pairs < 1:
        ap.error("--pairs must be at least 1")
    if args.steps is not None and args.steps < 1:
        ap.error("--steps must be at least 1")
    if args.base and not (Path(args.base) / "ptxla_perf" / "__init__.py").is_file():
        ap.error(f"--base: no ptxla_perf/ package in {args.base}")
    modes = ["plain"] + asked + (["base"] if args.base else [])
    if args.jax:
        return main_jax(args, modes)
    args.steps = args.steps or 80
    args.target = 1.03 if args.target is None else args.target
    main_encoder(args, modes)


def main_encoder(args, modes: list[str]) -> None:
    """The torch_xla encoder loop's pairs and table."""
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
