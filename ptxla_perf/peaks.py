"""What the device could do: per-chip peak dense FLOP/s and memory bandwidth, the denominators of HFU and MFU.

One table of public spec-sheet figures (bf16 dense matmul, no sparsity; HBM), chosen from the runtime's device
kind (PJRT's `device_kind`: "TPU v5 lite", "NVIDIA H100 80GB HBM3", ...); a user override (`--peak-tflops`,
`--peak-gbps`, `roofline.peak_tflops` / `roofline.peak_gbps`); on a CPU, where no nominal figure means much, a
short calibration (a float32 matmul and a copy with NumPy, ~0.1-0.3 s) cached per machine in
`~/.cache/ptxla_perf/peaks.json`. `Peak.source` always says where the numbers came from.
"""
from __future__ import annotations

import json
import os
import platform
import re
import socket
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any


@dataclass
class Peak:
    flops_per_s: float | None
    bytes_per_s: float | None
    dtype: str  # what the FLOP/s figure holds for
    name: str  # the chip (table row), "cpu (calibrated)", or "user"
    source: str  # where the numbers come from

    @property
    def ridge(self) -> float | None:
        """FLOPs per byte above which a program is compute-bound on this device."""
        if self.flops_per_s and self.bytes_per_s:
            return self.flops_per_s / self.bytes_per_s
        return None

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "ridge_flops_per_byte": self.ridge}


_GCP = "cloud.google.com/tpu/docs/"
# (pattern on the device kind, name, dense bf16 TFLOP/s, HBM GB/s, source); first match wins (most specific first)
TABLE: list[tuple[str, str, float, float, str]] = [
    (r"tpu\s*v6\s*lite|tpu\s*v6e|trillium", "TPU v6e", 918.0, 1640.0, _GCP + "v6e (per chip: 918 TFLOP/s bf16, 1640 GB/s HBM)"),
    (r"tpu\s*v5\s*lite|tpu\s*v5e", "TPU v5e", 197.0, 819.0, _GCP + "v5e (per chip: 197 TFLOP/s bf16, 819 GB/s HBM)"),
    (r"tpu\s*v5p|tpu\s*v5$|tpu\s*v5\b", "TPU v5p", 459.0, 2765.0, _GCP + "v5p (per chip: 459 TFLOP/s bf16, 2765 GB/s HBM)"),
    (r"tpu\s*v4", "TPU v4", 275.0, 1228.0, _GCP + "v4 (per chip: 275 TFLOP/s bf16, 1228 GB/s HBM)"),
    (r"h200", "NVIDIA H200 SXM", 989.0, 4800.0,
     "nvidia.com/en-us/data-center/h200 (989 TFLOP/s bf16 dense = 1979 with sparsity / 2; 4.8 TB/s HBM3e)"),
    (r"h100.*pcie", "NVIDIA H100 PCIe", 756.0, 2000.0,
     "nvidia.com/en-us/data-center/h100 (PCIe: 756 TFLOP/s bf16 dense; 2.0 TB/s HBM2e)"),
    (r"h100", "NVIDIA H100 SXM", 989.0, 3350.0,
     "nvidia.com/en-us/data-center/h100 (SXM: 989 TFLOP/s bf16 dense = 1979 with sparsity / 2; 3.35 TB/s HBM3)"),
    (r"a100.*40\s*gb", "NVIDIA A100 40GB", 312.0, 1555.0,
     "nvidia.com/en-us/data-center/a100 (312 TFLOP/s bf16 dense; 40GB: 1555 GB/s HBM2)"),
    (r"a100", "NVIDIA A100 80GB", 312.0, 2039.0,
     "nvidia.com/en-us/data-center/a100 (312 TFLOP/s bf16 dense; 80GB SXM: 2039 GB/s HBM2e)"),
]


def from_table(device: str) -> Peak | None:
    text = device.lower().strip()
    for pattern, name, tflops, gbps, source in TABLE:
        if re.search(pattern, text):
            return Peak(tflops * 1e12, gbps * 1e9, "bf16", name, source)
    return None


# per-chip device memory (HBM) of the table's rows, GiB, from the same spec pages (memory.py: capacity, headroom)
MEMORY_GIB: dict[str, float] = {"TPU v6e": 32, "TPU v5e": 16, "TPU v5p": 95, "TPU v4": 32, "NVIDIA H200 SXM": 141,
                                "NVIDIA H100 PCIe": 80, "NVIDIA H100 SXM": 80, "NVIDIA A100 40GB": 40,
                                "NVIDIA A100 80GB": 80}


