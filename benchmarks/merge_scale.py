"""`merge` at pod scale: N copies of a real 2-rank job's per-rank reports (each copy relabelled as its own rank,
8 ranks per host; `--slow K` of them rank 1's, the slowed rank's) written to a directory and merged from it with
the `merge` command, as a user would. Per case (a job length), prints JSON and a markdown row: the report's size,
seconds for the whole command, and in process for reading (up to each rank's `rank_digest`) and merging; the same
merge with every report parsed whole (`steps[]` included, as before 0.5.0) on `--full-copies` of them (parsing
1,024 long-run reports whole needs ~10 GB: more than this machine has to spare), scaled to N; the straggler's ranks
(both reads must name the same, and merge to the same report); the merged report's and page's size.

    python benchmarks/merge_scale.py [--copies 1024] [--slow 2] [--cases 14 200 20000] [--full-copies 128]
    python benchmarks/merge_scale.py --reports DIR        # a job's reports instead of running it
A case of S steps runs the tiny two-process JAX job (tests/scripts/jax_dp_two_process.py): rank 1 does 30 ms of
host work per step; past the step-retention bound (2,000) - a long run, whose report keeps ~2,500 steps in full -
3 ms (`--long-slow-ms`), with a host read every 100 steps on every rank (a logging line: anomalies that retention
keeps). `--reports DIR`: a job's report.json (rank 0) and report.rank1.json (rank 1).
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


def run_job(out_dir: str, slow_rank: int = 1, slow_ms: float = 30.0, steps: int = 14, read_every: int = 0) -> list[str]:
    """The two-process JAX job, each rank under `profile` (a host read every `read_every` steps when given); its two
    report paths (rank 0, rank 1)."""
    with socket.socket() as s:
        s.bind(("localhost", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))
    script = os.path.join(ROOT, "tests", "scripts", "jax_dp_two_process.py")
    report = os.path.join(out_dir, "report.json")
    procs = [subprocess.Popen([sys.executable, "-m", "ptxla_perf", "profile", "--port", "none", "--report", report,
                               script, str(port), str(r), str(slow_rank), str(slow_ms), str(steps),
                               str(read_every)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for r in (0, 1)]
    for p in procs:
        _, err = p.communicate(timeout=1800)
        if p.returncode:
            raise RuntimeError(f"rank exited {p.returncode}: {err[-2000:]}")
    return [report, os.path.join(out_dir, "report.rank1.json")]


def write_copies(rank_reports: list[dict], n: int, slow: list[int], out_dir: str) -> None:
    """`n` per-rank reports in `out_dir`: rank i is a copy of rank_reports[1] (the slow rank's) when i is in
    `slow`, else of rank_reports[0], relabelled as rank i of n on host i // RANKS_PER_HOST: its `run` and
    `environment` changed, every other key as the source has it, in its order (written once per source: 1,024
    copies of a 4 MB report are written in seconds, as json.dump would write them)."""
    os.makedirs(out_dir, exist_ok=True)
    texts = [{k: json.dumps(v) for k, v in r.items() if k not in ("run", "environment")} for r in rank_reports]
    for i in range(n):
        src = 1 if i in slow else 0
        rep = rank_reports[src]
        run = dict(rep.get("run") or {})
        argv = list(run.get("argv") or [])
        at = next((j for j in range(1, len(argv)) if str(argv[j]) == str(src)), None)
        if at is not None:  # its own rank on its command line, as each rank of a pod has
            argv[at] = str(i)
        run.update(argv=argv, rank=i, local_rank=i % RANKS_PER_HOST)
        env = dict(rep.get("environment") or {}, process_index=i, process_count=n,
                   hostname=f"host{i // RANKS_PER_HOST:03d}")
        own = {"run": json.dumps(run), "environment": json.dumps(env)}
        keys = list(rep) + [k for k in own if k not in rep]
        with open(os.path.join(out_dir, f"report.rank{i}.json"), "w") as f:
            f.write("{" + ", ".join(f"{json.dumps(k)}: {own[k] if k in own else texts[src][k]}" for k in keys) + "}")


def slow_ranks_for(n: int, k: int) -> list[int]:
    """k ranks spread over the pod (not the first ones: the page must find them)."""
    return sorted({(n * (j + 1)) // (k + 1) + 1 for j in range(k)})


def _in_process(pod: str, digest: bool) -> tuple[float, float, dict]:
    """Seconds to read the pod's reports (up to each digest, or whole) and to merge them; the merged report."""
    from ptxla_perf import SCHEMA_ID
    from ptxla_perf.pods import merge, inputs as merge_inputs
    t0 = time.perf_counter()
    loaded, names, _ = merge_inputs.load_all([pod], SCHEMA_ID, digest=digest)
    t1 = time.perf_counter()
    merged = merge.merge(loaded, names)
    return t1 - t0, time.perf_counter() - t1, merged


def _stragglers(merged: dict) -> list[int] | None:
    found = [f for f in merged["findings"] if f["kind"] == "straggler"]
    return found[0]["ranks"] if found else None


def case(paths: list[str], copies: int, n_slow: int, full_copies: int, tmp: str) -> dict:
    """One job's reports merged at `copies` ranks (the command; in process) and parsed whole at `full_copies`."""
    reports = [json.load(open(p)) for p in paths]
    pod = os.path.join(tmp, "pod")
    slow = slow_ranks_for(copies, n_slow)
    write_copies(reports, copies, slow, pod)
    out = os.path.join(tmp, "merged.json")
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "ptxla_perf", "merge", pod, "--report", out], cwd=ROOT,
                          capture_output=True, text=True)
    command_s = time.perf_counter() - t0
    if proc.returncode:
        raise SystemExit(proc.stderr[-3000:])
    load_s, merge_s, merged = _in_process(pod, digest=True)
    row = {"copies": copies, "steps_run": reports[0]["summary"].get("steps"),
           "steps_kept": len(reports[0].get("steps", [])), "report_bytes": os.path.getsize(paths[0]),
           "digest_bytes": len(json.dumps(reports[0].get("rank_digest"))) if reports[0].get("rank_digest") else None,
           "command_s": round(command_s, 2), "load_s": round(load_s, 2), "merge_s": round(merge_s, 2),
           "slow_ranks": slow, "straggler_ranks": _stragglers(merged),
           "merged_bytes": os.path.getsize(out), "page_bytes": os.path.getsize(out[:-5] + ".html")}
    # the same merge, every report parsed whole: all of them, or the first `full_copies` (scaled to `copies`)
    k = min(copies, full_copies)
    if k < copies:
        sub = os.path.join(tmp, "sub")
        os.makedirs(sub)
        for i in range(k):
            os.symlink(os.path.join(pod, f"report.rank{i}.json"), os.path.join(sub, f"report.rank{i}.json"))
        fast = _in_process(sub, digest=True)[2]
    else:
        sub, fast = pod, merged
    full_load, full_merge, full = _in_process(sub, digest=False)
    row.update(full_copies=k, full_load_s=round(full_load * copies / k, 2),
               full_merge_s=round(full_merge * copies / k, 2),
               same_merged_report=json.dumps(full, sort_keys=True) == json.dumps(fast, sort_keys=True))
    return row


