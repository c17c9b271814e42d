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
- An evaluation loop run with autograd on, closed by its loader (MpDeviceLoader: a sync launching the last batch,
  then an idle one, at the loop's line): its last batch is the pass's last iteration, not part of the training
  iteration after it.
- A boundary that only read values (nothing launched, no training) right after an evaluation iteration, before
  training launches anything, joins that iteration: the pass's result read after its loop (`correct.item()`);
  so does a forward-only launch there at a line that is neither training's nor the pass's loop's
  (`xm.mesh_reduce` of the result).
- A phase the adapter or a recipe set on the boundary (`phase="eval"`) is kept as given.
"""
from __future__ import annotations

from dataclasses import replace
from itertools import groupby
from ..model import faults
from ..model.faults import guarded
from ..model.records import EMPTY, Boundary, Event, Shared, StepRecord, Transfers

TRAIN, EVAL = "train", "eval"
AFTER = "after"  # work after the last step boundary (never a step; only its compiles are explained)


def launched(b: StepRecord) -> bool:
    return bool(b.executions or b.compiles or b.device_to_host.count or b.fallback_ops)


def _role(b: StepRecord, training: bool, opt_run: bool) -> str:
    if not launched(b) and not (training and b.optimizer_steps):
        # an optimizer step whose graphs the counters missed (torch.compile's openxla backend runs them outside
        # the sync and clears the counters while it compiles) still ends its iteration
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
    train_lines: set = set()  # the lines training iterations' boundaries came from so far
    loop_lines: set = set()  # the lines the last evaluation iteration launched at (its loop's), before any join
    for b in boundaries:
        role = _role(b, training, opt_run)
        if role != "idle" and training:
            cut = _eval_tail(groups, pending, b)
            if cut:  # the pass's last batch, launched by its loader's closing sync: the pass's, not training's
                groups.append((EVAL, pending[:cut]))
                pending = pending[cut:]
            if groups and groups[-1][0] == EVAL and not loop_lines:
                loop_lines = {_line(p) for p in groups[-1][1] if p.executions}
            if _after_pass(b, groups, pending, train_lines, loop_lines):
                # code right after an evaluation pass, before training launches anything: the pass's result read
                # after its loop (`correct.item()`, `xm.mesh_reduce`), so it is the pass's last iteration's
                groups[-1] = (EVAL, groups[-1][1] + pending + [b])
                pending = []
                continue
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
            if groups[-1][0] == TRAIN:
                train_lines.update(_line(p) for p in groups[-1][1])
        if groups and groups[-1][0] != EVAL:
            loop_lines = set()
    if pending and (any(launched(p) for p in pending) or not groups):
        backward = any(p.backward_calls or p.optimizer_steps for p in pending)
        groups.append((TRAIN if backward or not training else EVAL, pending))
    elif pending:  # trailing idle syncs (a loader running out) belong to the last iteration
        groups[-1] = (groups[-1][0], groups[-1][1] + pending)
    return [_merge(start + i, phase, parts) for i, (phase, parts) in enumerate(groups)]


def _line(b: StepRecord) -> tuple | None:
    return (b.site.file, b.site.line) if b.site else None


def _after_pass(b: StepRecord, groups: list[tuple[str, list[StepRecord]]], pending: list[StepRecord],
                train_lines: set, loop_lines: set) -> bool:
    """`b` is code after an evaluation pass's loop (two evaluation iterations or more), before training goes on:
    nothing launched since the pass's last iteration, no backward or optimizer step, and either only a read, or (once a training iteration told its
    lines) a launch at a line that is neither training's nor the pass's loop's (`xm.mesh_reduce` of the result
    launches and reads)."""
    if len(groups) < 2 or groups[-1][0] != EVAL or groups[-2][0] != EVAL or any(launched(p) for p in pending):
        return False  # a pass is two evaluation iterations or more (one each step: a no_grad update, not a pass)
    if b.backward_calls or b.optimizer_steps or not launched(b):
        return False
    if _reads_only(b):
        return True
    return bool(train_lines) and _line(b) not in train_lines and _line(b) not in loop_lines


def _reads_only(b: StepRecord) -> bool:
    """A boundary that only read values to the host: no graph launched or compiled, no training."""
    return bool(b.device_to_host.count) and not (b.executions or b.compiles or b.fallback_ops or b.backward_calls
                                                 or b.optimizer_steps)


def _eval_tail(groups: list[tuple[str, list[StepRecord]]], pending: list[StepRecord], b: StepRecord) -> int:
    """How many of `pending` end the evaluation pass just grouped, once `b` comes from another line: an
    evaluation loop run with autograd on is cut at the next launch at its line, so its last batch waits in
    `pending`; where a loader closed the loop (torch_xla's MpDeviceLoader: a sync that launches the last batch,
    then an idle one as it runs out, both at the loop's line) those boundaries are the pass's last iteration. 0
    otherwise (a forward launched at that line and no closing sync may be the next training step's own part)."""
    if not groups or groups[-1][0] != EVAL or not pending:
        return 0
    last = next((p for p in reversed(groups[-1][1]) if launched(p)), None)
    if last is None or b.site == last.site:
        return 0
    cut, closed = 0, False
    for i, p in enumerate(pending):
        if p.backward_calls or p.optimizer_steps or p.site != last.site or (closed and launched(p)):
            break
        cut, closed = i + 1, closed or not launched(p)
    return cut if closed and any(launched(p) for p in pending[:cut]) else 0


def _merge(index: int, phase: str, parts: list[StepRecord]) -> StepRecord:
    if len(parts) == 1:
        return parts[0].copy(index=index, phase=phase, boundaries=EMPTY, events=_events(parts, stamp=False))
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
        events=_events(parts, stamp=True),
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


def _events(parts: list[StepRecord], stamp: bool) -> list[Event]:
    """An iteration's events; where it grouped several boundaries (`stamp`), each keeps the boundary it came from:
    compiles are judged per boundary slot (compiles.py). Each event is taken on its own (faults.py, point
    `evidence.KIND`): one that fails is left out and listed under profiler_errors, the iteration and its other
    events are kept."""
    if not stamp and not faults._INJECT:  # kept as they are: nothing to fail (a long run's every fold, per step)
        if type(parts[0].events) is Shared:  # one boundary's list that records share (never changed): as it is
            return parts[0].events
        return [e for p in parts for e in p.events]
    out = []
    for p in parts:
        for e in p.events:
            kept = guarded(f"evidence.{e.kind}", _stamped, e, p.index if stamp else None)
            if kept is not None:
                out.append(kept)
    return out


def _stamped(e: Event, boundary: int | None) -> Event:
    return e if boundary is None else Event(e.kind, e.location, replace(e.detail, boundary=boundary))


_TIMED = ("data_wait_s", "eager_time_s", "launch_time_s", "device_wait_s", "device_time_s", "host_cpu_s",
          "queue_wait_s", "spread_out_s", "spread_in_s",
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


def weight(s) -> int:
    """How many iterations one record (a StepRecord, or its StepRow) stands for: a folded one (fold.py) several."""
    return s.repeat


def count(its) -> int:
    """How many iterations these records stand for (a folded record stands for `repeat` of them, fold.py)."""
    return sum(s.repeat for s in its)


def total(its, key) -> float:
    """A per-iteration figure summed over the iterations these records stand for (a folded record's is a mean):
    `key` a record field (None counts 0) or a function of the record."""
    if callable(key):
        return sum(key(s) * s.repeat for s in its)
    return sum((getattr(s, key) or 0) * s.repeat for s in its)


def folded_count(its) -> int:
    """How many iterations these records stand for in folded records (those of more than one)."""
    return sum(s.repeat for s in its if s.repeat > 1)


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
