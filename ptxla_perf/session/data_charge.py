"""The stack sampler's data time (sampler.py), given to the steps it fell in."""
from __future__ import annotations

from ..model.records import StepRecord
from ..backends.sampler import DATA, StackSampler


class DataCharge:
    """A sample charges the interval since the previous one, which can reach into the step before: what does not
    fit in a step (its wall time less what was measured exactly) goes to the next one."""

    def __init__(self):
        self._sampled = 0.0  # the sampler's data seconds at the last boundary
        self._carry = 0.0  # sampled data time not yet given to a step

    def charge(self, rec: StepRecord, sampler: StackSampler) -> None:
        """`rec.sampled_data_s` and `rec.hot_lines`: what the sampler saw since the previous boundary."""
        data = sampler.seconds[DATA]
        carry = self._carry + data - self._sampled
        if carry == 0.0:  # no data time sampled (most boundaries): min(carry, room) is 0.0
            rec.sampled_data_s = 0.0
        else:
            room = max(rec.wall_time_s - rec.compile_time_s - (rec.launch_time_s or 0.0)
                       - (rec.device_wait_s or 0.0) - (rec.device_to_host_time_s or 0.0), 0.0)
            rec.sampled_data_s = min(carry, room)
        self._sampled, self._carry = data, carry - rec.sampled_data_s
        rec.hot_lines = sampler.take()
