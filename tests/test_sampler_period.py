"""The stack sampler's period is drawn afresh at every wait (sampler.StackSampler._run). A fixed period resonates with
a loop whose step time is near it plus the GIL's switch interval: the sampler then asks for the GIL at the same
point of every step and gets it when the sync releases it, so that the step's own Python - its planted host block -
is never sampled (tests/test_launch_thread.py's loop, at ~13 ms a step on a fast machine, lost its planted line in
about one run of four). The draw must not touch the program's random stream."""
from __future__ import annotations

import random
import statistics

from ptxla_perf.backends.sampler import StackSampler


class _Waits:
    """Stands in for the sampler's stop event: records each wait's timeout, stops after `n` of them."""

    def __init__(self, n: int):
        self.n, self.timeouts = n, []

    def wait(self, timeout: float) -> bool:
        self.timeouts.append(timeout)
        return len(self.timeouts) >= self.n


def test_each_wait_is_drawn_around_the_interval_from_a_stream_of_its_own():
    sampler = StackSampler(interval=0.01)
    sampler._stop = _Waits(300)
    random.seed(7)
    expected = [random.random() for _ in range(3)]
    random.seed(7)
    sampler._run()  # samples this thread 299 times (nothing runs a sync here), then stops
    assert [random.random() for _ in range(3)] == expected  # the program's stream is untouched
    waits = sampler._stop.timeouts
    assert len(set(waits)) > 250, waits[:10]  # not one fixed period
    assert 0.005 <= min(waits) and max(waits) <= 0.015
    assert abs(statistics.mean(waits) - 0.01) < 0.001  # the rate is as configured (100 Hz)
