"""torch_xla's runtime counters and metrics, read at a step boundary: one `Snapshot` per boundary, differences
between two of them make a step's record (boundaries.py)."""
from __future__ import annotations

import time

from . import _private as P
from ._private import X

SCALAR_READ = "aten::_local_scalar_dense"


def counter(name: str) -> int:
    return X._xla_counter_value(name) or 0


def launches() -> int:
    """Graphs launched so far: compiled now or taken from the compile cache."""
    return counter("UncachedCompile") + counter("CachedCompile")


def since(now: int, before: int) -> int:
    """A counter's increase. Counters can go back to zero: torch.compile's openxla backend clears them all while it
    compiles (UnsupportedNodesCollector); then what was counted since the reset is what we know."""
    return now - before if now >= before else now


def metric(name: str) -> tuple[int, float]:
    data = X._xla_metric_data(name)
    return (data[0], data[1]) if data else (0, 0.0)


def fallbacks() -> dict[str, int]:
    """CPU fallback op counters (`aten::*`), the scalar read excepted; empty where the counter list is unknown."""
    if not P.CAPS.fallback_ops:
        return {}
    return {n: counter(n) for n in X._xla_counter_names() if n.startswith("aten::") and n != SCALAR_READ}


def call_signal() -> tuple[int, int, int]:
    """Counters that move whenever a call launches a graph or copies a tensor (either way: `_to_copy` also counts
    host-to-device copies, `_to_cpu` host reads): a few plain counter reads, whatever the run's length."""
    return (counter("UncachedCompile"), counter("CachedCompile"),
            counter("xla::_to_cpu") + counter("xla::_to_copy"))


def eager_mode() -> bool:
    return bool(X._get_use_eager_mode()) if P.CAPS.eager_mode else False


class Snapshot:
    """Cumulative runtime counters at one instant. Metrics whose sample lists are long (host-to-device time,
    compile time) are only read when a cheap counter says they changed: `_xla_metric_data` copies up to 1024
    samples (~50-60 us) per call. `TransferFromDeviceTime` is the exception, read at every boundary (no counter
    is known to move with every device-to-host transfer): its copy grows with the run's host reads, to ~50 us a
    boundary once the run has made 1024 of them. `training` is the training-call counts (training_calls.py)."""

    __slots__ = ("uncached", "cached", "d2h", "d2h_ns", "d2h_bytes", "h2d", "fallbacks", "t", "backward",
                 "opt", "closure_d2h", "data_wait", "live")

    def __init__(self, prev: "Snapshot | None" = None, training=None):
        self.t = time.perf_counter()
        # each counter read once per boundary (the marker takes launches from here)
        self.uncached = counter("UncachedCompile")
        self.cached = counter("CachedCompile")
        self.d2h, self.d2h_ns = metric("TransferFromDeviceTime")  # copies its samples: see above
        if training is not None:
            self.backward, self.opt = training.backward, training.optimizer_steps
            self.closure_d2h, self.data_wait = training.closure_reads, training.data.wait
        else:
            self.backward = self.opt = self.closure_d2h = 0
            self.data_wait = 0.0
        self.h2d = counter("xla::_copy_from") + counter("DeviceDataCacheMiss")
        # live XLA tensors: torch_xla counts every XLA tensor made and destroyed
        self.live = counter("CreateXlaTensor") - counter("DestroyXlaTensor")
        if prev is not None and self.d2h == prev.d2h:
            # a CPU fallback copies its inputs to the host, so no transfer means no fallback: skip listing every
            # counter (slow under load, ~0.4 ms while the executor threads run)
            self.d2h_bytes, self.fallbacks = prev.d2h_bytes, prev.fallbacks
        else:
            self.d2h_bytes, self.fallbacks = metric("InboundData")[1], fallbacks()

    @property
    def launches(self) -> int:
        return self.uncached + self.cached
