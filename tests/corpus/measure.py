"""Raw ground-truth counters for one corpus script, measured WITHOUT ptxla_perf.

Runs the script as `__main__` (runpy) in this process and records, per training iteration:

torch_xla  a snapshot of `torch_xla.debug.metrics` (CompileTime / UncachedCompile / CachedCompile, ExecuteTime,
           TransferFromDeviceTime, TransferToDeviceTime, aten::* fallback counters) after every sync
           (`torch_xla.sync`, which `xm.mark_step`, `MpDeviceLoader`, `StepTrace` and `torch_xla.step()` all call)
           and after every optimizer step (`register_optimizer_step_post_hook`). Iteration k ends at the first
           sync after optimizer step k; syncs under `torch.no_grad()` are counted as eval syncs instead.
jax        compiles from `jax_log_compiles` ("Compiling jit(NAME)" log records), attributed to the jitted function
           whose call was running (`jax.jit` is wrapped by a call-counting proxy) or else to an eager primitive;
           host->device transfers from the C++ transfer-guard log (`jax_transfer_guard_host_to_device="log"`,
           written to fd 2, interleaved with our own markers); device->host reads by counting
           `ArrayImpl._value` (what float(), np.asarray(), jax.device_get() and print() go through; the transfer
           guard does not log these on the CPU). Iteration k = from call k of the step function to call k+1.

Usage: python tests/corpus/measure.py [--json OUT] [--step-fn NAME] SCRIPT [script args]
"""
from __future__ import annotations

import argparse
import functools
import json
import os
import re
import runpy
import sys
import tempfile
from pathlib import Path


def detect_backend(script: Path) -> str:
    text = script.read_text()
    return "torch_xla" if re.search(r"^\s*(import|from)\s+torch_xla", text, re.M) else "jax"


# --------------------------------------------------------------------------------------------- torch_xla
def _xla_snapshot(met) -> dict:
    def count(metric):
        data = met.metric_data(metric)
        return int(data[0]) if data else 0

    def time_s(metric):
        data = met.metric_data(metric)
        return float(data[1]) / 1e9 if data else 0.0

    snap = {"compiles": count("CompileTime"), "compile_time_s": time_s("CompileTime"),
            "uncached_compiles": int(met.counter_value("UncachedCompile") or 0),
            "cached_compiles": int(met.counter_value("CachedCompile") or 0),
            "executions": count("ExecuteTime"),
            "d2h": count("TransferFromDeviceTime"), "h2d": count("TransferToDeviceTime")}
    for name in met.counter_names():
        if name.startswith("aten::"):
            snap[name] = int(met.counter_value(name) or 0)
    return snap


def _delta(a: dict, b: dict) -> dict:
    keys = set(a) | set(b)
    out = {k: b.get(k, 0) - a.get(k, 0) for k in keys}
    out["compile_time_s"] = round(out.get("compile_time_s", 0.0), 4)
    return {k: v for k, v in out.items() if v or not k.startswith("aten::")}


def _add(into: dict, d: dict) -> None:
    for k, v in d.items():
        into[k] = into.get(k, 0) + v
    if "compile_time_s" in into:
        into["compile_time_s"] = round(into["compile_time_s"], 4)


def measure_torch_xla(script: Path, args: list[str]) -> dict:
    import torch
    import torch_xla
    import torch_xla.debug.metrics as met
    import torch_xla.torch_xla  # noqa: F401  (the attribute torch_xla.torch_xla is the package itself)
    from torch.optim.optimizer import register_optimizer_step_post_hook

    txla_mod = sys.modules["torch_xla.torch_xla"]  # sync()'s module: torch_xla.step()/compile() call it by name
    events: list[tuple[str, dict, bool]] = []  # (kind, snapshot, grad_enabled)
    original_sync = txla_mod.sync
    depth = [0]

    def sync(*a, **kw):
        depth[0] += 1
        try:
            return original_sync(*a, **kw)
        finally:
            depth[0] -= 1
            if depth[0] == 0:
                events.append(("sync", _xla_snapshot(met), torch.is_grad_enabled()))

    txla_mod.sync = sync
    torch_xla.sync = sync
    handle = register_optimizer_step_post_hook(lambda opt, a, kw: events.append(("opt", _xla_snapshot(met), True)))
    start = _xla_snapshot(met)
    exit_code = _run(script, args)
    end = _xla_snapshot(met)
    handle.remove()
    txla_mod.sync = torch_xla.sync = original_sync

    iterations: list[dict] = []
    evals = {"syncs": 0}
    current: dict = {"syncs": 0}
    prev = start
    opt_seen = False
    for kind, snap, grad in events:
        d = _delta(prev, snap)
        prev = snap
        if kind == "sync" and not grad:
            evals["syncs"] += 1
            _add(evals, d)
            continue
        if kind == "opt":
            if opt_seen:  # a second optimizer step without a sync in between closes the iteration here
                iterations.append(current)
                current = {"syncs": 0}
            _add(current, d)
            opt_seen = True
            continue
        current["syncs"] += 1
        _add(current, d)
        if opt_seen:
            iterations.append(current)
            current = {"syncs": 0}
            opt_seen = False
    if opt_seen:
        iterations.append(current)
        current = {"syncs": 0}
    after = dict(current)
    _add(after, _delta(prev, end))
    return _summarize(iterations, evals, after, exit_code)