def table(rows: list[dict]) -> str:
    out = ["| steps run (kept in full) | report | `merge` command | of it: reading | merging | every report parsed "
           "whole: reading + merging | merged report | page |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        scaled = "" if r["full_copies"] == r["copies"] else \
            f" (x{r['copies'] // r['full_copies']} of {r['full_copies']})"
        out.append(f"| {r['steps_run']:,} ({r['steps_kept']:,}) | {r['report_bytes'] / 1e6:.2f} MB | "
                   f"**{r['command_s']:.1f} s** | {r['load_s']:.1f} s | {r['merge_s']:.1f} s | "
                   f"{r['full_load_s']:.1f} s + {r['full_merge_s']:.1f} s{scaled} | {r['merged_bytes'] / 1e6:.1f} MB | "
                   f"{r['page_bytes'] / 1e6:.2f} MB |")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--copies", type=int, default=1024)
    ap.add_argument("--slow", type=int, default=2)
    ap.add_argument("--cases", type=int, nargs="+", default=[14, 200, 20000],
                    help="steps of the jobs the benchmark runs (no --reports)")
    ap.add_argument("--long-slow-ms", type=float, default=3.0, help="rank 1's host work per step past 2,000 steps")
    ap.add_argument("--full-copies", type=int, default=128, help="reports parsed whole (scaled to --copies)")
    ap.add_argument("--reports", nargs="+", help="2-rank jobs' directories (report.json, report.rank1.json)")
    args = ap.parse_args()
    sys.path.insert(0, ROOT)
    rows = []
    for spec in (args.reports or args.cases):
        with tempfile.TemporaryDirectory() as tmp:
            if args.reports:
                paths = [os.path.join(spec, "report.json"), os.path.join(spec, "report.rank1.json")]
            else:
                long = spec > 2000
                paths = run_job(tmp, steps=spec, slow_ms=args.long_slow_ms if long else 30.0,
                                read_every=100 if long else 0)
            rows.append(case(paths, args.copies, args.slow, args.full_copies, tmp))
            print(json.dumps(rows[-1]), flush=True)
    print(table(rows))


if __name__ == "__main__":
    main()
