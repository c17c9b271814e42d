"""Step boundaries -> iterations: what the report calls a step is one training (or evaluation) iteration.

An adapter reports every step boundary it sees (torch_xla: every `_xla_step_marker` call - a user's sync, a
loader's prefetch sync, StepTrace's exit; JAX: every call of the step function or annotated block). One
iteration can hold several of them, and some launch nothing. The rule (docs/report.md, "Steps are iterations"):

- A run that calls an optimizer: a training iteration ends at the first boundary after `optimizer.step()`.
  Boundaries that ran a backward pass but no optimizer step are micro-batches of the next optimizer step
  (gradient accumulation); boundaries that launched nothing (a loader's sync) join the iteration around them.
- A boundary that launched a graph with no backward and no optimizer step is evaluation when autograd was off
  (`torch.no_grad()` / `inference_mode`), or when it repeats at the same line without training in between;
  otherwise it is a piece of the training iteration that follows (a sync in the middle of the step).
- A run with no optimizer but backward passes: each backward boundary ends an iteration. Neither: each boundary
  that launched something is an iteration.
- A phase the adapter or a recipe set on the boundary (`phase="eval"`) is kept as given.
"""
from __future__ import annotations

from dataclasses import replace
from itertools import groupby
from .records import Boundary, Event, StepRecord, Transfers

TRAIN, EVAL = "train", "eval"
AFTER = "after"  # work after the last step boundary (never a step; only its compiles are explained)


def launched(b: StepRecord) -> bool:
    return bool(b.executions or b.compiles or b.device_to_host.count or b.fallback_ops)


def _role(b: StepRecord, training: bool, opt_run: bool) -> str:
    if not launched(b):
        return "idle"
    if b.phase == EVAL:
        return "eval"
    if not training or b.optimizer_steps:
        return "close"
    if b.backward_calls:
        return "micro" if opt_run else "close"
    return "eval" if b.grad_enabled is False else "launch"


def flags(boundaries: list[StepRecord]) -> tuple[bool, bool]:
    """What the grouping reads of the whole run: whether it calls an optimizer, whether it trains at all."""
    opt_run = any(b.optimizer_steps for b in boundaries)
    return opt_run, opt_run or any(b.backward_calls for b in boundaries)


def group(boundaries: list[StepRecord], run_flags: tuple[bool, bool] | None = None, start: int = 0
          ) -> list[StepRecord]:
    """Group boundary records into iteration records (see the module docstring). Each iteration keeps the
    boundaries it grouped in `boundaries` (when there was more than one). `run_flags`: `flags()` of the whole run
    where these boundaries are only its latest part (a long run's older ones are folded, fold.py), numbered from
    `start`."""
    opt_run, training = run_flags if run_flags is not None else flags(boundaries)
    groups: list[tuple[str, list[StepRecord]]] = []
    pending: list[StepRecord] = []
    for b in boundaries:
        role = _role(b, training, opt_run)
        if role == "launch":
            # a second forward-only graph at the same line with no backward in between: the earlier ones were
            # iterations of their own (an evaluation loop run with autograd on)
            same = [i for i, p in enumerate(pending) if p.site == b.site and _role(p, training, opt_run) == "launch"]
            if same and not any(p.backward_calls for p in pending):
                cut = same[-1] + 1
                groups.append((EVAL, pending[:cut]))
                pending = pending[cut:]
        if role in ("idle", "micro", "launch"):
            pending.append(b)
        elif role == "eval" and not any(p.backward_calls for p in pending):
            groups.append((EVAL, pending + [b]))
            pending = []
        elif role == "eval":
            pending.append(b)
        else:  # close
            groups.append((b.phase or TRAIN, pending + [b]))
            pending = []
    if pending and (any(launched(p) for p in pending) or not groups):
        backward = any(p.backward_calls or p.optimizer_steps for p in pending)
        groups.append((TRAIN if backward or not training else EVAL, pending))
    elif pending:  # trailing idle syncs (a loader running out) belong to the last iteration
        groups[-1] = (groups[-1][0], groups[-1][1] + pending)
    return [_merge(start + i, phase, parts) for i, (phase, parts) in enumerate(groups)]