def _summarize(iterations: list[dict], evals: dict, after: dict, exit_code: int, **extra) -> dict:
    compiles = [it.get("compiles", 0) for it in iterations]
    compile_iters = [i for i, c in enumerate(compiles) if c]
    fallbacks: dict = {}
    for part in iterations + [evals, after]:
        for k, v in part.items():
            if k.startswith("aten::"):
                fallbacks[k] = fallbacks.get(k, 0) + v
    n = max(1, len(iterations))
    return {"exit_code": exit_code, "iterations": len(iterations),
            "compiles_per_iteration": compiles,
            "iterations_with_compiles": compile_iters,
            "last_compile_iteration": compile_iters[-1] if compile_iters else None,
            "executions_per_iteration": [it.get("executions", 0) for it in iterations],
            "d2h_per_iteration": [it.get("d2h", 0) for it in iterations],
            "h2d_per_iteration": [it.get("h2d", 0) for it in iterations],
            "syncs_per_iteration": [it.get("syncs", 0) for it in iterations],
            "d2h_mean": round(sum(it.get("d2h", 0) for it in iterations) / n, 3),
            "fallback_ops": fallbacks, "eval": evals, "after_last_iteration": after, **extra}


# --------------------------------------------------------------------------------------------------- jax
def measure_jax(script: Path, args: list[str], step_fn: str | None) -> dict:
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "0"  # the transfer guard's "log" is a C++ warning
    import logging

    import jax
    from jax._src import array as jax_array

    jax.config.update("jax_log_compiles", True)
    jax.config.update("jax_transfer_guard_host_to_device", "log")
    timeline: list[tuple] = []  # ("call", name, idx) / ("compile", name, in_call) / ("d2h",) / ("h2d", idx)
    in_call: list[str] = []
    marker = [0]

    class CompileLog(logging.Handler):
        def emit(self, record):
            m = re.match(r"Compiling (?:jit\()?([\w<>.$-]+)\)?", record.getMessage())
            if m and record.getMessage().startswith("Compiling"):
                timeline.append(("compile", m.group(1), in_call[-1] if in_call else None))

    pxla_log = logging.getLogger("jax._src.interpreters.pxla")
    pxla_log.addHandler(CompileLog())
    pxla_log.setLevel(logging.WARNING)
    pxla_log.propagate = False  # keep the script's stderr readable

    original_jit = jax.jit
    calls: dict[str, int] = {}

    class Counted:
        def __init__(self, jitted, name):
            self._jitted, self._name = jitted, name

        def __call__(self, *a, **kw):
            idx = calls.get(self._name, 0)
            calls[self._name] = idx + 1
            timeline.append(("call", self._name, idx))
            _fd_marker()
            in_call.append(self._name)
            try:
                return self._jitted(*a, **kw)
            finally:
                in_call.pop()

        def __getattr__(self, item):
            return getattr(self._jitted, item)

        def __get__(self, obj, objtype=None):  # jitted methods
            return self if obj is None else (lambda *a, **kw: self(obj, *a, **kw))

    def jit(fun=None, *a, **kw):
        if fun is None:
            return lambda f: jit(f, *a, **kw)
        name = getattr(fun, "__name__", None)
        if name is None and isinstance(fun, functools.partial):  # jit(partial(step, train=False)): step(train=False)
            bound = ", ".join(f"{k}={v!r}" for k, v in fun.keywords.items())
            name = f"{getattr(fun.func, '__name__', '?')}({bound})"
        name = name or type(fun).__name__
        return Counted(original_jit(fun, *a, **kw), name)

    jax.jit = jit

    value_prop = jax_array.ArrayImpl._value

    def counted_value(self):
        if not in_call:
            timeline.append(("d2h",))
        return value_prop.fget(self)

    jax_array.ArrayImpl._value = property(counted_value)

    # C++ transfer-guard lines go to fd 2: send fd 2 to a file, with a marker line before every jitted call
    sys.stderr.flush()
    log_file = tempfile.TemporaryFile(mode="w+b")
    saved_fd2 = os.dup(2)
    os.dup2(log_file.fileno(), 2)

    def _fd_marker():
        marker[0] += 1
        timeline.append(("marker", marker[0]))
        os.write(2, f"@@MARK {marker[0]}\n".encode())

    try:
        exit_code = _run(script, args)
    finally:
        sys.stderr.flush()
        os.dup2(saved_fd2, 2)
        os.close(saved_fd2)
        jax.jit = original_jit
        jax_array.ArrayImpl._value = value_prop
    log_file.seek(0)
    text = log_file.read().decode(errors="replace")
    # echo the script's own stderr (minus our markers and the guard's lines) so failures stay visible
    passthrough = [ln for ln in text.splitlines()
                   if not ln.startswith("@@MARK") and "host-to-device transfer" not in ln]
    if exit_code:
        sys.stderr.write("\n".join(passthrough[-40:]) + "\n")
    h2d_after_marker: dict[int, int] = {}
    current = 0
    for ln in text.splitlines():
        if ln.startswith("@@MARK "):
            current = int(ln.split()[1])
        elif "host-to-device transfer" in ln:
            h2d_after_marker[current] = h2d_after_marker.get(current, 0) + 1

    if step_fn is None:  # the most-called jitted function is the step function
        step_fn = max(calls, key=calls.get) if calls else None
    iterations: list[dict] = []
    before: dict = {"compiles": 0, "compiles_by_function": {}, "eager_compiles": {}, "d2h": 0, "h2d": 0}
    current_it = before
    h2d_total = h2d_after_marker.get(0, 0)
    before["h2d"] = h2d_total
    first_compile_call: dict[str, int] = {}
    compiles_by_function_calls: dict[str, list[int]] = {}
    call_idx: dict[str, int] = {}
    for ev in timeline:
        if ev[0] == "call":
            call_idx[ev[1]] = ev[2]
            if ev[1] == step_fn:
                current_it = {"compiles": 0, "compiles_by_function": {}, "eager_compiles": {}, "d2h": 0, "h2d": 0}
                iterations.append(current_it)
        elif ev[0] == "marker":
            current_it["h2d"] += h2d_after_marker.get(ev[1], 0)
        elif ev[0] == "d2h":
            current_it["d2h"] += 1
        elif ev[0] == "compile":
            name, owner = ev[1], ev[2]
            if owner is None:
                current_it["eager_compiles"][name] = current_it["eager_compiles"].get(name, 0) + 1
            else:
                current_it["compiles"] += 1
                current_it["compiles_by_function"][owner] = current_it["compiles_by_function"].get(owner, 0) + 1
                compiles_by_function_calls.setdefault(owner, []).append(call_idx.get(owner, 0))
                first_compile_call.setdefault(owner, call_idx.get(owner, 0))
    evals = {"calls_by_function": {k: v for k, v in calls.items() if k != step_fn}}
    after = {}
    summary = _summarize(iterations, evals, after, exit_code, step_function=step_fn,
                         calls_by_function=calls,
                         compiled_at_calls=compiles_by_function_calls,
                         eager_compiles_per_iteration=[sum(it["eager_compiles"].values()) for it in iterations],
                         eager_compiles_before_first_step=before["eager_compiles"],
                         eager_compiles_by_iteration={i: it["eager_compiles"] for i, it in enumerate(iterations)
                                                      if it["eager_compiles"]},
                         d2h_before_first_step=before["d2h"], h2d_before_first_step=before["h2d"])
    for key in ("after_last_iteration", "executions_per_iteration", "syncs_per_iteration"):
        summary.pop(key, None)  # torch_xla-only notions
    return summary


# ------------------------------------------------------------------------------------------------ common
def _run(script: Path, args: list[str]) -> int:
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    sys.argv = [str(script), *args]
    sys.path.insert(0, str(script.parent))
    try:
        runpy.run_path(str(script), run_name="__main__")
        return 0
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path


def measure(script: Path, args: list[str] | None = None, step_fn: str | None = None) -> dict:
    script = Path(script).resolve()
    backend = detect_backend(script)
    if backend == "torch_xla":
        raw = measure_torch_xla(script, list(args or []))
    else:
        raw = measure_jax(script, list(args or []), step_fn)
    return {"backend": backend, **raw}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("script")
    parser.add_argument("--json", help="write the measurement here (default: stdout)")
    parser.add_argument("--step-fn", help="JAX: name of the step function (default: the most-called jitted one)")
    parser.add_argument("args", nargs=argparse.REMAINDER)
    ns = parser.parse_args(argv)
    args = ns.args[1:] if ns.args[:1] == ["--"] else ns.args
    result = measure(Path(ns.script), args, ns.step_fn)
    text = json.dumps(result, indent=1, sort_keys=True)
    if ns.json:
        Path(ns.json).write_text(text + "\n")
    else:
        print(text)
    return 0 if result["exit_code"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
