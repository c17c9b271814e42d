"""When the host runs ahead of the device: one explicit wait spread back over the steps whose work it waited for.

Under asynchronous dispatch (JAX; any runtime with a queue of launched work) a loop that reads a value every N
steps launches N steps in a fraction of their time and then waits, in that one read, for all the work still queued.
Between boundaries the host's wall times say 0.9 ms, 0.9 ms, ..., 500 ms; the device paced every one of them.
Each such wait is spread back over the steps it waited for: the steps since the previous explicit wait (a device
runs its work in launch order, so a wait that returns leaves nothing launched before it queued), the device ran
their work back to back, each step for a time in proportion to its program cost (FLOPs where every one is known,
else its executions, else equally), so the wait tops each step's host time up to that common pace (water-filling): a
step the host already took longer over (it compiled; a full queue of in-flight work throttled its call) gets no
share. A step's time is then its own host time plus its share (`breakdown.paced_wall`), and the share is its
`device` part: the sum over the steps is unchanged, and a synchronous loop (a wait every step) is unchanged too.

Only records whose adapter dispatches into a queue it measures (`queue_wait_s`: JAX) are spread: torch_xla's sync
waits for the graph before it at every boundary, and a read there forces the step's own graph to run (its own time).

Records only, backend-neutral: `spread` sets `spread_out_s` / `spread_in_s` on boundary records in place, from
their measured fields alone, so it is idempotent (run again on the same records, as the fold and the analysis both
do, it changes nothing). The steps after the last wait (no wait ended them yet) keep their host times.
"""
from __future__ import annotations

from typing import Iterable

from . import iterations as I
from ..model.records import StepRecord

MAX_GROUP = 1024  # steps one wait is spread over at most (a longer run of waitless steps: its latest ones)


def explicit_wait(s: StepRecord) -> float:
    """The time the host waited for the device on purpose: reads and block_until_ready / the sync's wait."""
    return (s.device_to_host_time_s or 0.0) + (s.device_wait_s or 0.0)


def spread(records: Iterable[StepRecord], tail: StepRecord | None = None) -> None:
    """Spread each explicit wait that ends a run of two or more steps over that run (module docstring). `tail`:
    the work after the last step (no step: a final read or block_until_ready after the loop), whose wait is
    spread over the steps since the last wait inside the loop."""
    group: list[StepRecord] = []
    for r in records:
        if I.weight(r) > 1 or r.spread_in_s is not None or r.queue_wait_s is None:
            group = []  # folded or spread already (its run was settled), or no queue (a synchronous backend)
            continue
        group.append(r)
        wait = explicit_wait(r)
        if wait <= 0.0:
            continue
        if len(group) >= 2:
            _share(group[-MAX_GROUP:], wait, r)
        group = []
    if (group and tail is not None and tail.queue_wait_s is not None and tail.spread_out_s is None
            and explicit_wait(tail) > 0.0):
        _share(group[-MAX_GROUP:], explicit_wait(tail), tail)


def _share(group: list[StepRecord], wait: float, drain: StepRecord) -> None:
    """Water-filling: the device ran the group's work back to back, each step for a time in proportion to its cost,
    while the host launched it. A step whose host time already exceeds that pace (it compiled, or a full queue
    throttled its call) was paced by the host and gets no share; the wait tops the others up to the device's
    common pace `level * weight`. A loop whose host ran ahead for every step gets the proportional split; one whose
    queue filled half way does not have the wait piled onto its already device-paced steps."""
    weights = _weights(group)
    own = [r.wall_time_s for r in group]  # each step's host time; the drain's without the wait it spreads
    if group[-1] is drain:
        own[-1] = max(own[-1] - wait, 0.0)
    for r, share in zip(group, _fill(own, weights, wait)):
        r.spread_in_s = share
        r.spread_out_s = 0.0
    drain.spread_out_s = wait


def _fill(own: list[float], weights: list[float], wait: float) -> list[float]:
    """Shares s_i >= 0 summing to `wait` with own_i + s_i = max(own_i, level * w_i) (one level for all)."""
    order = sorted(range(len(own)), key=lambda i: own[i] / weights[i])
    level, base, mass = 0.0, 0.0, 0.0
    for k, i in enumerate(order):
        base, mass = base + own[i], mass + weights[i]
        level = (wait + base) / mass
        if k + 1 == len(order) or level <= own[order[k + 1]] / weights[order[k + 1]]:
            break
    return [max(level * w - o, 0.0) for o, w in zip(own, weights)]


def _weights(group: list[StepRecord]) -> list[float]:
    flops = [r.flops for r in group]
    if all(f is not None and f > 0 for f in flops):
        return [float(f) for f in flops]
    execs = [r.executions for r in group]
    if all(e > 0 for e in execs):
        return [float(e) for e in execs]
    return [1.0] * len(group)
