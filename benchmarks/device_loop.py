"""device_check.py's user-style loops: a nanoGPT-style JAX + optax training loop (benchmarks/workloads/gpt_loop.py)
at a launch-bound and a device-bound size, plain and profiled in alternating pairs, and once waiting for every step
(the truth); one table row per size comparing what the report says with what the loop itself measured.

Does a report describe the device's work when the host runs ahead? The loop's own ms/step (plain, profiled) and
the truth's are timed by the workload between two prints (reads) on one clock; the report's step time, parts and
FLOPs are read from the last profiled run; MFU is computed from the analytic FLOPs (6·N·tokens for the matmul
parameters plus the attention's score and value products) over the report's step time and over the truth's.
"""
from __future__ import annotations

import statistics
from pathlib import Path

from pairs import ratio_stats, run_workload

WORKLOAD = Path(__file__).resolve().parent / "workloads" / "gpt_loop.py"

# name -> model and loop sizes on an accelerator, and at --cpu-smoke (tiny, fewer steps and a print every 20-25:
# the script's own dry run in about a minute of CPU time; each run's cost is JAX's start and one compile)
LOOPS: dict[str, dict[str, dict]] = {
    # a tiny model: each step's device work is shorter than launching it (dispatch, the batch's host->device copy)
    "gpt_launch": {"device": dict(layers=2, d_model=128, heads=4, seq=64, batch=8, vocab=512, steps=301),
                   "cpu": dict(layers=1, d_model=32, heads=2, seq=16, batch=4, vocab=64, steps=101, print_every=25)},
    # ~3.5 TFLOP per step in bf16 (GPT-2 small's width and vocabulary, 4 layers): ~10-20 ms of device work per step
    "gpt_device": {"device": dict(layers=4, d_model=768, heads=12, seq=512, batch=16, vocab=50304,
                                  dtype="bfloat16", steps=101),
                   "cpu": dict(layers=1, d_model=128, heads=4, seq=64, batch=8, vocab=256, steps=61, print_every=20)},
}


def analytic_flops(cfg: dict) -> float:
    """Training FLOPs per step: 6 per matmul parameter per token (forward 2, backward 4) plus the attention's
    q@k and att@v (2·2·seq·d_model per token per layer forward, x3 with the backward), as nanoGPT counts them."""
    d, layers, tokens = cfg["d_model"], cfg["layers"], cfg["batch"] * cfg["seq"]
    matmul_params = layers * 12 * d * d + d * cfg["vocab"]  # qkv 3d², proj d², fc 4d², out 4d²; the head d·V
    return 6.0 * matmul_params * tokens + 12.0 * layers * cfg["seq"] * d * tokens


def _args(cfg: dict, sync: bool) -> list[str]:
    out = [f"--{k.replace('_', '-')}={v}" for k, v in cfg.items()]
    return out + (["--sync"] if sync else [])


def run_loop(name: str, cpu: bool, out: Path, env: dict[str, str], timeout_s: float, pairs: int,
             log=lambda msg: None) -> dict:
    """`pairs` alternating plain/profiled pairs (the order flips each pair), then the truth run."""
    cfg = LOOPS[name]["cpu" if cpu else "device"]
    flops = analytic_flops(cfg)
    runs = []
    for pair in range(pairs):
        for profiled in ((False, True) if pair % 2 == 0 else (True, False)):
            tag = f"{'profiled' if profiled else 'plain'}_{pair + 1}"
            runs.append(run_workload(WORKLOAD, _args(cfg, False), profiled=profiled, tag=tag, workdir=out / name,
                                     env=env, timeout_s=timeout_s,
                                     profile_args=["--model-flops-per-step", f"{flops:.6g}"]))
            log(f"{name} {tag}: {runs[-1].get('error') or 'ok'} ({runs[-1]['seconds']} s)")
    runs.append(run_workload(WORKLOAD, _args(cfg, True), profiled=False, tag="truth", workdir=out / name, env=env,
                             timeout_s=timeout_s))
    log(f"{name} truth: {runs[-1].get('error') or 'ok'} ({runs[-1]['seconds']} s)")
    return {"name": name, "config": cfg, "analytic_flops": flops, "runs": runs}


def _ms(s) -> str:
    return "-" if s is None else f"{s:.3g}"


