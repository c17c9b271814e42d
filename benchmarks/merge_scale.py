"""`merge` at pod scale: N copies of a real 2-rank job's per-rank reports (each copy relabelled as its own rank,
8 ranks per host; `--slow K` of them rank 1's, the slowed rank's) written to a directory and merged from it with
the `merge` command, as a user would. Prints JSON: seconds for the whole command, and for loading and merging in
process; the straggler's ranks; the merged report's and page's size.

    python benchmarks/merge_scale.py [--copies 1024] [--slow 2] [--steps 14 | --reports DIR]
`--reports DIR`: a job's report.json (rank 0) and report.rank1.json (rank 1), else the benchmark runs the tiny
two-process JAX job (tests/scripts/jax_dp_two_process.py, rank 1 doing 30 ms of host work per step) first.
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
RANKS_PER_HOST = 8


def run_job(out_dir: str, slow_rank: int = 1, slow_ms: float = 30.0, steps: int = 14) -> list[str]:
    """The two-process JAX job, each rank under `profile`; its two report paths (rank 0, rank 1)."""
    with socket.socket() as s:
        s.bind(("localhost", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))
    script = os.path.join(ROOT, "tests", "scripts", "jax_dp_two_process.py")
    report = os.path.join(out_dir, "report.json")
    procs = [subprocess.Popen([sys.executable, "-m", "ptxla_perf", "profile", "--port", "none", "--report", report,
                               script, str(port), str(r), str(slow_rank), str(slow_ms), str(steps)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for r in (0, 1)]
    for p in procs:
        _, err = p.communicate(timeout=240)
        if p.returncode:
            raise RuntimeError(f"rank exited {p.returncode}: {err[-2000:]}")
    return [report, os.path.join(out_dir, "report.rank1.json")]


def write_copies(rank_reports: list[dict], n: int, slow: list[int], out_dir: str) -> None:
    """`n` per-rank reports in `out_dir`: rank i is a copy of rank_reports[1] (the slow rank's) when i is in
    `slow`, else of rank_reports[0], relabelled as rank i of n on host i // RANKS_PER_HOST."""
    texts = [json.dumps(r) for r in rank_reports]
    os.makedirs(out_dir, exist_ok=True)
    for i in range(n):
        src = 1 if i in slow else 0
        rep = json.loads(texts[src])
        argv = rep["run"].get("argv") or []
        at = next((j for j in range(1, len(argv)) if str(argv[j]) == str(src)), None)
        if at is not None:  # its own rank on its command line, as each rank of a pod has
            argv[at] = str(i)
        rep["run"]["rank"], rep["run"]["local_rank"] = i, i % RANKS_PER_HOST
        env = rep.setdefault("environment", {})
        env["process_index"], env["process_count"] = i, n
        env["hostname"] = f"host{i // RANKS_PER_HOST:03d}"
        with open(os.path.join(out_dir, f"report.rank{i}.json"), "w") as f:
            json.dump(rep, f)


def slow_ranks_for(n: int, k: int) -> list[int]:
    """k ranks spread over the pod (not the first ones: the page must find them)."""
    return sorted({(n * (j + 1)) // (k + 1) + 1 for j in range(k)})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--copies", type=int, default=1024)
    ap.add_argument("--slow", type=int, default=2)
    ap.add_argument("--steps", type=int, default=14, help="steps of the job the benchmark runs (no --reports)")
    ap.add_argument("--reports", help="a 2-rank job's directory (report.json, report.rank1.json)")
    args = ap.parse_args()
    sys.path.insert(0, ROOT)
    from ptxla_perf import SCHEMA_ID, merge, merge_inputs
    with tempfile.TemporaryDirectory() as tmp:
        paths = ([os.path.join(args.reports, "report.json"), os.path.join(args.reports, "report.rank1.json")]
                 if args.reports else run_job(tmp, steps=args.steps))
        reports = [json.load(open(p)) for p in paths]
        pod = os.path.join(tmp, "pod")
        slow = slow_ranks_for(args.copies, args.slow)
        write_copies(reports, args.copies, slow, pod)
        out = os.path.join(tmp, "merged.json")
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "ptxla_perf", "merge", pod, "--report", out], cwd=ROOT,
                              capture_output=True, text=True)
        command_s = time.perf_counter() - t0
        if proc.returncode:
            raise SystemExit(proc.stderr[-3000:])
        t0 = time.perf_counter()
        loaded, names, _ = merge_inputs.load_all([pod], SCHEMA_ID)
        load_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        merged = merge.merge(loaded, names)
        merge_s = time.perf_counter() - t0
        found = [f for f in merged["findings"] if f["kind"] == "straggler"]
        print(json.dumps({
            "copies": args.copies, "steps_per_report": len(reports[0].get("steps", [])),
            "report_bytes": os.path.getsize(paths[0]), "command_s": round(command_s, 2),
            "load_s": round(load_s, 2), "merge_s": round(merge_s, 2), "slow_ranks": slow,
            "straggler_ranks": found[0]["ranks"] if found else None,
            "merged_bytes": os.path.getsize(out), "page_bytes": os.path.getsize(out[:-5] + ".html")}, indent=1))


if __name__ == "__main__":
    main()
