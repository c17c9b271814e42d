"""`doctor [--json] [--no-device]`: what this install can measure here, for a bug report - Python and the
framework versions (and where each stands against the range measured here, versions.py), the device each installed
framework sees, the peak and memory capacity a report would use, which features are on, and whether the profiler's
default port is free. Always exits 0: what is missing is said, not raised."""
from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import subprocess
import sys
from importlib import metadata
from typing import Any

from ..analysis import memory
from .. import peaks
from ..runner import requires
from ..model import versions as ranges
from ..cli import COMMANDS, describe
from ..config import ProfilerConfig

# the distributions a report's figures depend on (importlib.metadata: no import, so no runtime starts)
PACKAGES = ["ptxla_perf", "torch", "torch_xla", "jax", "jaxlib", "flax", "xprof", "tensorboard",
            "tensorboard-plugin-profile", "hydra-core", "numpy", "protobuf", "jsonschema", "mmf"]
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


def in_range(name: str, version: str | None) -> bool | None:
    """Whether `version` of `name` is in the range measured here (ranges.MEASURED); None for a package without
    one or not installed."""
    state = ranges.where(name, version)
    return None if state is None else state == "measured"


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


def _torch_xla_hint(v: dict[str, str | None]) -> str:
    """torch_xla's wheels are each built for one torch series (2.8 for 2.8, 2.9 for 2.9): the install that keeps
    the user's torch, or, where no torch_xla release fits it, why not."""
    torch = v.get("torch")
    if torch is None:
        return "off: needs torch_xla (pip install 'ptxla_perf[torch_xla]')"
    low, high = ((ranges.release(x) + (0, 0))[:2] for x in ranges.MEASURED["torch_xla"])
    series = (ranges.release(torch) + (0, 0))[:2]
    if low <= series <= high:
        pin = f"'torch_xla=={series[0]}.{series[1]}.*'{requires.keep(v, ('torch',))}"
        return f"off: needs torch_xla (pip install {pin})"
    return (f"off: needs torch_xla, whose releases are built for torch {low[0]}.{low[1]} to {high[0]}.{high[1]}, "
            f"not this torch {torch} (a venv of its own: pip install 'ptxla_perf[torch_xla]')")


# jax's releases from the oldest measured on need Python >= 3.11 (their Requires-Python): on 3.10 no pip command
# brings one
JAX_PYTHON = (3, 11)


def features(v: dict[str, str | None], python: tuple[int, int] | None = None) -> dict[str, str]:
    """What a run on this install measures, and why a feature is off. No hint's command replaces an installed
    framework (the installed jax or torch is pinned in it), nor names an install this Python cannot have."""
    python = python or sys.version_info[:2]

    def need(pkg: str, extra: str) -> str:
        if extra.startswith("jax") and not v.get("jax") and python < JAX_PYTHON:
            return (f"off: needs {pkg}; jax >= {ranges.MEASURED['jax'][0]} needs Python >= "
                    f"{JAX_PYTHON[0]}.{JAX_PYTHON[1]} (this is {python[0]}.{python[1]})")
        return f"off: needs {pkg} (pip install 'ptxla_perf[{extra}]')"
    out = {}
    for fw, extra in (("torch_xla", "torch_xla"), ("jax", "jax")):
        ver = v.get(fw)
        state = ranges.where(fw, ver)
        if ver is None:
            out[f"profile {fw} scripts"] = _torch_xla_hint(v) if fw == "torch_xla" else need(fw, extra)
        elif state in ("newer", "older"):
            out[f"profile {fw} scripts"] = (f"on, {ranges.words(fw, ver)} (features whose names it lacks say so in "
                                            "the report)")
        else:
            out[f"profile {fw} scripts"] = "on"
    if v.get("jax") and v.get("flax"):
        out["JAX recipes (rnn_jax, vit_mesh, dp_jax)"] = "on"
    elif v.get("jax"):
        out["JAX recipes (rnn_jax, vit_mesh, dp_jax)"] = \
            f"off: needs flax (pip install flax{requires.keep(v, ('jax', 'jaxlib'))})"
    else:
        out["JAX recipes (rnn_jax, vit_mesh, dp_jax)"] = need("jax and flax", "jax-recipes")
    out["torch_xla recipes (mlp, matmul)"] = "on" if v.get("torch_xla") else _torch_xla_hint(v)
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
        # below: null (kept for readers of the old key): no version is refused, a newer one is "not measured here"
        "supported_ranges": {k: {"min": lo, "below": None, "newest_measured": hi,
                                 "installed_in_range": in_range(k, v.get(k)), "installed": ranges.where(k, v.get(k))}
                             for k, (lo, hi) in ranges.MEASURED.items()},
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
        state = ranges.standing(name, ver)
        note = f"  ({state})" if state else ""
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
