"""Where the training thread's host time goes, line by line: a low-rate sampler of its stack (docs/report.md,
"Where a step's time goes"). The training thread is the main thread, or the worker thread a launcher runs the
user's function in (training_thread.py); "the main thread" below is that thread.

A daemon thread wakes every `interval` seconds on average (100 Hz by default; each wait is drawn between half and
one and a half intervals, from a generator of its own: a loop whose step time resonates with a fixed period would be
sampled at the same point of every step - under a sync, where the GIL is handed over - and its own lines never
seen), reads the training thread's innermost frame
(`sys._current_frames()`: no tracing hook, nothing runs on the training thread) and charges the time since its
last sample to one kind:

- `call`: the main thread is inside the step boundary call or a jitted call (a frame of the adapter's own wrapper
  is on the stack: `codes`; that time is measured exactly as launch / compile / device wait, so no line is kept);
- `data`: it is pulling the next batch: inside the loader's `next()` (the adapter's timing wrapper), in a frame of
  `torch.utils.data`, or in a generator / `__next__` / `__getitem__` that the loop's own frames called (the frames
  the step boundaries were called from: the loop that pulls a batch is one of them);
- `framework`: the innermost frame is torch, torch_xla, JAX, ptxla_perf or another installed library (tracing,
  dispatch, hooks, a model zoo's Python);
- `user`: the innermost frame is the user's own code (C calls it makes - NumPy, a sleep - included).

Each sample also keeps the innermost user line (for `data`, the line inside `__getitem__` or the generator; and the
loop's own line that pulls the batch, kind `data_site`). Where the main thread waits for a batch that another
thread loads (torch_xla's `MpDeviceLoader` / `ParallelLoader`, a prefetching generator's thread), it is blocked in
a library's call (a queue's get) and its own stack names only the loop or the generator that waits: the `data` line is then the innermost user line of the threads feeding it (a thread with
the user's code under a data-loading frame: `torch.utils.data`, torch_xla's parallel loader, a generator,
`__getitem__` / `__next__`), read from the same `sys._current_frames()` snapshot. At each step boundary the session takes the lines sampled
since the previous one (`take`): a step's `hot_lines`, its top few per kind. The data time it sampled is the
step's `sampled_data_s` where no loader was timed exactly (a Python generator feeding a JAX loop).
A sample costs the sampling thread ~10-30 us of GIL per 10 ms; the training thread runs no code of ours for it.

A sample holds frames of other threads (a frame object that outlives its call keeps the call's locals alive), so it
runs only while no torch_xla sync does (`FrameGate`): a sync would take a returned call's tensors as extra graph
outputs (another graph, a compile).

On Python 3.11 a frame object is made when it is first asked for (`sys._current_frames()`, `f_back`), and an
automatic collection may start at any allocation. One that starts while the sampler makes another thread's frame
object runs finalizers - Python code, which can hand the GIL to that thread - and if the thread returns from the frame
meanwhile, the object is left pointing at a dead frame: its next read segfaults (seen in CI, `PyCode_Addr2Line` under
`f_lineno`; tests/test_sampler_gc.py makes it happen). So on 3.11 every step that may make a frame object first
checks that the young generation's count has room below its threshold (`_room`); where it has not, a young collection
is made first, outside any frame's making - the one the program was a few allocations from starting - and a sample
that still finds no room is skipped. 3.10 makes frame objects eagerly; 3.12+ collects only between bytecodes.

The sampler can only look while it holds the GIL: in pure Python the main thread hands it over every switch
interval (5 ms), but a call that releases the GIL (a sync, a sleep, I/O) hands it over at once, so samples lean
towards those calls. Each sample is classified from the very stack it read (never from a flag read later), the
sampled lines name where time goes, and the times that need to be exact are measured, not sampled.
"""
from __future__ import annotations

import gc
import random
import sys
import threading
import time
import traceback
from ..frames import TOOL, USER, _abs, kind_of, line_of
from ..model.faults import FAULTS, check
from ..model.records import EMPTY
from ..model.training_thread import TRAINING

DATA, USER_KIND, FRAMEWORK, CALL, DATA_SITE = "data", "user", "framework", "call", "data_site"
KINDS = (DATA, USER_KIND, FRAMEWORK, CALL)
_CO_GENERATOR = 0x20
_DATA_NAMES = frozenset({"__next__", "__getitem__", "__getitems__", "next", "__iter__"})
_DATA_DIRS = ("/torch/utils/data/",)
_FEEDER_DIRS = ("/torch/utils/data/", "/torch_xla/distributed/parallel_loader.py")  # loaders' threads
PER_KIND = 3  # lines kept per kind and step
_LAZY_FRAMES = sys.version_info[:2] == (3, 11)  # frame objects made on demand, collections started by allocations
_STEP_ROOM = 8  # tracked objects one step of a walk may allocate (a frame object, the (code, line) pair), with slack



