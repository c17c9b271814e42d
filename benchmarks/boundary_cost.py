"""The toolkit's own host work per step boundary, isolated: N syncs of a one-op graph with and without the
session's hook, in alternating blocks in one process (no executor contention, no process-to-process noise).

    python benchmarks/boundary_cost.py [--blocks 10] [--syncs 500]
Prints JSON: plain and hooked µs per sync, their difference (median, min, max over blocks), and the toolkit's
own time per boundary as it times itself (report steps[].own_time_us), which is far less noisy. Also the main
thread's CPU time per sync, plain and hooked, and their difference (`cpu_own_us_per_step`): on a loaded machine
the wall clock also counts the time the thread waited for a core, its CPU clock does not.
"""
import argparse
import json
import os
import statistics
import sys
import time

os.environ.setdefault("PJRT_DEVICE", "CPU")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import torch  # noqa: E402
import torch_xla  # noqa: E402

from ptxla_perf.session import Session  # noqa: E402


def block(n: int, w) -> tuple[float, float]:
    """Wall and main-thread CPU µs per sync."""
    t, c = time.perf_counter(), time.thread_time()
    for _ in range(n):
        w.add_(1.0)
        torch_xla.sync()
    torch_xla._XLAC._xla_wait_device_ops([])
    return (time.perf_counter() - t) / n * 1e6, (time.thread_time() - c) / n * 1e6


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--blocks", type=int, default=10)
    ap.add_argument("--syncs", type=int, default=500)
    args = ap.parse_args()
    w = torch.zeros(4, device=torch_xla.device())
    block(50, w)  # compile
    plain, hooked, inside = [], [], []
    for _ in range(args.blocks):
        plain.append(block(args.syncs, w))
        session = Session(port=None, report_path=None, console=False, handle_signals=False,
                          attribution={"mode": "off"})
        session.start()
        hooked.append(block(args.syncs, w))
        inside += [s["own_time_us"] for s in session.finish()["steps"]]
    diffs = [h[0] - p[0] for h, p in zip(hooked, plain)]
    cpu = [h[1] - p[1] for h, p in zip(hooked, plain)]
    print(json.dumps({"plain_us": statistics.median(p[0] for p in plain),
                      "hooked_us": statistics.median(h[0] for h in hooked),
                      "own_us_per_step": statistics.median(diffs), "min": min(diffs), "max": max(diffs),
                      "timed_inside_us_p50": statistics.median(inside),
                      "timed_inside_us_mean": statistics.fmean(inside),
                      "plain_cpu_us": statistics.median(p[1] for p in plain),
                      "hooked_cpu_us": statistics.median(h[1] for h in hooked),
                      "cpu_own_us_per_step": statistics.median(cpu), "cpu_min": min(cpu), "cpu_max": max(cpu)}))


if __name__ == "__main__":
    main()
