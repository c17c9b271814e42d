"""A long run's steady iterations, folded (docs/report.md#step-retention): memory and analysis bounded at any length.

Past `fold_after` step boundaries the session groups the older boundaries into iterations here and keeps each
one that is plain - a training iteration with no compile, no attribution, no event but host reads, no CPU fallback,
no early or eager launch, one launching boundary at most, not an outlier - folded into the record before it when the
two agree on every count (site, graphs, reads and their lines, transfers, optimizer and backward calls). A folded
record stands for `repeat` consecutive iterations:

- its counts are each one's (the same in all of them), its timed fields their mean, `hot_lines` summed, `live` the
  last sample;
- `parts`: the exact mean of their time breakdowns (breakdown.components);
- `sample`: per-iteration figures (step time, host time, data wait, own time, breakdown parts) of up to `SAMPLE` of
  them, each standing for repeat/len(sample) iterations: what the run's percentiles and the rules' per-step shares
  are taken from (exact while a record holds at most SAMPLE iterations; a stride sample beyond).

Every other iteration stays in full. When there are more than `max_records` records, neighbours that agree merge
pairwise, so the number of records stays bounded however long the run: iterations are never dropped, only summed,
and the analysis reads the weights (`StepRecord.repeat`, iterations.count). Nothing here runs per step: the session
folds once every few thousand boundaries."""
from __future__ import annotations

import math
from array import array
from dataclasses import replace
from operator import attrgetter, is_
from typing import Sequence

from . import breakdown as B
from . import iterations as I
from .pacing import spread
from ..model.records import Event, Shared, StepRecord

INDICES = 1024  # iteration indices a variant keeps (int64; its count is exact)
SAMPLE = 64  # per-iteration figures a folded record keeps (a stride sample beyond: 2000 records x 64 x 48 B = 6 MB)
FIELDS = ("step", "host_time", "data_wait", "own", *B.COMPONENTS)  # a sample's figures in order (float32; NaN: none)
_NAN = float("nan")
_NONE_PARTS = [_NAN] * len(B.COMPONENTS)
# events a folded record may hold: rules that read them weigh by repeat (a read every N steps; a fresh NumPy batch
# copied into every call, JAX's usual input pipeline: a long run of it folds like any other)
FOLDED_EVENTS = {"device_to_host_sync", "host_to_device_transfer"}
_MEANS = ("wall_time_s", "device_to_host_time_s", "data_wait_s", "launch_time_s", "device_wait_s", "device_time_s",
          "host_cpu_s", "sampled_data_s", "own_time_us", "flops", "bytes_accessed", "transcendentals",
          "queue_wait_s", "spread_out_s", "spread_in_s")
_MEAN_VALUES = attrgetter(*_MEANS)  # a record's _MEANS in one call
_NONES = (None,) * len(_MEANS)
_SHARED_KEYS: dict[int, tuple] = {}  # id(a Shared events list) -> (the list, its events' keys)


def plain(s: StepRecord) -> bool:
    """An iteration that says nothing of its own beyond its counts and times: it can be one of many."""
    return (s.phase in (None, I.TRAIN) and not s.compiles and not s.attributed
            and all(e.kind in FOLDED_EVENTS for e in s.events) and not s.fallback_ops and not s.early_executions
            and not s.closure_reads and s.eager_time_s is None and not s.eager_launches
            and len(I.launching_boundaries(s)) <= 1)


def shape(s: StepRecord) -> tuple:
    """What iterations of one folded record's range share: the step itself (its sync, graphs, optimizer and
    backward calls). Those that also agree on their reads, transfers and events (`signature`) fold together;
    the others of the range are its variants (a logging read every N steps)."""
    return (s.phase, s.site and (s.site.file, s.site.line), s.executions, s.cached_compiles, tuple(s.graph_hashes),
            s.optimizer_steps, s.backward_calls, s.grad_enabled, len(s.boundaries), s.samples, s.tokens,
            s.model_flops)


def signature(s: StepRecord) -> tuple:
    """What folded iterations share exactly: every count a rule or a figure reads."""
    return (shape(s), s.device_to_host.count, s.device_to_host.bytes is None, s.host_to_device.count,
            s.host_to_device.bytes is None, tuple(map(is_, _MEAN_VALUES(s), _NONES)), _events_key(s.events))


def _events_key(events: list) -> tuple:
    """The events' keys in order. A list that steady records share (records.Shared: never changed) is keyed once
    per fold, not once per iteration."""
    if type(events) is not Shared:
        return tuple(_event_key(e) for e in events)
    hit = _SHARED_KEYS.get(id(events))
    if hit is None or hit[0] is not events:
        if len(_SHARED_KEYS) >= 64:
            _SHARED_KEYS.clear()
        hit = _SHARED_KEYS[id(events)] = (events, tuple(_event_key(e) for e in events))
    return hit[1]