class FrameGate:
    """No sample holds a frame while a sync runs. A frame object that outlives its call keeps the call's locals
    alive; on a loaded machine the sampler can lose the GIL (or its CPU) between taking the stacks and letting go of
    them, while the training thread returns from a function and reaches its sync: torch_xla would then take the
    returned call's tensors (an optimizer's intermediates, the grads zero_grad let go of) as extra graph outputs -
    another graph, an extra compile the plain run never has. A sample runs under the gate's lock, and only while no
    sync does; a sync (backends/torch_xla/boundaries.py) is counted in under the same lock, so it waits for a sample
    under way (tens of microseconds), never for another thread's sync."""

    WAIT_S = 1.0  # the longest a sync waits for a sample to end (a stuck sampler never blocks the user for good)

    def __init__(self):
        self._lock = threading.Lock()
        self._syncs = 0  # syncs running now (threads of a launcher may sync at once)

    def sync_begins(self) -> bool:
        """Before the real sync; True when counted in (then `sync_ends` after it)."""
        if not self._lock.acquire(timeout=self.WAIT_S):
            return False
        self._syncs += 1
        self._lock.release()
        return True

    def sync_ends(self) -> None:
        with self._lock:
            self._syncs -= 1

    def try_sample(self) -> bool:
        """The sampler: True with the lock taken (release with `done`), False while a sync runs."""
        self._lock.acquire()
        if self._syncs:
            self._lock.release()
            return False
        return True

    def done(self) -> None:
        self._lock.release()


FRAMES = FrameGate()


