"""The training thread: the thread that runs the user's loop. Its CPU time is the breakdown's `host` part, its
waits in a loader are the `data` part, and its stack is the one the sampler reads (docs/multiprocess.md).

It is the main thread unless a launcher runs the loop elsewhere: `torch_xla.launch` calls the user's function in a
per-device worker thread of each child while the child's main thread sits idle. A session settles it where it is
known, without touching any runtime: the thread that starts the session (a launched child's session is opened by
the very thread that then calls the user's function, spawn_child.ChildTarget), then, once, the thread that calls the
first step boundary (the sync). Readers look it up at each use (`ident`, `cpu()`), so nothing is rebound.
"""
from __future__ import annotations

import functools
import threading
import time

try:
    import resource
except ImportError:  # not on Windows
    resource = None  # type: ignore[assignment]


class TrainingThread:
    """Which thread trains, and a clock of its CPU time readable from any thread."""

    __slots__ = ("ident", "name", "settled", "_clock", "_last")

    def __init__(self):
        self.reset()

    def reset(self, thread: threading.Thread | None = None) -> None:
        """A session starts: `thread` (the calling one by default) until the first step boundary settles it."""
        self.settled = False
        self._to(thread or threading.current_thread())

    def settle(self) -> bool:
        """At the first step boundary, on the thread that calls it: that thread trains. True if it changed."""
        self.settled = True
        me = threading.current_thread()
        if me.ident == self.ident:
            return False
        self._to(me)
        return True

    def cpu(self) -> float:
        """The training thread's CPU time in seconds (one clock_gettime, ~0.5 us; on the training thread itself its
        own clock, which needs no clock id and is about twice as fast); once that thread has ended (its clock id
        is gone), the last value read."""
        try:
            self._last = time.thread_time() if threading.get_ident() == self.ident else self._clock()
        except OSError:
            pass
        return self._last

    def _to(self, thread: threading.Thread) -> None:
        self.ident, self.name = thread.ident, thread.name
        self._clock = _cpu_clock(thread)
        self._last = 0.0
        self.cpu()


def _cpu_clock(thread: threading.Thread):
    """That thread's CPU clock (Linux: its pthread's clock id); where the platform has none, the calling
    thread's CPU time (right when the training thread is the one reading, as at a boundary)."""
    try:
        clock = time.pthread_getcpuclockid(thread.ident)
        time.clock_gettime(clock)
    except (AttributeError, OSError, TypeError):
        return time.thread_time
    return functools.partial(time.clock_gettime, clock)  # no Python frame of its own


TRAINING = TrainingThread()  # one per process: a process trains in one session at a time


def _switches_rusage() -> int:
    return resource.getrusage(resource.RUSAGE_THREAD).ru_nvcsw


def _switches_unknown() -> int:
    return -1


# the calling thread's voluntary context switches so far: a span whose count moved blocked - slept on a lock, a
# queue or I/O - rather than waited for a CPU (preempted on a loaded host). One syscall (Linux); elsewhere unknown
# (-1: every span counts as blocked). Its CPU time comes from time.thread_time(): getrusage's utime + stime are
# scaled from tick samples and held back to stay monotonic, so a short span can read 0 and a later one catch up.
switches = _switches_rusage if hasattr(resource, "RUSAGE_THREAD") else _switches_unknown