def memory_from_table(device: str) -> tuple[str, int, str] | None:
    """(chip, device memory in bytes, source) for a device kind the table knows; None otherwise."""
    text = device.lower().strip()
    for pattern, name, _tflops, _gbps, source in TABLE:
        if re.search(pattern, text) and name in MEMORY_GIB:
            return name, int(MEMORY_GIB[name] * 2**30), f"spec table: {name} {MEMORY_GIB[name]:g} GiB ({source})"
    return None


def is_cpu(device: str) -> bool:
    return device.lower().strip() in ("cpu", "host") or device.lower().startswith("cpu")


def select(devices: list[str | None], override: dict[str, Any] | None = None, calibrate_cpu: bool = True,
           cpu_devices: int = 1) -> Peak:
    """The peak for a run: the user's figures win (a missing half is filled from the table or calibration);
    else the first device description that names a known chip; else, on a CPU, the calibrated figures - shared
    by the `cpu_devices` host-platform devices of the process (`--xla_force_host_platform_device_count`: N
    devices on the same cores), since costs are per device."""
    override = override or {}
    tflops, gbps = _positive(override.get("peak_tflops")), _positive(override.get("peak_gbps"))
    found: Peak | None = None
    names = [d for d in devices if d]
    for d in names:
        found = from_table(d)
        if found:
            break
    if found is None and any(is_cpu(d) for d in names) and not (tflops and gbps):
        found = calibrated(measure_if_missing=calibrate_cpu)
        if found is not None and cpu_devices > 1:
            found = Peak(found.flops_per_s / cpu_devices, found.bytes_per_s / cpu_devices, found.dtype,
                         f"{found.name} / {cpu_devices} devices",
                         f"{found.source}; divided by the {cpu_devices} host-platform devices sharing the cores")
    if tflops or gbps:
        base = found or Peak(None, None, "unknown", "user", "")
        return Peak(tflops * 1e12 if tflops else base.flops_per_s, gbps * 1e9 if gbps else base.bytes_per_s,
                    override.get("dtype") or (base.dtype if not tflops else "as given"), "user",
                    "user override (--peak-tflops/--peak-gbps or roofline.peak_tflops/peak_gbps)"
                    + (f"; the rest from {base.source}" if base.source and not (tflops and gbps) else ""))
    if found:
        return found
    return Peak(None, None, "unknown", "unknown",
                f"no peak known for device {', '.join(names) or '?'}: pass --peak-tflops/--peak-gbps")


def _positive(v) -> float | None:
    if v is None:
        return None
    v = float(v)
    if not v > 0:
        raise ValueError(f"peak must be a positive number, not {v}")
    return v


# --- CPU calibration ---------------------------------------------------------------------------------------
_MEMO: list[Peak] = []


def cache_path() -> Path:
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(root) / "ptxla_perf" / "peaks.json"


def _machine_key() -> str:
    cpu = platform.processor() or ""
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), cpu)
    except OSError:
        pass
    return f"{socket.gethostname()}|{cpu}|{os.cpu_count()}|float32"


def calibrated(refresh: bool = False, measure_if_missing: bool = True) -> Peak | None:
    """Measured float32 matmul FLOP/s and copy bandwidth of this machine, cached per machine (key: host, CPU
    model, core count). A calibration, not a nominal peak: other processes on the machine lower it.
    `measure_if_missing=False`: the cached figures or None (a report flushed mid-run never measures)."""
    if _MEMO and not refresh:
        return _MEMO[0]
    path, key = cache_path(), _machine_key()
    cache: dict[str, Any] = {}
    try:
        cache = json.loads(path.read_text())
    except (OSError, ValueError):
        pass
    entry = cache.get(key) if isinstance(cache, dict) and not refresh else None
    if not (isinstance(entry, dict) and entry.get("flops_per_s") and entry.get("bytes_per_s")):
        if not measure_if_missing:
            return None
        entry = measure()
        cache = cache if isinstance(cache, dict) else {}
        cache[key] = entry
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps(cache, indent=1))
            os.replace(tmp, path)
        except OSError:
            pass
    peak = Peak(float(entry["flops_per_s"]), float(entry["bytes_per_s"]), "float32", "cpu (calibrated)",
                f"calibrated on this machine {entry.get('measured_at', '')} (float32 matmuls of NumPy n="
                f"{entry.get('matmul_n')}{' and XLA' if entry.get('xla_flops_per_s') else ''}, and a "
                f"{entry.get('copy_mb')} MB copy, best of {entry.get('repeats')}); "
                f"cached in {path}")
    _MEMO[:] = [peak]
    return peak


