"""The accelerator check (docs/device_check.md): the JAX recipes, a matmul and a deliberate out-of-memory run, each
profiled by the real runner in its own process on the machine's first device, then one table of what the reports
say against what the device says: device time vs wall time per step, HFU (XLA's FLOPs; model-FLOPs MFU beside it
where a recipe gives its model FLOPs) against the spec peak (peaks.py),
each largest graph's XLA memory figures against the runtime's `memory_stats()` peak, and the `oom` finding made
from XLA's own out-of-memory message. Then a user-style training loop (nanoGPT-style JAX + optax, numpy batches,
the loss printed every 50 steps; device_loop.py) at a launch-bound and a device-bound size, plain and profiled in
alternating pairs and once waiting for every step: a second table of the loop's own ms/step against the report's.

Sized for one H100/H200 within 6 minutes (Python 3.12, jax 0.11 + CUDA, no torch_xla, no network: the project on
PYTHONPATH); the tables are rewritten after every job, so a run cut short keeps what it did. `--cpu-smoke` runs the
same jobs at CPU sizes (a dry run of the script itself).

    PYTHONPATH=$PWD python benchmarks/device_check.py [--cpu-smoke] [--out DIR] [--only NAME,...] [--pairs 3]
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "benchmarks") not in sys.path:  # its sibling modules, also when loaded from a file path
    sys.path.insert(0, str(ROOT / "benchmarks"))

from device_loop import LOOPS, loop_ok, loop_row, recorded, run_loop  # noqa: E402

# name -> (recipe, overrides on a GPU/TPU, overrides for --cpu-smoke); the runner's own defaults are CPU-sized
JOBS: dict[str, tuple[str, list[str], list[str]]] = {
    "matmul": ("matmul", ["recipe.backend=jax", "recipe.dtype=bfloat16", "recipe.batch=8", "recipe.seq=2048",
                               "recipe.d_model=8192", "recipe.d_ff=8192", "recipe.steps=20"],
                    ["recipe.backend=jax", "recipe.steps=6"]),
    "ffw": ("matmul", ["recipe.backend=jax", "recipe.mode=ffw", "recipe.dtype=bfloat16", "recipe.batch=8",
                            "recipe.seq=2048", "recipe.d_model=4096", "recipe.d_ff=16384", "recipe.steps=20"],
                 ["recipe.backend=jax", "recipe.mode=ffw", "recipe.steps=6"]),
    "rnn_jax": ("rnn_jax", ["recipe.variant=fixed", "recipe.batch_size=1024", "recipe.hidden=1024",
                            "recipe.features=256", "recipe.steps=30"], ["recipe.steps=8"]),
    "vit_mesh": ("vit_mesh", ["recipe.mesh_shape=[1]", "recipe.batch_size=256", "recipe.image_size=64",
                              "recipe.dim=512", "recipe.depth=6", "recipe.heads=8", "recipe.steps=12"],
                 ["recipe.steps=6"]),
    # several processes on one host: gloo CPU collectives (the recipe's own platform), the merge and straggler path
    "dp_jax": ("dp_jax", ["recipe.steps=10"], ["recipe.steps=6"]),
}

# A jitted step whose output cannot fit: XLA's own RESOURCE_EXHAUSTED message is what the report reads.
_OOM_SCRIPT = '''
import sys
import jax, jax.numpy as jnp

dev = jax.local_devices()[0]
stats = dev.memory_stats() or {}
limit = stats.get("bytes_limit") or 2**45          # the CPU gives none: 32 TiB cannot be allocated either
n = int(2 * limit) // 4                             # float32 elements: twice the device's memory


@jax.jit
def step(x):
    return jnp.broadcast_to(x, (n,)) * 2.0             # the output alone is 2x the capacity


x = jnp.ones((), jnp.float32)
for i in range(3):
    y = step(x)
    print("step", i, float(y[0]))
print("unreachable: the allocation fitted", file=sys.stderr)
sys.exit(3)
'''


def _env(cpu: bool) -> dict[str, str]:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL=os.environ.get("TF_CPP_MIN_LOG_LEVEL", "2"))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    if cpu:
        env["JAX_PLATFORMS"] = "cpu"
    else:  # each run is its own process; do not let the first grab 75 % of the memory before the OOM job's read
        env.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    return env


def _recipe_entry(recipe: str) -> list[str]:
    """From a source checkout (no install) the recipes are the top-level `recipes` package."""
    if importlib.util.find_spec("ptxla_perf.recipes") is not None:
        return []
    return [f"recipe.entry=recipes.{recipe}:run"]


def run_job(name: str, args: list[str], out: Path, env: dict[str, str], timeout_s: float) -> dict:
    """One profiled run in its own process; its report (or why there is none)."""
    run_dir = out / name
    t0 = time.perf_counter()
    try:
        proc = subprocess.run([sys.executable, *args], cwd=out, env=env, capture_output=True, text=True,
                              timeout=timeout_s)
        code, stderr = proc.returncode, proc.stderr
    except subprocess.TimeoutExpired as exc:
        code, stderr = None, (exc.stderr or b"").decode(errors="replace") if isinstance(exc.stderr, bytes) else ""
    (out / f"{name}.log").write_text(stderr)
    row = {"name": name, "exit_code": code, "seconds": round(time.perf_counter() - t0, 1)}
    report_path = run_dir / "report.json"
    if report_path.is_file():
        row["report"] = json.loads(report_path.read_text())
    else:
        tail = [ln for ln in stderr.strip().splitlines() if ln.strip()]
        row["error"] = "timed out" if code is None else (tail[-1] if tail else f"exit code {code}")
    return row


def jobs(cpu: bool, only: set[str] | None) -> list[tuple[str, list[str]]]:
    out = []
    for name, (recipe, big, small) in JOBS.items():
        if only and name not in only:
            continue
        out.append((name, ["-m", "ptxla_perf.run", f"+recipe={recipe}", *(small if cpu else big),
                           *_recipe_entry(recipe), f"hydra.run.dir={name}", "profiler.port=null"]))
    if not only or "oom" in only:
        out.append(("oom", ["-m", "ptxla_perf", "profile", "--port", "none", "--report", "oom/report.json",
                            "oom_step.py"]))
    return out


def _mib(n) -> str:
    return "-" if n is None else f"{n / 2**20:,.1f}"


def _ms(s) -> str:
    return "-" if s is None else f"{s * 1e3:.3g}"


def table_row(row: dict) -> dict[str, str]:
    """The figures the check compares, from one report."""
    r = row.get("report")
    if r is None:
        return {"run": row["name"], "status": f"no report: {row.get('error', '')}"[:120]}
    s, roof, mem = r.get("summary", {}), r.get("roofline") or {}, r.get("memory") or {}
    env = r.get("environment", {})
    wall = (s.get("step_time_s") or {}).get("p50")
    dev = roof.get("device_step_time_s")
    if dev is None:
        dev = ((s.get("time_breakdown") or {}).get("components_s") or {}).get("device")
    peak = roof.get("peak") or {}
    runtime = mem.get("runtime") or {}
    oom = next((f for f in r.get("findings", []) if f.get("kind") == "oom"), None)
    hfu = s.get("hfu", s.get("mfu"))  # XLA's cost-analysis FLOPs: hardware FLOPs utilisation (`mfu`: its old name)
    return {
        "run": row["name"],
        "status": f"{r['run'].get('status')} (exit {row['exit_code']})",
        "device": str(env.get("device") or env.get("device_kind") or "?"),
        "steps": str(s.get("steps")),
        "wall p50 ms": _ms(wall),
        "device ms/step": _ms(dev),
        "device/wall": "-" if not (dev and wall) else f"{dev / wall:.2f}",
        "TFLOP/step": "-" if not s.get("flops_per_step") else f"{s['flops_per_step'] / 1e12:.4g}",
        "HFU": "-" if hfu is None else f"{100 * hfu:.1f}% ({roof.get('mfu_time_basis', '?')} time)",
        **({"MFU (model FLOPs)": f"{100 * s['model_mfu']:.1f}%"} if s.get("model_mfu") is not None else {}),
        "peak used": f"{peak.get('name', '?')} {(peak.get('flops_per_s') or 0) / 1e12:.4g} TFLOP/s {peak.get('dtype', '')}",
        "XLA peak MiB": _mib(mem.get("peak_bytes")),
        "args MiB": _mib(mem.get("argument_bytes")),
        "temps MiB": _mib(mem.get("temp_bytes")),
        "runtime peak MiB": _mib(runtime.get("peak_bytes_in_use")),
        "capacity MiB": _mib((mem.get("capacity") or {}).get("bytes")),
        "oom finding": "-" if oom is None else oom["message"][:160].replace("|", "/"),
    }


def markdown(rows: list[dict[str, str]]) -> str:
    cols = list(dict.fromkeys(k for row in rows for k in row))
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(row.get(c, "") for c in cols) + " |" for row in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cpu-smoke", action="store_true", help="CPU sizes, JAX_PLATFORMS=cpu: a dry run of the check")
    p.add_argument("--out", default="device_check_out", help="folder for the runs, logs and the table")
    p.add_argument("--only", default="", help="comma-separated job names (" + ", ".join([*JOBS, "oom", *LOOPS])
                   + ")")
    p.add_argument("--timeout-s", type=float, default=150.0, help="per job (per run of a loop)")
    p.add_argument("--pairs", type=int, default=3, help="plain/profiled pairs per training loop (default 3)")
    args = p.parse_args(argv)
    if args.pairs < 1:
        p.error("--pairs must be at least 1")
    only = {x for x in args.only.split(",") if x} or None
    unknown = sorted((only or set()) - {*JOBS, "oom", *LOOPS})
    if unknown:
        p.error(f"--only: unknown job {', '.join(unknown)} (pick from {', '.join([*JOBS, 'oom', *LOOPS])})")
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    (out / "oom_step.py").write_text(textwrap.dedent(_OOM_SCRIPT))
    (out / "oom").mkdir(exist_ok=True)
    env = _env(args.cpu_smoke)
    t0 = time.perf_counter()
    results, loops = [], []
    for name, job_args in jobs(args.cpu_smoke, only):
        print(f"device_check: {name} ...", file=sys.stderr, flush=True)
        results.append(run_job(name, job_args, out, env, args.timeout_s))
        print(f"device_check: {name} {results[-1].get('error') or 'ok'} ({results[-1]['seconds']} s)",
              file=sys.stderr, flush=True)
        write_tables(out, args, results, loops, time.perf_counter() - t0)  # what is done survives a cut-off
    for name in LOOPS:
        if only and name not in only:
            continue
        print(f"device_check: {name} ...", file=sys.stderr, flush=True)
        loops.append(run_loop(name, args.cpu_smoke, out, env, args.timeout_s, args.pairs,
                              log=lambda msg: print(f"device_check: {msg}", file=sys.stderr, flush=True)))
        write_tables(out, args, results, loops, time.perf_counter() - t0)
    rows = write_tables(out, args, results, loops, time.perf_counter() - t0, show=True)
    # the check itself passes when every job wrote a report and the OOM run was read as one
    ok = all("report" in r for r in results) and all(
        row.get("oom finding", "-") != "-" for row in rows if row["run"] == "oom") and all(map(loop_ok, loops))
    return 0 if ok else 1


def write_tables(out: Path, args, results: list[dict], loops: list[dict], seconds: float,
                 show: bool = False) -> list[dict[str, str]]:
    """OUT/device_check.md and .json from the jobs and loops run so far (printed when `show`); the jobs' rows."""
    rows = [table_row(r) for r in results]
    loop_rows = [loop_row(r) for r in loops]
    versions = {}
    for pkg in ("jax", "jaxlib", "torch", "torch_xla"):
        try:
            from importlib import metadata
            versions[pkg] = metadata.version(pkg)
        except Exception:  # noqa: BLE001 - not installed
            versions[pkg] = None
    head = (f"device_check ({'cpu smoke' if args.cpu_smoke else 'device'}; Python {sys.version.split()[0]}; "
            + ", ".join(f"{k} {v}" for k, v in versions.items() if v) + f"; {seconds:.0f} s)")
    text = head + "\n\n" + (markdown(rows) + "\n" if rows else "")
    if loop_rows:
        text += (f"\nTraining loops (gpt_loop.py; {args.pairs} alternating plain/profiled pairs and one run waiting "
                 "for every step; ms/step timed by the loop between prints; the report's figures from the last "
                 "profiled run):\n\n" + markdown(loop_rows) + "\n")
    for r in results:  # the oom finding whole (the table cuts it), with XLA's message it was made from
        oom = next((f for f in (r.get("report") or {}).get("findings", []) if f.get("kind") == "oom"), None)
        if oom:
            said = (r["report"].get("run") or {}).get("stop_reason") or ""
            asked = (oom.get("evidence") or {}).get("requested_bytes")
            text += (f"\n{r['name']}: {oom['message']}\n  XLA said: {said.splitlines()[0] if said else '?'}"
                     + (f" (requested {asked / 2**30:,.1f} GiB)" if asked else "") + "\n")
    (out / "device_check.md").write_text(text)
    (out / "device_check.json").write_text(json.dumps({"versions": versions, "rows": rows, "loop_rows": loop_rows,
                                                       "loops": [recorded(r) for r in loops]}, indent=1))
    if show:
        print(text)
    return rows

if __name__ == "__main__":
    sys.exit(main())
