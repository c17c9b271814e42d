"""A report's line is always a number. Since Python 3.11 a frame's `f_lineno` is None while it runs an
instruction the compiler gave no line (the cleanup after `except ... as e:`); a stack sample landing there wrote
`"line": null` into a step's `hot_lines` and the report failed its own schema (CI, test_recipe_mmf under load).
Here real frames are stopped at such instructions by an opcode tracer and every way we read a frame's line is
asked about them."""
from __future__ import annotations

import sys

import pytest

from ptxla_perf.backends import sampler
from ptxla_perf.frames import line_of, user_frame


def _cleanup_after_except():  # the frames we stop in
    try:
        raise ValueError("x")
    except ValueError as e:
        kept = str(e)
    return kept


def _lineless_frames(seen: list) -> None:
    """Run `_cleanup_after_except` under an opcode tracer; `seen` gets what each reader says at every
    instruction of it that has no line (read while the frame runs that instruction)."""
    code = _cleanup_after_except.__code__

    def tracer(frame, event, arg):
        if frame.f_code is code:
            frame.f_trace_opcodes = True
            if frame.f_lineno is None:
                chain = sampler._chain(frame)
                s = sampler.StackSampler()
                s._sample(chain, 0.01)
                seen.append((line_of(frame), chain[0][1], user_frame(frame)[0].line, s.take()))
        return tracer

    sys.settrace(tracer)
    try:
        _cleanup_after_except()
    finally:
        sys.settrace(None)


def test_a_frame_at_an_instruction_without_a_line_is_given_the_line_before_it():
    seen: list = []
    _lineless_frames(seen)
    if sys.version_info[:2] in ((3, 10), (3, 12)) and not seen:
        pytest.skip("this Python gives every instruction of the function a line")  # 3.11 and 3.13 do not
    assert seen, "no instruction without a line was run (the compiler changed?)"
    first = _cleanup_after_except.__code__.co_firstlineno
    last = first + 6
    for own, chained, located, lines in seen:
        assert isinstance(own, int) and first <= own <= last
        assert chained == own and located == own
        assert lines and all(isinstance(h["line"], int) for h in lines), lines
