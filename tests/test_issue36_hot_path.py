"""Issue 36: the per-call paths made cheaper keep what they record. A NumPy array passed to a jitted call as it is
(scanned inline, transfers.scan) is counted exactly as one inside a container (the general path), and the same
array passed again is a repeated buffer; StepRecord.copy (every fold copies a long run's boundaries) keeps every
field and applies its changes."""
from __future__ import annotations

from dataclasses import fields

import pytest

from ptxla_perf.model.records import StepRecord, evidence_json

jax = pytest.importorskip("jax")
np = pytest.importorskip("numpy")


def _parts():
    from ptxla_perf.backends.jax import _private as P
    from ptxla_perf.backends.jax.ledger import Ledger, Scope
    from ptxla_perf.backends.jax.ready import ReadyWatch
    from ptxla_perf.backends.jax.transfers import Transfers
    led = Ledger(lines=True)
    return led, Transfers(led, Scope(), ReadyWatch(P.ArrayImpl.__dict__["block_until_ready"]))


def _info(fun):
    from ptxla_perf.backends.jax.jitted import JitInfo
    return JitInfo(jax.jit(fun), fun, {})


def _scanned(transfers, led, info, *args):
    """The transfer evidence of one call's arguments (no frame: every array is data)."""
    transfers.scan(info, args, {}, None)
    events = led.take()
    return events[0].detail if events else None


def test_an_array_passed_as_it_is_is_counted_as_one_inside_a_container():
    x = np.ones((4, 8), np.float32)
    y = np.zeros((4, 2), np.float32)
    led, transfers = _parts()
    inline = _scanned(transfers, led, _info(lambda a, b: a + b.sum()), x, y)
    led2, transfers2 = _parts()
    nested = _scanned(transfers2, led2, _info(lambda t: t[0] + t[1].sum()), (x, y))
    assert inline is not None and nested is not None
    assert {k: v for k, v in evidence_json(inline).items() if k != "call"} == \
        {k: v for k, v in evidence_json(nested).items() if k != "call"}
    assert inline.transfers == 2 and inline.bytes == x.nbytes + y.nbytes
    assert inline.shapes == [[4, 8], [4, 2]] and inline.source == ["numpy"]
    assert inline.origins == {"data": x.nbytes + y.nbytes} and not inline.avoidable
    assert (led.h2d, led.h2d_bytes) == (2, x.nbytes + y.nbytes)


def test_the_same_array_passed_again_is_a_repeated_buffer_a_fresh_one_is_not():
    led, transfers = _parts()
    info = _info(lambda a, b: a + b.sum())
    x = np.ones((4, 8), np.float32)
    first = _scanned(transfers, led, info, x, np.zeros((4, 2), np.float32))
    again = _scanned(transfers, led, info, x, np.zeros((4, 2), np.float32))  # x again, a fresh second array
    fresh = _scanned(transfers, led, info, x.copy(), np.zeros((4, 2), np.float32))
    assert first.repeated_buffers == 0 and not first.avoidable
    assert again.repeated_buffers == 1 and again.avoidable  # the same host buffer copied again
    assert fresh.repeated_buffers == 0 and not fresh.avoidable


def test_a_record_copy_keeps_every_field_and_applies_its_changes():
    rec = StepRecord(index=0, wall_time_s=0.0)
    values = {f.name: object() for f in fields(StepRecord)}  # a distinct object per field
    for name, value in values.items():
        setattr(rec, name, value)
    changes = {"index": 7, "phase": "eval", "events": []}
    copy = rec.copy(**changes)
    assert copy is not rec
    for name, value in values.items():
        assert getattr(copy, name) is changes.get(name, value), name
        assert getattr(rec, name) is value, name  # the original is untouched