def _size(cfg: dict) -> str:
    return (f"L{cfg['layers']} d{cfg['d_model']} T{cfg['seq']} B{cfg['batch']} V{cfg['vocab']} "
            f"{cfg.get('dtype', 'float32')}")


def _parts(tb: dict | None) -> str:
    """The report's time breakdown, largest part first: 'device 15.1 ms (82%) · launch 1.2 · ...'."""
    comps = [(k, v) for k, v in ((tb or {}).get("components_s") or {}).items() if v and v > 0]
    if not comps:
        return "-"
    comps.sort(key=lambda kv: -kv[1])
    share = (tb.get("share") or {}).get(comps[0][0])
    head = f"{comps[0][0]} {comps[0][1] * 1e3:.3g} ms" + (f" ({100 * share:.0f}%)" if share is not None else "")
    return " · ".join([head] + [f"{k} {v * 1e3:.2g}" for k, v in comps[1:]])


def loop_row(result: dict) -> dict[str, str]:
    """One table row from run_loop's result (recorded data in, strings out: tests feed it recorded results)."""
    runs = result["runs"]
    failed = [r for r in runs if "error" in r]
    plain = [r["bench"]["ms_per_step"] for r in runs if not r["profiled"] and r["tag"] != "truth" and "bench" in r]
    prof_runs = [r for r in runs if r["profiled"]]
    profiled = [r["bench"]["ms_per_step"] for r in prof_runs if "bench" in r]
    truth_run = next((r for r in runs if r["tag"] == "truth"), {})
    truth = (truth_run.get("bench") or {}).get("ms_per_step")
    pairs = [(p["bench"]["ms_per_step"], q["bench"]["ms_per_step"])
             for p, q in zip([r for r in runs if r["profiled"]],
                             [r for r in runs if not r["profiled"] and r["tag"] != "truth"])
             if "bench" in p and "bench" in q]
    ratio = ratio_stats([a for a, _ in pairs], [b for _, b in pairs])
    report = next((r["report"] for r in reversed(prof_runs) if r.get("report")), None) or {}
    s, roof = report.get("summary") or {}, report.get("roofline") or {}
    step = (s.get("step_time_s") or {}).get("p50")
    peak = (roof.get("peak") or {}).get("flops_per_s")
    flops = result["analytic_flops"]

    def mfu(seconds):
        return "-" if not (seconds and peak) else f"{100 * flops / seconds / peak:.1f}%"

    def misses(rs):
        got = [r["bench"].get("cpp_cache_misses") for r in rs if "bench" in r]
        return "?" if not got or None in got else "/".join(str(m) for m in got)

    timed = next((r["bench"]["timed_steps"] for r in runs if "bench" in r), None)
    return {
        "run": result["name"],
        "size": _size(result["config"]),
        "status": "ok" if not failed else f"{len(failed)} failed: {failed[0]['tag']}: {failed[0]['error']}"[:120],
        "plain ms/step": _ms(statistics.median(plain) if plain else None),
        "profiled/plain": "-" if ratio is None else f"x{ratio[0]:.2f} ({ratio[1]:.2f}-{ratio[2]:.2f})",
        "truth ms/step": _ms(truth),
        "C++ misses plain, profiled": (f"{misses([r for r in runs if not r['profiled'] and r['tag'] != 'truth'])}, "
                                       f"{misses(prof_runs)} of {timed}"),
        "report step p50 ms": _ms(None if step is None else step * 1e3),
        "report/truth": "-" if not (step and truth) else f"{step * 1e3 / truth:.2f}",
        "parts (largest first)": _parts(s.get("time_breakdown")),
        "verdict": str(s.get("roofline_verdict") or roof.get("verdict") or "-"),
        "TFLOP/step analytic": f"{flops / 1e12:.4g}",
        "report TFLOP/step": "-" if s.get("flops_per_step") is None else f"{s['flops_per_step'] / 1e12:.4g}",
        "HFU (report)": "-" if s.get("hfu") is None else f"{100 * s['hfu']:.1f}%",
        "MFU analytic, report time": mfu(step),
        "MFU analytic, truth time": mfu(None if truth is None else truth / 1e3),
    }


def loop_ok(result: dict) -> bool:
    return all("error" not in r for r in result["runs"])


def recorded(result: dict) -> dict:
    """run_loop's result without the reports (each stays in its run's folder): what device_check.json keeps."""
    return dict(result, runs=[{k: v for k, v in r.items() if k != "report"} for r in result["runs"]])