def measure() -> dict[str, Any]:
    """The calibration, measured in a fresh process: inside a profiled one, right after XLA's work, NumPy's threads
    meet XLA's busy thread pool (a calibration measured 10x too low there, then cached for the machine). In this
    process only where a child cannot run."""
    code = "import json, sys; from ptxla_perf.peaks import measure_here; sys.stdout.write(json.dumps(measure_here()))"
    root = str(Path(__file__).resolve().parent.parent)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p))
    try:
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
        entry = json.loads(out.stdout) if out.returncode == 0 else None
        if isinstance(entry, dict) and entry.get("flops_per_s") and entry.get("bytes_per_s"):
            return entry
    except (OSError, ValueError, subprocess.SubprocessError):
        pass
    return measure_here(xla=False)  # JAX's runtime is never started in the profiled process


def measure_here(sizes: tuple[int, ...] = (256, 512), copy_mb: int = 32, repeats: int = 7,
                 xla: bool = True) -> dict[str, Any]:
    """The best rate seen: 2n^3 FLOPs of float32 matmuls of a few cache-friendly sizes (the fastest is the
    nearest to what the cores can do; larger ones measure BLAS blocking and memory too), and a copy (bytes read +
    written) of `copy_mb` MB, each best of `repeats`. About 0.1-0.3 s on 2 cores."""
    import numpy as np
    rng = np.random.default_rng(0)
    best_flops = 0.0
    for n in sizes:
        a = rng.standard_normal((n, n), dtype=np.float32)
        b = rng.standard_normal((n, n), dtype=np.float32)
        c = np.empty((n, n), dtype=np.float32)
        np.matmul(a, b, out=c)  # warm-up (BLAS threads, pages)
        runs = max(repeats, int(repeats * (512 / n) ** 3))  # small sizes are cheap: more tries beat the noise
        best_flops = max(best_flops, 2.0 * n ** 3 / min(_timed(lambda: np.matmul(a, b, out=c))
                                                        for _ in range(runs)))
    xla = _xla_matmul_rate(repeats) if xla else None
    src = np.ones(copy_mb * 2 ** 20 // 4, dtype=np.float32)
    dst = np.empty_like(src)
    np.copyto(dst, src)
    best_cp = min(_timed(lambda: np.copyto(dst, src)) for _ in range(repeats))
    return {"flops_per_s": max(best_flops, xla or 0.0), "bytes_per_s": 2.0 * src.nbytes / best_cp,
            "numpy_flops_per_s": best_flops, "xla_flops_per_s": xla,
            "matmul_n": "/".join(map(str, sizes)), "copy_mb": copy_mb, "repeats": repeats,
            "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def _xla_matmul_rate(repeats: int, sizes: tuple[int, ...] = (512, 1024)) -> float | None:
    """XLA's own CPU kernels (through JAX, in this calibration process only): they pass NumPy's BLAS by up to 2x on
    some machines (measured here: 200 vs 100 GFLOP/s single-threaded), and the programs measured against the peak
    run on them. None without JAX."""
    try:
        os.environ.setdefault("JAX_PLATFORMS", "cpu")
        import jax
        import jax.numpy as jnp
        f = jax.jit(lambda a, b: a @ b)
        best = 0.0
        for n in sizes:
            a = jnp.ones((n, n), jnp.float32)
            f(a, a).block_until_ready()  # compile, warm-up
            best = max(best, 2.0 * n ** 3 / min(_timed(lambda: f(a, a).block_until_ready()) for _ in range(repeats)))
        return best
    except Exception:  # no JAX, or no CPU backend: NumPy's figure alone
        return None


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return max(time.perf_counter() - t0, 1e-9)


def main(argv: list[str] | None = None) -> int:
    """`python -m ptxla_perf.peaks [--recalibrate]`: the CPU calibration of this machine (measured again on
    request, e.g. after the first one ran under load), and the table."""
    import argparse
    ap = argparse.ArgumentParser(prog="python -m ptxla_perf.peaks", description=main.__doc__.splitlines()[0])
    ap.add_argument("--recalibrate", action="store_true", help="measure again and replace the cached figures")
    args = ap.parse_args(argv)
    p = calibrated(refresh=args.recalibrate)
    print(f"cpu (calibrated): {p.flops_per_s / 1e9:.1f} GFLOP/s {p.dtype}, {p.bytes_per_s / 1e9:.1f} GB/s - {p.source}")
    for _, name, tflops, gbps, source in TABLE:
        print(f"{name}: {tflops:g} TFLOP/s bf16 dense, {gbps:g} GB/s - {source}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