def _merge(index: int, phase: str, parts: list[StepRecord]) -> StepRecord:
    if len(parts) == 1:
        return parts[0].copy(index=index, phase=phase, boundaries=[], events=list(parts[0].events))
    close = next((p for p in reversed(parts) if launched(p)), parts[-1])
    fallback: dict[str, int] = {}
    for p in parts:
        for op, n in p.fallback_ops.items():
            fallback[op] = fallback.get(op, 0) + n
    d2h_bytes = [p.device_to_host.bytes for p in parts]
    h2d_bytes = [p.host_to_device.bytes for p in parts]
    d2h_time = [p.device_to_host_time_s for p in parts if p.device_to_host_time_s is not None]
    grads = [p.grad_enabled for p in parts if p.grad_enabled is not None and launched(p)]
    return StepRecord(
        index=index, wall_time_s=sum(p.wall_time_s for p in parts), site=close.site,
        compiles=sum(p.compiles for p in parts), compile_time_s=sum(p.compile_time_s for p in parts),
        cached_compiles=sum(p.cached_compiles for p in parts), executions=sum(p.executions for p in parts),
        device_to_host=Transfers(sum(p.device_to_host.count for p in parts),
                                 None if None in d2h_bytes else sum(d2h_bytes)),
        host_to_device=Transfers(sum(p.host_to_device.count for p in parts),
                                 None if None in h2d_bytes else sum(h2d_bytes)),
        fallback_ops=fallback, graph_hashes=[h for p in parts for h in p.graph_hashes],
        attributed=any(p.attributed for p in parts), phase=phase,
        samples=close.samples, tokens=close.tokens, model_flops=close.model_flops,
        # each event keeps the boundary it came from: compiles are judged per boundary slot (compiles.py)
        events=[Event(e.kind, e.location, replace(e.detail, boundary=p.index)) for p in parts for e in p.events],
        own_time_us=sum(p.own_time_us for p in parts) if all(p.own_time_us is not None for p in parts) else None,
        optimizer_steps=sum(p.optimizer_steps for p in parts), backward_calls=sum(p.backward_calls for p in parts),
        grad_enabled=any(grads) if grads else None,
        early_executions=sum(p.early_executions for p in parts),
        device_to_host_time_s=sum(d2h_time) if d2h_time else None,
        closure_reads=sum(p.closure_reads for p in parts),
        boundaries=[boundary_of(p) for p in parts],
        flops=_cost_sum(parts, "flops"), bytes_accessed=_cost_sum(parts, "bytes_accessed"),
        transcendentals=_cost_sum(parts, "transcendentals"),
        eager_launches=sum(p.eager_launches for p in parts),
        live=next((p.live for p in reversed(parts) if p.live is not None), None),
        **{k: _opt_sum(parts, k) for k in _TIMED}, hot_lines=_lines_sum(parts))


_TIMED = ("data_wait_s", "eager_time_s", "launch_time_s", "device_wait_s", "device_time_s", "host_cpu_s",
          "sampled_data_s")


def _opt_sum(parts: list[StepRecord], key: str) -> float | None:
    """A measured time over an iteration's boundaries: their sum, None when no boundary measured it."""
    values = [getattr(p, key) for p in parts]
    return None if all(v is None for v in values) else sum(v or 0.0 for v in values)


def _lines_sum(parts: list[StepRecord]) -> list[dict]:
    """The sampled lines of an iteration: each (line, kind) once, its seconds summed over the boundaries."""
    out: dict[tuple, dict] = {}
    for p in parts:
        for h in p.hot_lines:
            key = (h["file"], h["line"], h["kind"])
            if key in out:
                out[key] = dict(out[key], s=out[key]["s"] + h["s"])
            else:
                out[key] = dict(h)
    return sorted(out.values(), key=lambda h: -h["s"])


def _cost_sum(parts: list[StepRecord], key: str) -> float | None:
    """An iteration's cost is the sum over its boundaries; unknown (None) when any launching boundary's is."""
    values = [getattr(p, key) for p in parts if launched(p) or getattr(p, key)]
    return None if any(v is None for v in values) else float(sum(values))


def boundary_of(b: StepRecord) -> Boundary:
    """The compact form an iteration keeps of each boundary it grouped."""
    return Boundary(b.index, b.wall_time_s, b.site, b.compiles, b.compile_time_s, b.executions, b.early_executions,
                    b.device_to_host.count, b.optimizer_steps, b.backward_calls, launched(b))


def count(its) -> int:
    """How many iterations these records stand for (a folded record stands for `repeat` of them, fold.py)."""
    return sum(s.repeat for s in its)


def total(its, key: str) -> float:
    """A per-iteration figure summed over the iterations these records stand for (a folded record's is a mean)."""
    return sum((getattr(s, key) or 0) * s.repeat for s in its)


def indices(its) -> list[int]:
    """The iteration indices these records stand for, in order (a folded variant keeps its first fold.INDICES:
    past them, the record it varies lists them as its own)."""
    out: list[int] = []
    for s in its:
        if s.index_list is not None:  # a folded variant: its iterations are spread over another record's range
            out.extend(s.index_list)
        elif s.variants:  # a folded record's range, less its variants' iterations
            other = {i for v in s.variants for i in v.index_list}
            end = s.index + s.repeat + sum(v.repeat for v in s.variants)
            out.extend(i for i in range(s.index, end) if i not in other)
        elif s.repeat == 1:
            out.append(s.index)
        else:
            out.extend(range(s.index, s.index + s.repeat))
    return out


def phase_runs(iterations: list[StepRecord]) -> list[list[StepRecord]]:
    """Unbroken runs of iterations of one phase, in order (a training stretch, an evaluation pass, ...)."""
    return [list(run) for _, run in groupby(iterations, key=lambda s: s.phase)]


def launching_boundaries(it: StepRecord) -> list[Boundary]:
    return [b for b in it.boundaries if b.launched]
