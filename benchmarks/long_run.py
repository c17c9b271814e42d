"""Long runs (issue 28): a tiny real JAX loop (benchmarks/workloads/jax_tiny_loop.py) under `profile` at several
lengths, with step retention (today's default) and without it (the bound raised past the run: every step in the
report, as before 0.5.0), and plain. Per row: the report's size, the profiled process's peak RSS, the seconds from
the loop's end to the report written (the profiler's finish), and the whole command's seconds. Prints a markdown
table (README "Measured here", docs/report.md#step-retention).

    python benchmarks/long_run.py [--steps 2000 20000 100000] [--no-untrimmed]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
LOOP = os.path.join(ROOT, "benchmarks", "workloads", "jax_tiny_loop.py")
# the child's peak RSS: the wrapper waits for it and reads its children's usage (KiB on Linux)
WRAP = ("import resource, subprocess, sys, time; p = subprocess.run(sys.argv[1:], capture_output=True, text=True); "
        "end = time.time(); sys.stdout.write(p.stdout); sys.stderr.write(p.stderr); "
        "print('RSS_KIB', resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, 'END', end); sys.exit(p.returncode)")


def one(steps: int, mode: str, out: str) -> dict:
    """One run: `mode` retained (default knobs), untrimmed (bound above the run) or plain (no profiler)."""
    env = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))
    report = os.path.join(out, f"{mode}_{steps}.json")
    if mode == "untrimmed":
        env["PTXLA_PERF_STEP_RETENTION"] = f"trim_above={steps + 1}"
    cmd = ([sys.executable, LOOP, str(steps)] if mode == "plain" else
           [sys.executable, "-m", "ptxla_perf", "profile", "--port", "none", "--report", report, LOOP, str(steps)])
    t0 = time.time()
    p = subprocess.run([sys.executable, "-c", WRAP, *cmd], env=env, capture_output=True, text=True)
    total = time.time() - t0
    if p.returncode:
        raise RuntimeError(f"{mode} {steps}: exit {p.returncode}: {p.stderr[-2000:]}")
    words = p.stdout.split()
    loop_end = float(words[words.index("LOOP_END") + 1])
    rss = int(words[words.index("RSS_KIB") + 1]) / 1024
    row = {"steps": steps, "mode": mode, "peak_rss_mib": round(rss, 1), "total_s": round(total, 2),
           "finish_s": round(float(words[words.index("END") + 1]) - loop_end, 2)}
    if mode != "plain":
        rep = json.load(open(report))
        row.update(report_mb=round(os.path.getsize(report) / 1e6, 3), steps_counted=rep["summary"]["steps"],
                   steps_kept=len(rep["steps"]), buckets=len(rep.get("step_buckets") or []))
    return row


def table(rows: list[dict]) -> str:
    out = ["| steps | mode | report | steps kept | peak RSS | finish (loop end -> report) | whole command |",
           "|---|---|---|---|---|---|---|"]
    for r in rows:
        rep = f"{r['report_mb']:.2f} MB" if "report_mb" in r else "-"
        kept = f"{r['steps_kept']} + {r['buckets']} buckets" if "steps_kept" in r else "-"
        out.append(f"| {r['steps']:,} | {r['mode']} | {rep} | {kept} | {r['peak_rss_mib']:.0f} MiB | "
                   f"{r['finish_s']:.1f} s | {r['total_s']:.1f} s |")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, nargs="+", default=[2000, 20000, 100000])
    ap.add_argument("--no-untrimmed", action="store_true", help="skip the run without retention (today's growth)")
    ap.add_argument("--untrimmed-max", type=int, default=100000, help="the longest run measured untrimmed")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as out:
        for n in args.steps:
            modes = ["plain", "retained"] + ([] if args.no_untrimmed or n > args.untrimmed_max else ["untrimmed"])
            for mode in modes:
                rows.append(one(n, mode, out))
                print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    print(table(rows))


if __name__ == "__main__":
    main()
