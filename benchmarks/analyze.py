"""Benchmark: `analyze` vs xprof's own conversion of the same tools on the same capture.

For each capture (a small one and a large one, >= 100 MB, both generated here from a real 8-device JAX CPU job
into a temporary folder), time in fresh processes:
  - ptxla_perf:  analyze_trace(xplane)  (step breakdown, gaps, top ops, collective share, compiles, findings)
  - xprof:       xspace_to_tool_data for overview_page + input_pipeline_analyzer + hlo_stats (the tools that
                 answer the same questions: step time/breakdown, duty cycle, top HLO ops)
and report wall time, the ratio analyze/xprof, and peak RSS growth during the call.

  python benchmarks/analyze.py                  # small + large (generates ~120 MB; a few minutes on 2 cores)
  python benchmarks/analyze.py --sizes small    # quick
  python benchmarks/analyze.py --xplane FILE    # an existing capture
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
XPROF_TOOLS = ("overview_page", "input_pipeline_analyzer", "hlo_stats")


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def child(which: str, path: str) -> None:
    """Runs in a fresh process: import, then time one call and measure peak RSS growth."""
    sys.path.insert(0, str(ROOT))
    if which == "analyze":
        from ptxla_perf.trace import analyze_trace

        def work():
            t = analyze_trace(path)
            return {"steps": t.step_summary.steps, "ops": len(t.top_ops),
                    "collective_share": t.collective_share.mean}
    else:
        from xprof.convert import raw_to_tool_data

        def work():
            sizes = {}
            for tool in XPROF_TOOLS:
                data, _ = raw_to_tool_data.xspace_to_tool_data([path], tool, {})
                sizes[tool] = len(data or b"")
            return sizes
    base = _rss_mb()
    peak0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    t0 = time.perf_counter()
    info = work()
    seconds = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"seconds": seconds, "peak_growth_mb": max(peak, peak0) - base, "info": info}))


def measure(which: str, path: Path, repeats: int) -> dict:
    best = None
    for _ in range(repeats):
        out = subprocess.run([sys.executable, __file__, "--child", which, str(path)], capture_output=True, text=True,
                             env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}, check=True)
        r = json.loads(out.stdout.strip().splitlines()[-1])
        if best is None or r["seconds"] < best["seconds"]:
            best = r
    return best


GEN = r'''
import os, sys, time
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
import jax, jax.numpy as jnp, numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
out, steps, depth = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
mesh = Mesh(np.array(jax.devices()), ("d",))
ws = [jax.device_put(jnp.eye(16) * 0.5, NamedSharding(mesh, P())) for _ in range(depth)]
x = jax.device_put(jnp.ones((8 * 16, 16)), NamedSharding(mesh, P("d")))
@jax.jit
def busy(ws, x):  # many tiny unfusable ops per step: a dense stream of op events on 8 devices
    for w in ws:
        x = jnp.tanh(x @ w)
    return x, x.sum()  # the sum over the sharded batch needs an all-reduce
busy(ws, x)[0].block_until_ready()
jax.profiler.start_trace(out)
for i in range(steps):
    with jax.profiler.StepTraceAnnotation("train", step_num=i):
        y, s = busy(ws, x)
        s.block_until_ready()
jax.profiler.stop_trace()
'''


def generate(kind: str, workdir: Path) -> Path:
    # ~80 KB of xplane per step at depth 40 (8 devices x 80 ops + their "end:" events): large is ~120 MB
    steps, depth = {"small": (30, 20), "large": (int(os.environ.get("BENCH_LARGE_STEPS", "1500")), 40)}[kind]
    out = workdir / kind
    subprocess.run([sys.executable, "-c", GEN, str(out), str(steps), str(depth)], check=True,
                   env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}, capture_output=True)
    (path,) = sorted(out.glob("plugins/profile/*/*.xplane.pb"))
    return path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--child", nargs=2, metavar=("WHICH", "PATH"), help=argparse.SUPPRESS)
    ap.add_argument("--sizes", default="small,large")
    ap.add_argument("--xplane", action="append", default=[], help="benchmark an existing .xplane.pb")
    ap.add_argument("--repeats", type=int, default=2, help="fresh processes per measurement; the best counts")
    ap.add_argument("--json", default=None, help="also write the results here")
    args = ap.parse_args()
    if args.child:
        child(*args.child)
        return 0
    with tempfile.TemporaryDirectory(prefix="ptxla_perf_bench_") as tmp:
        captures = [(Path(p).name, Path(p)) for p in args.xplane]
        if not args.xplane:
            for kind in args.sizes.split(","):
                t0 = time.time()
                captures.append((kind, generate(kind.strip(), Path(tmp))))
                print(f"generated {kind} capture in {time.time() - t0:.0f} s", file=sys.stderr)
        rows = []
        for name, path in captures:
            a = measure("analyze", path, args.repeats)
            x = measure("xprof", path, args.repeats)
            rows.append({"capture": name, "size_mb": round(path.stat().st_size / 1e6, 1),
                         "analyze_s": round(a["seconds"], 2), "xprof_s": round(x["seconds"], 2),
                         "ratio": round(a["seconds"] / x["seconds"], 2),
                         "analyze_peak_growth_mb": round(a["peak_growth_mb"]),
                         "xprof_peak_growth_mb": round(x["peak_growth_mb"]), "analyze_info": a["info"]})
    hdr = ["capture", "xplane MB", "analyze s", "xprof s (3 tools)", "ratio", "analyze peak +MB", "xprof peak +MB"]
    print("| " + " | ".join(hdr) + " |")
    print("|" + "|".join("---" for _ in hdr) + "|")
    for r in rows:
        print(f"| {r['capture']} | {r['size_mb']} | {r['analyze_s']} | {r['xprof_s']} | {r['ratio']}x | "
              f"{r['analyze_peak_growth_mb']} | {r['xprof_peak_growth_mb']} |")
    print(f"xprof tools: {', '.join(XPROF_TOOLS)}; best of {args.repeats} fresh processes each", file=sys.stderr)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