def _event_key(e) -> tuple:
    """What an event of a folded record shares with the iterations it stands for: where and what it read or
    copied, how often and how many bytes; a transfer's kind of data too (the rule tells an avoidable copy from a
    batch by it). An eager upload's time is not in it: the folded record's is their mean (_absorb)."""
    d = e.detail
    key = (e.kind, e.location and (e.location.file, e.location.line), getattr(d, "call", None),
           getattr(d, "closure", None), getattr(d, "transfers", None), getattr(d, "bytes", None))
    if e.kind == "host_to_device_transfer":
        key += (d.avoidable, d.eager, d.repeated_buffers, tuple(sorted((d.origins or {}).items())))
    return key


def sample_of(s: StepRecord, parts: dict | None = None) -> array:
    """One iteration's figures as a folded record's `sample` keeps them (FIELDS: step time, host time, data wait,
    own time µs, the breakdown's `parts`). Folded iterations compile nothing and are not attributed, so the step
    time is its paced wall time (figures.step_time_s)."""
    wall = B.paced_wall(s)
    host = _NAN if s.device_to_host_time_s is None else max(s.wall_time_s - s.device_to_host_time_s, 0.0)
    head = [wall, host, _NAN if s.data_wait_s is None else s.data_wait_s,
            _NAN if s.own_time_us is None else s.own_time_us]
    return array("f", head + ([parts[c] for c in B.COMPONENTS] if parts is not None else _NONE_PARTS))


def column(s: StepRecord, name: str) -> list[float | None]:
    """One FIELDS figure of a folded record's sampled iterations (None where not measured); each stands for
    s.repeat / len of the record's iterations."""
    width, at = len(FIELDS), FIELDS.index(name)
    return [None if math.isnan(v) else v for v in s.sample[at::width]]


def sampled(s: StepRecord) -> int:
    return len(s.sample) // len(FIELDS)


