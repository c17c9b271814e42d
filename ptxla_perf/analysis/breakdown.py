"""Where a step's time goes: each iteration's wall time split into components that sum to it, derived once from
what the adapters measured on the record (figures.py reads it from here; docs/report.md has the model).

    wall = data + host + launch + compile + read_wait + device + profiler + other

"The main thread" below is the training thread (training_thread.py): the main thread, or the worker thread a
launcher runs the loop in (a `torch_xla.launch` child).

- `data`: waiting for the next batch (the loader's `next()` timed on the main thread, `session.data_wait()`, or
  the stack sampler's estimate for a generator the loop pulls from);
- `compile`: compile time measured in the step;
- `read_wait`: in device-to-host reads (blocked until the device finished, plus the copy);
- `launch`: inside the step boundary call (torch_xla: the sync - hashing, lowering, launching the graph) or the
  jitted calls (JAX: dispatch), on the CPU, net of compile;
- `device`: blocked inside the sync call, or in `xm.wait_device_ops()`, until the device finished the graph before
  (torch_xla; at most that graph's measured busy time); JAX: the main thread's time in `block_until_ready` (reads
  stay `read_wait`) and inside jitted calls beyond their CPU time (`queue_wait_s`: a full queue of in-flight
  executions). Where the host ran ahead and one explicit wait (a read every N steps) waited for several steps'
  queued work, that wait is spread back over those steps (pacing.py: `spread_out_s` / `spread_in_s`) and is their
  `device` part: each such iteration's time is `paced_wall`, not the host's wall between its boundaries. The
  device's own busy time (`device_time_s`: torch_xla every step, JAX sampled steps) is not a part of the wall time:
  it overlaps the host's;
- `host`: the main thread's CPU time outside those (the user's Python and graph tracing), at most what is left;
- `profiler`: ptxla_perf's own time at the step boundary (`own_time_us`: bookkeeping, and on attribution steps the
  graph capture and heap scan), measured: not the program's time, and never counted as its step time;
- `other`: the rest: the main thread neither ran nor waited anywhere measured (sleeping, blocking I/O, waiting for
  the CPU on a loaded host).

Measured parts that overlap (a read inside the loader) are scaled down to the wall time: the sum always holds.
Pure logic on records: the rules (rules/iteration.py), the summary and every view read these figures.
"""
from __future__ import annotations

from typing import Any, Iterable

from . import iterations as I
from ..model.fmt import ms
from ..model.records import StepRecord

DATA_SITE = "data_site"  # sampler.py: the loop's own line that pulls the next batch
COMPONENTS = ("data", "host", "launch", "compile", "read_wait", "device", "profiler", "other")
# the console's words: `device` is the time the host waited for the device (the roofline's "device busy" is the
# device's whole busy time, which includes work overlapped with the host)
LABELS = {"read_wait": "read wait", "profiler": "ptxla_perf", "device": "device wait"}
_MEASURED = ("data", "compile", "read_wait", "launch", "device")


def measured(s: StepRecord) -> bool:
    """The adapter measured this iteration's parts (reports and records from before the breakdown did not)."""
    return s.launch_time_s is not None or s.host_cpu_s is not None


def data_s(s: StepRecord) -> float | None:
    """The step's wait for input: timed exactly where the loop's loader was (or the program timed it), else
    the stack sampler's estimate; None where neither was measured."""
    return s.data_wait_s if s.data_wait_s is not None else s.sampled_data_s


def paced_wall(s: StepRecord) -> float:
    """The iteration's time as the device paced it: its wall time, less the explicit waits spread over the steps
    they waited for, plus its share of such waits (pacing.py). The wall time where nothing was spread."""
    if s.spread_in_s is None and s.spread_out_s is None:
        return s.wall_time_s
    return max(s.wall_time_s - (s.spread_out_s or 0.0) + (s.spread_in_s or 0.0), 0.0)


def step_time_s(s: StepRecord) -> float:
    """An iteration's step time: its wall time net of the compile time measured in it and, on an iteration that
    compiled or was attributed, of ptxla_perf's own time at its boundaries (the graph capture there can exceed the
    compile it sits beside). A steady iteration's own time (tens of µs of bookkeeping) stays in: its step time is
    its wall time, as every view plots it."""
    own = (s.own_time_us or 0.0) / 1e6 if (s.compiles or s.attributed) else 0.0
    return max(paced_wall(s) - s.compile_time_s - own, 0.0)


