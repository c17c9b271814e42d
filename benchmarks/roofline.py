"""Predicted vs observed step time for a few matmul sizes on this machine (the roofline section, docs/roofline.md).

    python benchmarks/roofline.py [--backend torch_xla|jax] [--steps 8] [--sizes 256,512,1024,2048]

Each size runs in its own Session: a[n,n] @ b[n,n] per step (torch_xla: sync + wait_device_ops; JAX:
block_until_ready - both return before the device finishes, so each step waits for its result). FLOPs and bytes
come from XLA's cost analysis; the peak is the CPU calibration (peaks.py). Prints a markdown table:
FLOPs/step, bytes/step, arithmetic intensity, predicted ms (max of compute and memory), observed p50 ms,
observed/predicted, HFU (XLA's FLOPs over the peak: hardware FLOPs utilisation), verdict.
"""
import argparse
import os
import sys

os.environ.setdefault("PJRT_DEVICE", "CPU")
os.environ.setdefault("JAX_PLATFORMS", "cpu")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from ptxla_perf.session import Session  # noqa: E402


def run_torch_xla(n: int, steps: int) -> dict:
    import torch
    import torch_xla
    import torch_xla.core.xla_model as xm
    dev = torch_xla.device()
    a, b = torch.randn(n, n).to(dev), torch.randn(n, n).to(dev)
    xm.wait_device_ops()
    s = Session("torch_xla", report_path=None, port=None, console=False, handle_signals=False)
    with s:
        for _ in range(steps):
            y = a @ b  # held until the sync: a tensor collected before it would never be computed
            torch_xla.sync()
            xm.wait_device_ops()
        del y
    return s.finish()


def run_jax(n: int, steps: int) -> dict:
    s = Session("jax", report_path=None, port=None, console=False, handle_signals=False)
    with s:
        import jax
        a = jax.random.normal(jax.random.PRNGKey(0), (n, n))
        f = jax.jit(lambda a, b: a @ b)
        for _ in range(steps):
            jax.block_until_ready(f(a, a))
    return s.finish()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", choices=["torch_xla", "jax"], default="torch_xla")
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--sizes", default="256,512,1024,2048")
    args = ap.parse_args()
    run = run_torch_xla if args.backend == "torch_xla" else run_jax
    rows = []
    for n in (int(x) for x in args.sizes.split(",")):
        r = run(n, args.steps)["roofline"]
        rows.append((n, r))
    peak = rows[0][1]["peak"]
    print(f"{args.backend}, peak {peak['flops_per_s'] / 1e9:.1f} GFLOP/s {peak['dtype']} and "
          f"{peak['bytes_per_s'] / 1e9:.1f} GB/s ({peak['name']}), {args.steps} steps per size\n")
    print("| n (a[n,n] @ b[n,n]) | FLOPs/step | bytes/step | FLOP/B | predicted ms | observed p50 ms | "
          "observed/predicted | HFU | verdict |")
    print("|---|---|---|---|---|---|---|---|---|")
    for n, r in rows:
        if r["flops_per_step"] is None:
            print(f"| {n} | - | - | - | - | - | - | - | {r['explanation']} |")
            continue
        print(f"| {n} | {r['flops_per_step']:.3g} | {r['bytes_per_step']:.3g} | {r['arithmetic_intensity']:.0f} | "
              f"{r['predicted_step_time_s'] * 1e3:.3g} | {r['observed_step_time_s'] * 1e3:.3g} | "
              f"{r['observed_over_predicted']:.2f} | {r.get('hfu', r['mfu']):.0%} | {r['verdict']} |")


if __name__ == "__main__":
    main()