class StackSampler:
    def __init__(self, codes: tuple[set, set] | None = None, interval: float = 0.01):
        # the adapter's own wrappers: a frame of the boundary call / jitted call, of the loader's timed next(); by
        # id(code), as every code set and cache here (a code object's hash is recomputed from its contents at each
        # lookup; frames.kind_of keeps the codes seen alive, so ids are not reused)
        call_codes, data_codes = codes or (set(), set())
        self._keep = (tuple(call_codes), tuple(data_codes))
        self.call_codes, self.data_codes = {id(c) for c in call_codes}, {id(c) for c in data_codes}
        self.interval = interval
        self.seconds = {k: 0.0 for k in KINDS}  # cumulative, per kind
        self.samples = 0
        self._lines: dict[tuple, float] = {}  # (file, line, function, kind) -> seconds, since the last take()
        self._loop: set = set()  # ids of the code objects of the user frames the step boundaries were called from
        self._data_code: dict = {}  # id(code) -> it is a data-loading frame by its file
        self._feeder_code: dict = {}  # id(code) -> it is a loader thread's frame by its file (kind_of keeps it)
        self._learned = 0
        self.learning = True  # learn_loop still wants boundaries' frames
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # --- lifecycle -------------------------------------------------------------------------------------
    def start(self) -> "StackSampler":
        self._thread = threading.Thread(target=self._run, name="ptxla_perf-sampler", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=1.0)
        self._thread = None

    # --- the training thread: at a step boundary -----------------------------------------------------------
    def learn_loop(self, frame) -> None:
        """The user frames a step boundary was called from (the first few boundaries): the loop pulling the
        batches runs in one of them."""
        if self._learned >= 4:
            return
        self._learned += 1
        self.learning = self._learned < 4
        while frame is not None:
            if kind_of(frame.f_code) == USER:
                self._loop.add(id(frame.f_code))
            frame = frame.f_back

    def take(self) -> list[dict]:
        """The lines sampled since the previous call: the top PER_KIND of each kind, seconds each."""
        if not self._lines:  # most boundaries: no sample since the last one (a list all such records share)
            return EMPTY
        lines, self._lines = self._lines, {}
        by_kind: dict[str, list] = {}
        for (file, line, function, kind), s in lines.items():
            by_kind.setdefault(kind, []).append((s, file, line, function))
        out = []
        for kind, rows in by_kind.items():
            rows.sort(reverse=True)
            out += [{"file": _abs(f), "line": n, "function": fn, "kind": kind, "s": round(s, 6)}
                    for s, f, n, fn in rows[:PER_KIND]]
        return out

    # --- the sampling thread ----------------------------------------------------------------------------
    def _run(self) -> None:
        jitter = random.Random()  # its own: the program's random stream stays the program's
        last = time.perf_counter()
        while not self._stop.wait(self.interval * jitter.uniform(0.5, 1.5)):
            now = time.perf_counter()
            dt, last = min(now - last, 3 * self.interval), now
            if not FRAMES.try_sample():
                # a sync is running: that time is measured exactly (a sample would find our wrapper's frame)
                self.samples += 1
                self.seconds[CALL] += dt
                continue
            try:
                failed = self._sample_gated(dt)
            finally:
                FRAMES.done()
            if failed is not None:  # said outside the gate (the console may block)
                FAULTS.record("sampler", failed)
                failed = None

    def _sample_gated(self, dt: float) -> Exception | None:
        """One sample, inside the gate (FRAMES): every frame taken here is let go of before it returns."""
        if _LAZY_FRAMES and not _room(threading.active_count() + _STEP_ROOM):
            return None  # no room for the snapshot's frame objects (one per thread): no sample this time
        stacks = sys._current_frames()
        frame = stacks.pop(TRAINING.ident, None)  # looked up each time: the first step boundary may settle it
        if frame is None:
            return None
        chain = _chain(frame)  # the training thread's codes and lines, taken at once: none of its frames is held
        frame = None  # while we work out the sample
        try:
            if chain is not None:  # None: no room to walk it (Python 3.11), no sample this time
                check("sampler")
                self._sample(chain, dt, stacks)
        except Exception as exc:  # noqa: BLE001 - a diagnostic never takes the run down (faults.py)
            traceback.clear_frames(exc.__traceback__)  # our frames' locals (a frame walked): not past the gate
            return exc
        finally:
            stacks.clear()  # other threads' frames: none outlives the sample
        return None

    def _sample(self, chain: list, dt: float, stacks: dict | None = None) -> None:
        """One sample of the training thread's stack (`chain`: (code, line), innermost first)."""
        self.samples += 1
        call_codes, data_codes = self.call_codes, self.data_codes
        data = False
        for code_obj, _ in chain:
            code = id(code_obj)
            if code in call_codes:
                self.seconds[CALL] += dt
                return
            data = data or code in data_codes
        user = site = None
        innermost = None
        callee = None
        loop = self._loop
        for code, lineno in chain:
            kind = kind_of(code)  # keeps the code alive: the ids below stay its own
            if innermost is None:
                innermost = kind
            if user is None and kind == USER:
                user = (code.co_filename, lineno, code.co_name)
            if site is None and callee is not None and id(code) in loop and (
                    data or callee.co_name in _DATA_NAMES or
                    (callee.co_flags & _CO_GENERATOR and kind_of(callee) != TOOL)):
                data, site = True, (code.co_filename, lineno, code.co_name)
            elif not data:
                is_data = self._data_code.get(id(code))
                if is_data is None:
                    name = code.co_filename.replace("\\", "/")
                    is_data = self._data_code[id(code)] = any(d in name for d in _DATA_DIRS)
                data = is_data
            callee = code
        # the user's own line at the top of the stack is theirs to fix; torch/JAX tracing and installed libraries'
        # Python (a model zoo, a trainer) are the framework's, named by the user line that called them
        kind = DATA if data else (USER_KIND if innermost == USER else FRAMEWORK)
        self.seconds[kind] += dt
        lines = self._lines
        if data and stacks and innermost != USER:  # the main thread is blocked in a loader's (or a queue's) call
            fed = self._feeder_lines(stacks)
            if fed:
                user = None
                for line in fed:
                    key = (*line, DATA)
                    lines[key] = lines.get(key, 0.0) + dt / len(fed)
        if user is not None:
            key = (*user, kind)
            lines[key] = lines.get(key, 0.0) + dt
        if site is not None:
            key = (*site, DATA_SITE)
            lines[key] = lines.get(key, 0.0) + dt

    def _feeder_lines(self, stacks: dict) -> list[tuple]:
        """The innermost user line of each other thread that is loading data (the user's code under a loader's
        frame, a generator, or a `__getitem__` / `__next__`): where a batch the main thread waits for is made."""
        out = []
        me = threading.get_ident()
        for ident, f in stacks.items():
            if ident in (TRAINING.ident, me):
                continue
            user = None
            feeding = False
            while f is not None:
                code = f.f_code
                kind = kind_of(code)
                if kind == USER:
                    if user is None:
                        user = (code.co_filename, line_of(f), code.co_name)
                    if code.co_name in _DATA_NAMES or code.co_flags & _CO_GENERATOR:
                        feeding = True
                if not feeding:
                    hit = self._feeder_code.get(id(code))
                    if hit is None:
                        name = code.co_filename.replace("\\", "/")
                        hit = self._feeder_code[id(code)] = any(d in name for d in _FEEDER_DIRS)
                    feeding = hit
                if _LAZY_FRAMES and not _room(_STEP_ROOM):
                    user = None  # this thread's walk cut short: its line is not known
                    break
                f = f.f_back
            if user is not None and feeding:
                out.append(user)
        return out


def _chain(frame) -> list[tuple] | None:
    """(code, line) of `frame` and every frame outside it, innermost first; None where a step of the walk found no
    room to make a frame object safely (Python 3.11, `_room`)."""
    chain = []
    limit, count = (gc.get_threshold()[0] if _LAZY_FRAMES else 0), gc.get_count  # one call a step where it matters
    while frame is not None:
        line = frame.f_lineno
        chain.append((frame.f_code, line if line is not None else line_of(frame)))
        if limit and count()[0] + _STEP_ROOM > limit and not _room(_STEP_ROOM):
            return None
        frame = frame.f_back
    return chain


def _room(need: int) -> bool:
    """Python 3.11: whether `need` more tracked objects can be allocated without an automatic collection starting
    (module doc). Where the young generation's count is within `need` of its threshold, a young collection now -
    made here, between allocations, and only a few allocations before the program would have started it."""
    if not gc.isenabled():
        return True
    limit = gc.get_threshold()[0]
    if limit <= 0 or gc.get_count()[0] + need <= limit:
        return True
    gc.collect(0)
    return gc.get_count()[0] + need <= limit