def host_time_s(s: StepRecord) -> float | None:
    """The part of an iteration the host kept itself busy: its wall time minus the time it waited in
    device-to-host reads (None where the wait was not measured)."""
    if s.device_to_host_time_s is None:
        return None
    return max(s.wall_time_s - s.device_to_host_time_s, 0.0)  # the host's own: a spread wait is none of it


def waits(s: StepRecord) -> tuple[float, float]:
    """(read wait, device wait) of the iteration: its explicit waits less what was spread out of them (reads first),
    and its queue waits plus its share of spread waits in the device's."""
    read, dev = s.device_to_host_time_s or 0.0, s.device_wait_s or 0.0
    out = s.spread_out_s or 0.0
    moved = min(read, out)
    return read - moved, max(dev - (out - moved), 0.0) + (s.queue_wait_s or 0.0) + (s.spread_in_s or 0.0)


def components(s: StepRecord) -> dict[str, float] | None:
    """The iteration's time (`paced_wall`) split into COMPONENTS (seconds; they sum to it), or None where the
    adapter did not measure them. One iteration's (a folded record's parts are its iterations' mean: iterset.py).
    Written out part by part: a long run's folding takes every iteration's (fold.py)."""
    if not measured(s):
        return None
    wall = max(float(paced_wall(s)), 0.0)
    read, dev = waits(s)
    own = (s.own_time_us or 0.0) / 1e6
    data, comp = max(float(data_s(s) or 0.0), 0.0), max(float(s.compile_time_s or 0.0), 0.0)
    read = max(float(read), 0.0)
    launch, dev, prof = max(float(s.launch_time_s or 0.0), 0.0), max(float(dev), 0.0), max(float(own), 0.0)
    total = data + comp + read + launch + dev + prof
    if total > wall:  # overlapping measurements: scaled to the wall time, the sum holds
        scale = wall / total if total else 0.0
        data, comp, read, launch, dev, prof = (data * scale, comp * scale, read * scale, launch * scale,
                                               dev * scale, prof * scale)
        total = wall
    rest = max(wall - total, 0.0)
    # ptxla_perf's own CPU time at the boundary is in host_cpu_s: not the user's
    host = rest if s.host_cpu_s is None else min(max(float(s.host_cpu_s) - own, 0.0), rest)
    return {"data": data, "host": host, "launch": launch, "compile": comp, "read_wait": read, "device": dev,
            "profiler": prof, "other": rest - host}


def rounded(parts: dict[str, float] | None) -> dict[str, float] | None:
    return {k: round(v, 7) for k, v in parts.items()} if parts is not None else None


def label(component: str) -> str:
    return LABELS.get(component, component)


def line(summary: dict[str, Any] | None, limit: int = 6) -> str | None:
    """The console's line: `data 20.1 ms (87%) · host 1.2 · launch 0.30 · device 1.0 · read wait 0.10` - the
    largest component first with its share, the others in ms; parts under 1 % and 0.05 ms left out."""
    if not summary:
        return None
    comp, share = summary["components_s"], summary["share"]
    order = sorted(COMPONENTS, key=lambda k: -comp[k])
    shown = [k for k in order if comp[k] >= 5e-5 or share[k] >= 0.01][:limit] or order[:1]
    first = shown[0]
    parts = [f"{label(first)} {ms(comp[first])} ({share[first]:.0%})"]
    parts += [f"{label(k)} {ms(comp[k], unit=False)}" for k in shown[1:]]
    return " · ".join(parts)



# --- lines: where sampled time went, over a set of iterations -------------------------------------------------
def top_lines(steps: Iterable[StepRecord], kinds: tuple[str, ...], limit: int = 3) -> list[dict[str, Any]]:
    """The sampled lines of these kinds over the iterations, most time first: file, line, function, kind,
    seconds in all and per iteration."""
    steps = list(steps)
    total: dict[tuple, dict] = {}
    for s in steps:
        for h in s.hot_lines:
            if h["kind"] not in kinds:
                continue
            key = (h["file"], h["line"])
            row = total.setdefault(key, {"file": h["file"], "line": h["line"], "function": h["function"],
                                         "kind": h["kind"], "s": 0.0})
            row["s"] += h["s"]
    rows = sorted(total.values(), key=lambda r: -r["s"])[:limit]
    n = max(1, I.count(steps))
    return [dict(r, s=round(r["s"], 6), ms_per_step=round(r["s"] / n * 1e3, 3)) for r in rows]
