"""`doctor [--json] [--no-device]`: what this install can measure here, for a bug report - Python and the
framework versions (and whether each is in the supported range), the device each installed framework sees, the
peak and memory capacity a report would use, which features are on, and whether the profiler's default port is
free. Always exits 0: what is missing is said, not raised."""
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import socket
import subprocess
import sys
from importlib import metadata
from typing import Any

from .. import memory, peaks
from ..cli import COMMANDS, describe
from ..config import ProfilerConfig

# the distributions a report's figures depend on (importlib.metadata: no import, so no runtime starts)
PACKAGES = ["ptxla_perf", "torch", "torch_xla", "jax", "jaxlib", "flax", "xprof", "tensorboard",
            "tensorboard-plugin-profile", "hydra-core", "numpy", "protobuf", "jsonschema", "mmf"]
# [lowest, past-highest) as run here (README: "Supported versions"; pyproject.toml's extras say the same)
SUPPORTED = {"torch_xla": ("2.8", "2.10"), "torch": ("2.8", "2.10"), "jax": ("0.7", "0.11")}
PROBE_TIMEOUT_S = 120  # a TPU/GPU runtime's first start can take tens of seconds; a hung one must not hang doctor

# Each probe runs in a child: a framework that crashes or hangs on start is reported, not fatal, and the two
# runtimes never share a process. It prints one JSON line.
_PROBES = {
    "jax": """
import json, jax
devs = jax.local_devices()
try:
    stats = devs[0].memory_stats() or {}
except Exception:
    stats = {}
try:  # what the limit is (the allocator's on a GPU, and the variable that sets it)
    import os
    from ptxla_perf.backends.jax.memory import limit_kind
    kind = limit_kind(devs[0].platform, os.environ)
except Exception:
    kind = {}
print(json.dumps({"platform": devs[0].platform, "device_kind": devs[0].device_kind, "count": len(devs),
                  "bytes_limit": stats.get("bytes_limit"), **kind}))
""",
    "torch_xla": """
import json
import torch_xla, torch_xla.runtime as xr, torch_xla.core.xla_model as xm
dev = torch_xla.device()
try:
    limit = (xm.get_memory_info(dev) or {}).get("bytes_limit")
except Exception:
    limit = None
try:
    import os
    from ptxla_perf.backends.torch_xla.memory import limit_kind
    kind = limit_kind(str(xr.device_type()).upper(), os.environ)
except Exception:
    kind = {}
print(json.dumps({"platform": xr.device_type(), "device_kind": xm.xla_device_kind(), "count": xr.addressable_runtime_device_count(),
                  "bytes_limit": limit, **kind}))
""",
}


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("doctor", help=COMMANDS["doctor"],
                       description=describe(__doc__))
    p.add_argument("--json", action="store_true", help="print the findings as one JSON object")
    p.add_argument("--no-device", action="store_true",
                   help="do not start any framework's runtime (versions, features and port only)")
    return p


def _version_tuple(v: str) -> tuple[int, ...]:
    """'2.9.0+cpu' -> (2, 9, 0); '0.7.0rc1' -> (0, 7, 0)."""
    m = re.match(r"\d+(?:\.\d+)*", v)
    return tuple(int(x) for x in m.group(0).split(".")) if m else ()


def in_range(name: str, version: str | None) -> bool | None:
    """Whether `version` of `name` is in the supported range; None for a package without one or not installed."""
    if version is None or name not in SUPPORTED:
        return None
    low, high = SUPPORTED[name]
    return _version_tuple(low) <= _version_tuple(version) < _version_tuple(high)


def versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def probe(frameworks: list[str], timeout_s: float = PROBE_TIMEOUT_S) -> dict[str, dict[str, Any]]:
    """The first device each framework sees here, each from its own child process started at once (a runtime
    never starts in this one, and the slow starts overlap)."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    procs = {fw: subprocess.Popen([sys.executable, "-c", _PROBES[fw]], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, env=env) for fw in frameworks}
    out = {}
    for fw, proc in procs.items():
        try:
            stdout, stderr = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            out[fw] = {"error": f"its runtime did not start within {timeout_s:.0f} s"}
            continue
        lines = [ln for ln in stdout.splitlines() if ln.startswith("{")]
        if proc.returncode != 0 or not lines:
            tail = [ln for ln in stderr.strip().splitlines() if ln.strip()]
            out[fw] = {"error": (tail[-1] if tail else f"exit code {proc.returncode}")[:300]}
        else:
            out[fw] = json.loads(lines[-1])
    return out


def peak_and_capacity(device: dict[str, Any]) -> dict[str, Any]:
    """The peak a report would divide by and the memory capacity it would compare against (no calibration run:
    on a CPU the cached calibration, or a note that the first profiled run measures it)."""
    kind = device.get("device_kind") or device.get("platform") or ""
    peak = peaks.select([kind], calibrate_cpu=False)
    if peak.flops_per_s is None and peaks.is_cpu(kind):
        peak_text = "cpu: calibrated on the first profiled run (~0.2 s), then cached"
    elif peak.flops_per_s is None:
        peak_text = f"unknown for {kind!r}: pass --peak-tflops/--peak-gbps (HFU not measured)"
    else:
        peak_text = (f"{peak.name}: {peak.flops_per_s / 1e12:.3g} TFLOP/s {peak.dtype}, "
                     f"{peak.bytes_per_s / 1e9:.4g} GB/s")
    cap = memory.capacity({k: device.get(k) for k in ("bytes_limit", "limit_kind", "limit_set_by")}, [kind], None)
    return {"peak": peak.to_json(), "peak_text": peak_text, "memory_capacity": cap}


def port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("", port))
        except OSError:
            return False
    return True


def features(v: dict[str, str | None]) -> dict[str, str]:
    """What a run on this install measures, and why a feature is off."""
    def need(pkg: str, extra: str) -> str:
        return f"off: needs {pkg} (pip install 'ptxla_perf[{extra}]')"
    out = {}
    for fw, extra in (("torch_xla", "torch_xla"), ("jax", "jax")):
        ok = in_range(fw, v.get(fw))
        out[f"profile {fw} scripts"] = (need(fw, extra) if v.get(fw) is None else "on" if ok else
                                        f"on, outside the supported range {SUPPORTED[fw][0]} <= {fw} < "
                                        f"{SUPPORTED[fw][1]} (features that need a newer API are reported as not "
                                        "measured)")
    out["JAX recipes (rnn_jax, vit_mesh, dp_jax)"] = ("on" if v.get("jax") and v.get("flax") else
                                                     need("jax and flax", "jax"))
    out["torch_xla recipes (mlp, matmul)"] = "on" if v.get("torch_xla") else need("torch_xla", "torch_xla")
    out["mmf recipe"] = "on" if v.get("mmf") and v.get("torch_xla") else \
        "off: needs torch_xla and MMF (make setup; docs/recipe-mmf.md)"
    out["capture / analyze device tables"] = "on" if v.get("xprof") else need("xprof", "capture")
    out["TensorBoard scalars and Profile tab"] = "on" if v.get("tensorboard") else need("tensorboard", "tensorboard")
    return out


def collect(with_device: bool = True) -> dict[str, Any]:
    v = versions()
    out: dict[str, Any] = {
        "python": {"version": platform.python_version(), "executable": sys.executable,
                   "supported": (3, 10) <= sys.version_info[:2] <= (3, 13)},
        "platform": platform.platform(),
        "packages": v,
        "supported_ranges": {k: {"min": lo, "below": hi, "installed_in_range": in_range(k, v.get(k))}
                             for k, (lo, hi) in SUPPORTED.items()},
        "environment": {k: os.environ.get(k) for k in ("PJRT_DEVICE", "JAX_PLATFORMS", "XLA_FLAGS")
                        if os.environ.get(k)},
        "features": features(v),
        "devices": {},
    }
    installed = [fw for fw in ("jax", "torch_xla") if v.get(fw)]
    found = probe(installed) if with_device else {fw: {"skipped": "--no-device"} for fw in installed}
    for fw, dev in found.items():
        if "error" not in dev and "skipped" not in dev:
            dev.update(peak_and_capacity(dev))
        out["devices"][fw] = dev
    port = ProfilerConfig().port
    out["profiler_port"] = {"port": port, "free": port_free(port)}
    return out


def render(info: dict[str, Any]) -> list[str]:
    py = info["python"]
    lines = [f"ptxla_perf doctor  (Python {py['version']}{'' if py['supported'] else ', outside 3.10-3.13'}; "
             f"{info['platform']})", "packages"]
    for name, ver in info["packages"].items():
        flag = in_range(name, ver)
        note = "" if flag is None else "  (supported)" if flag else \
            f"  (outside {SUPPORTED[name][0]} <= {name} < {SUPPORTED[name][1]})"
        lines.append(f"  {name:<27} {ver or '-'}{note}")
    if info["environment"]:
        lines.append("environment  " + "  ".join(f"{k}={v}" for k, v in info["environment"].items()))
    for fw, dev in info["devices"].items():
        if "skipped" in dev:
            lines.append(f"device ({fw})  not probed ({dev['skipped']})")
        elif "error" in dev:
            lines.append(f"device ({fw})  runtime did not start: {dev['error']}")
        else:
            cap = dev["memory_capacity"]
            cap_text = (f"{cap['bytes'] / 2**30:.3g} GiB ({cap['source']}: "
                        f"{memory.capacity_words(cap, lambda n: f'{n / 2**30:.3g} GiB')})" if cap["bytes"] else
                        "unknown (no runtime figure or spec row; --device-memory-gb sets it; memory_headroom not "
                        "measured)")
            lines += [f"device ({fw})  {dev['device_kind']} x{dev['count']} ({dev['platform']})",
                      f"  peak       {dev['peak_text']}", f"  memory     capacity {cap_text}"]
    lines.append("features")
    lines += [f"  {name:<38} {state}" for name, state in info["features"].items()]
    port = info["profiler_port"]
    lines.append(f"profiler port {port['port']} " + ("free" if port["free"] else
                 "in use (profile takes the next free port and prints it)"))
    return lines


def run(args) -> int:
    info = collect(with_device=not args.no_device)
    if args.json:
        print(json.dumps(info, indent=1, default=str))
    else:
        print("\n".join(render(info)))
    return 0