class Folded:
    """The folded part of a run: iteration records in order, each standing for `repeat` iterations."""

    def __init__(self, max_records: int = 2000, outlier_ratio: float = 3.0):
        self.records: list[StepRecord] = []
        self.max_records = max_records
        self.outlier_ratio = outlier_ratio
        self.width = 64  # the most iterations one record folds (doubles as records merge)
        self.iterations = 0  # every iteration folded here, plain or not
        self.flags: tuple[bool, bool] | None = None  # iterations.flags() of the run when it first folded
        self._sig: tuple | None = None  # the last record's signature, while it can take more

    def take(self, boundaries: list[StepRecord], window: int) -> list[StepRecord]:
        """Fold the iterations of all but the latest `window` of these step boundaries (the run's boundaries
        since the last fold); return the boundaries still held (whole iterations, at least `window` of them). The
        grouping's whole-run facts (iterations.flags: an optimizer, training) are those of the boundaries seen at
        the first fold, kept for the rest of the run."""
        spread(boundaries)  # before their means are taken: a wait spread later would miss the folded steps
        if self.flags is None:
            self.flags = I.flags(boundaries)
        its = I.group(boundaries, self.flags, self.iterations)
        keep, cut = 0, len(its)
        while cut > 1 and keep < window:
            cut -= 1
            keep += max(1, len(its[cut].boundaries))
        if cut < 1:
            return boundaries
        self.add(its[:cut])
        return boundaries[len(boundaries) - keep:]

    def add(self, its: Sequence[StepRecord]) -> None:
        """Append grouped iterations (indexed as the run's iterations): plain ones fold into the last record."""
        for s in its:
            self.iterations += 1
            last = self.records[-1] if self.records else None
            if not plain(s):
                self.records.append(s)
                self._sig = None
                continue
            sig = signature(s)
            if (last is not None and self._sig is not None and sig[0] == self._sig[0] and span(last) < self.width
                    and B.paced_wall(s) <= self.outlier_ratio * B.paced_wall(last)
                    and B.paced_wall(last) <= self.outlier_ratio * max(B.paced_wall(s), 1e-9)):
                _absorb(last, s) if sig == self._sig else _vary(last, s, sig)
            else:
                self.records.append(_start(s))
                self._sig = sig
        if len(self.records) > self.max_records:
            self._coarsen()

    def _coarsen(self) -> None:
        """Merge neighbours until the records are at most 3/4 of `max_records`: each folded record absorbs the
        next when both are folded, contiguous and of one shape (the next one's own iterations become a variant
        where their reads or events differ) and their iterations fit `width`, which doubles only when a pass at
        the current width cannot merge enough (records split by outliers merge first)."""
        doubled = False
        while True:
            before = len(self.records)
            self.records = self._merged()
            if len(self.records) <= 3 * self.max_records // 4:
                break
            if len(self.records) == before:
                if doubled:  # nothing merges even so (neighbours differ in shape): the next fold tries again
                    self.max_records = max(self.max_records, len(self.records) + len(self.records) // 2)
                    break
                self.width *= 2
            doubled = len(self.records) == before
        last = self.records[-1] if self.records and self.records[-1].sample is not None else None
        self._sig = signature(last) if last is not None else None

    def _merged(self) -> list[StepRecord]:
        out: list[StepRecord] = []
        for s in self.records:
            last = out[-1] if out else None
            if (last is not None and last.sample is not None and s.sample is not None
                    and span(last) + span(s) <= self.width and shape(last) == shape(s)
                    and last.index + span(last) == s.index):
                own = I.indices([s])  # its own iterations: its range less its variants'
                variants, s.variants = s.variants or [], None
                sig = signature(s)
                _absorb(last, s) if sig == signature(last) else _vary(last, s, sig, own)
                for v in variants:
                    _vary(last, v, signature(v))
            else:
                out.append(s)
        return out

    def expanded(self) -> list[StepRecord]:
        """The records as the analysis reads them: each folded record, then its variants (index_list)."""
        out: list[StepRecord] = []
        for s in self.records:
            out.append(s)
            if s.variants:
                out.extend(s.variants)
        return out


def span(s: StepRecord) -> int:
    """The iterations in a folded record's range: its own and its variants'."""
    return s.repeat + sum(v.repeat for v in s.variants or ())


def _vary(into: StepRecord, s: StepRecord, sig: tuple, indices: Sequence[int] | None = None) -> None:
    """`s` (an iteration, or a folded record: `indices` its iterations) is in `into`'s range but differs in its
    reads, transfers or events: it folds into the variant of its signature there."""
    if into.variants is None:
        into.variants = []
    if indices is None:
        indices = s.index_list if s.index_list is not None else range(s.index, s.index + s.repeat)
    for v in into.variants:
        if signature(v) == sig:
            _absorb(v, s)
            v.index_list.extend(indices[:max(INDICES - len(v.index_list), 0)])
            return
    v = _start(s) if s.sample is None else s
    v.index_list = array("q", indices[:INDICES])
    into.variants.append(v)


def _start(s: StepRecord) -> StepRecord:
    """A plain iteration as the first of a folded record (its own copy: lists are not shared; its own events too,
    whose evidence steady records share: the rules weigh a folded record's events by the event, `id(event)`)."""
    out = s.copy(boundaries=list(s.boundaries), hot_lines=[dict(h) for h in s.hot_lines],
                 events=[Event(e.kind, e.location, e.detail) for e in s.events],
                 graph_hashes=list(s.graph_hashes), fallback_ops={},
                 device_to_host=replace(s.device_to_host), host_to_device=replace(s.host_to_device))
    out.parts = B.components(s)
    out.sample = sample_of(s, out.parts)
    out.step_range = (B.paced_wall(s),) * 2
    return out


def _absorb(into: StepRecord, s: StepRecord) -> None:
    """`s` (an iteration, or a folded record) joins `into`: means weighted by repeat, samples joined."""
    n, k = into.repeat, s.repeat
    total = n + k
    for key, a, b in zip(_MEANS, _MEAN_VALUES(into), _MEAN_VALUES(s)):
        if a is not None and b is not None:
            setattr(into, key, (a * n + b * k) / total)
    for t, v in ((into.device_to_host, s.device_to_host), (into.host_to_device, s.host_to_device)):
        if t.bytes is not None and v.bytes is not None and t.bytes != v.bytes:
            t.bytes = round((t.bytes * n + v.bytes * k) / total)
    folded = s.sample is not None
    parts = s.parts if folded else B.components(s)
    if into.parts is not None and parts is not None:
        into.parts = {c: (into.parts[c] * n + parts[c] * k) / total for c in into.parts}
    into.sample.extend(s.sample if folded else sample_of(s, parts))
    width = len(FIELDS)
    if len(into.sample) > SAMPLE * width:  # every other sampled iteration: a stride sample of the record
        into.sample = array("f", [v for i in range(0, len(into.sample), 2 * width)
                                  for v in into.sample[i:i + width]])
    lo, hi = s.step_range if folded else (B.paced_wall(s),) * 2
    if lo < into.step_range[0] or hi > into.step_range[1]:
        into.step_range = (min(into.step_range[0], lo), max(into.step_range[1], hi))
    if s.hot_lines:
        lines = {(h["file"], h["line"], h["kind"]): h for h in into.hot_lines}
        for h in s.hot_lines:
            key = (h["file"], h["line"], h["kind"])
            if key in lines:
                lines[key]["s"] += h["s"]
            else:
                lines[key] = dict(h)
                into.hot_lines.append(lines[key])
    if s.live is not None:
        into.live = s.live
    for i, (a, b) in enumerate(zip(into.events, s.events)):  # the same events (one signature): eager uploads' time
        if a.detail is b.detail:  # one evidence (a steady loop's, shared): the same time
            continue
        ta, tb = getattr(a.detail, "seconds", None), getattr(b.detail, "seconds", None)
        if ta is not None and tb is not None and ta != tb:  # their mean, in an event of the record's own
            into.events[i] = Event(a.kind, a.location, replace(a.detail, seconds=(ta * n + tb * k) / total))
    into.repeat = total
