"""torch_xla adapter: runtime counters -> one StepRecord per step boundary.

Every `torch_xla.sync()` / `xm.mark_step()` (also those inside `StepTrace.__exit__` and `MpDeviceLoader`) ends
in `torch_xla._XLAC._xla_step_marker`; wrapping that one binding makes each call a step boundary without
touching the user's script.

Default mode reads a handful of counters per boundary (no syncs, no extra graphs). Attribution steps (the
first few, a few after an unexplained anomaly, one at the period of a recurring one) come in two kinds that never
share a step: "graphs" capture the pending graph's HLO (IR debug on) so a recompile can be diffed against the
previous graph of the same site; "calls" run a TorchFunctionMode that notices which torch call made the runtime
compile, execute early or copy to the host. See docs/attribution.md.
"""
from __future__ import annotations

import functools
import gc
import os
import sys
import threading
import time
from collections import Counter, OrderedDict
from dataclasses import asdict
from typing import Any, Callable

import torch
from torch.overrides import TorchFunctionMode

import torch_xla
import torch_xla.debug.profiler as xp

from .. import hlo_cost, hlo_diff
from .. import memory as mem
from ..live_holders import GrowthWatch, find_holder, holder_counts
from ..attribution_plan import CALLS, GRAPHS, AttributionPlan
from ..config import AttributionConfig
from ..frames import function_at, is_user_file, user_frame
from ..records import Event, Location, StepRecord, Transfers
from .torch_xla_modes import DynamoWatch, spmd_graph, spmd_meshes
from .torch_xla_rules import EAGER_ADVICE, RULES as TORCH_XLA_RULES
from ..sampler import main_thread_cpu

X = torch_xla._XLAC

_SCALAR_READ = "aten::_local_scalar_dense"


def _counter(name: str) -> int:
    return X._xla_counter_value(name) or 0


def _launches() -> int:
    """Graphs launched so far: compiled now or taken from the compile cache."""
    return _counter("UncachedCompile") + _counter("CachedCompile")


def _since(now: int, before: int) -> int:
    """A counter's increase. Counters can go back to zero: torch.compile's openxla backend clears them all while it
    compiles (UnsupportedNodesCollector); then what was counted since the reset is what we know."""
    return now - before if now >= before else now


def _metric(name: str) -> tuple[int, float]:
    data = X._xla_metric_data(name)
    return (data[0], data[1]) if data else (0, 0.0)


def _fallbacks() -> dict[str, int]:
    return {n: _counter(n) for n in X._xla_counter_names() if n.startswith("aten::") and n != _SCALAR_READ}


class _Snapshot:
    """Cumulative runtime counters at one instant. Metrics whose sample lists are long (host-to-device time,
    compile time) are only read when a cheap counter says they changed: `_xla_metric_data` copies up to 1024
    samples (~50-60 us) per call. `TransferFromDeviceTime` is the exception, read at every boundary (no counter
    is known to move with every device-to-host transfer): its copy grows with the run's host reads, to ~50 us a
    boundary once the run has made 1024 of them."""

    __slots__ = ("uncached", "cached", "d2h", "d2h_ns", "d2h_bytes", "h2d", "fallbacks", "t", "backward",
                 "opt", "closure_d2h", "data_wait", "live")

    def __init__(self, prev: "_Snapshot | None" = None, training: "_TrainingCalls | None" = None):
        self.t = time.perf_counter()
        # each counter read once per boundary (the marker takes launches from here)
        self.uncached = _counter("UncachedCompile")
        self.cached = _counter("CachedCompile")
        self.d2h, self.d2h_ns = _metric("TransferFromDeviceTime")  # copies its samples: see above
        if training is not None:
            self.backward, self.opt = training.backward, training.optimizer_steps
            self.closure_d2h, self.data_wait = training.closure_reads, training.data_wait
        else:
            self.backward = self.opt = self.closure_d2h = 0
            self.data_wait = 0.0
        self.h2d = _counter("xla::_copy_from") + _counter("DeviceDataCacheMiss")
        # live XLA tensors: torch_xla counts every XLA tensor made and destroyed
        self.live = _counter("CreateXlaTensor") - _counter("DestroyXlaTensor")
        if prev is not None and self.d2h == prev.d2h:
            # a CPU fallback copies its inputs to the host, so no transfer means no fallback: skip listing every
            # counter (slow under load, ~0.4 ms while the executor threads run)
            self.d2h_bytes, self.fallbacks = prev.d2h_bytes, prev.fallbacks
        else:
            self.d2h_bytes, self.fallbacks = _metric("InboundData")[1], _fallbacks()

    @property
    def launches(self) -> int:
        return self.uncached + self.cached


class _TrainingCalls:
    """Counts the calls that tell a training iteration apart (iterations.py): autograd backward passes and
    optimizer steps (torch's global post-step hook), and host reads made inside `xm.add_step_closure` closures
    (they run right after the step's sync, so they are the finished step's, not the next one's)."""

    def __init__(self):
        self.backward = 0
        self.optimizer_steps = 0
        self.closure_reads = 0
        self.in_closure = False
        self.batch_shapes: tuple | None = None  # shapes of the batch an MpDeviceLoader yielded last
        self.batch_site: Location | None = None  # the user's line that took a batch of new shapes from it
        self.batch_changed = False  # the last batch's shapes differ from the one before
        # time the main thread waited in a DataLoader's next(), and where the loop pulls from it
        self.data_wait = 0.0
        self.data_cpu = 0.0  # the main thread's CPU time inside those next() calls (not host time of the step)
        # time the main thread blocked in xm.wait_device_ops() (until the device finished what was launched)
        self.device_wait = 0.0
        self.device_wait_cpu = 0.0
        self.cpu = main_thread_cpu()
        self.data_seen = False
        self.data_site: Location | None = None
        self.data_call: str | None = None
        self._in_next = False
        self._main = threading.main_thread()
        self._saved: dict[str, Any] = {}
        self._handle = None

    def install(self) -> None:
        import torch.autograd
        import torch_xla.core.xla_model as xm
        real_backward, real_grad, real_closures = torch.autograd.backward, torch.autograd.grad, xm._run_step_closures
        self._saved = {"backward": real_backward, "grad": real_grad, "closures": real_closures}
        calls = self

        def backward(*args, **kwargs):
            calls.backward += _not_fake()
            return real_backward(*args, **kwargs)

        def grad(*args, **kwargs):
            calls.backward += _not_fake()  # torch.compile's aot_autograd traces with grad on fake tensors
            return real_grad(*args, **kwargs)

        def run_step_closures(*args, **kwargs):
            ctx = xm._get_device_context()
            if not getattr(ctx, "step_closures", None) and not getattr(ctx, "async_step_closures", None):
                return real_closures(*args, **kwargs)  # nothing queued: no metric read (~60 us when full)
            before = _metric("TransferFromDeviceTime")[0]
            calls.in_closure = True
            try:
                return real_closures(*args, **kwargs)
            finally:
                calls.in_closure = False
                calls.closure_reads += _metric("TransferFromDeviceTime")[0] - before
        for f, real in ((backward, real_backward), (grad, real_grad), (run_step_closures, real_closures)):
            f.__wrapped__ = real
            f.__doc__ = real.__doc__
        _not_traced(backward, grad, run_step_closures)
        torch.autograd.backward, torch.autograd.grad = backward, grad
        xm._run_step_closures = run_step_closures
        import torch_xla.distributed.parallel_loader as pl
        real_next = self._saved["loader_next"] = pl.PerDeviceLoader.next

        def loader_next(loader, *args, **kwargs):  # the batch's shapes: cheap evidence for an input-shape recompile
            # not timed as a data wait: its own thread prefetches, and its queue hand-off under CPU contention is
            # noise, not an input pipeline (a toy step measured 0.9-3 ms of it)
            item = real_next(loader, *args, **kwargs)
            shapes = _shapes(item)
            if shapes != calls.batch_shapes:  # a batch of other shapes: the loop line that took it (a frame walk)
                calls.batch_changed = calls.batch_shapes is not None
                calls.batch_site = user_frame(sys._getframe(1))[0]
            else:
                calls.batch_changed = False
            calls.batch_shapes = shapes
            return item
        loader_next.__wrapped__ = real_next
        _not_traced(loader_next)
        pl.PerDeviceLoader.next = loader_next
        from torch.utils.data import dataloader as dl
        real_iter_next = self._saved["iter_next"] = dl._BaseDataLoaderIter.__next__

        def iter_next(it, *args, **kwargs):  # the DataLoader's own next(): the time the loop waits for a batch
            return calls.timed_next(real_iter_next, "DataLoader", it, *args, **kwargs)
        iter_next.__wrapped__ = real_iter_next
        dl._BaseDataLoaderIter.__next__ = iter_next
        real_wait = self._saved["wait"] = X._xla_wait_device_ops

        def wait_device_ops(*args, **kwargs):  # xm.wait_device_ops(): blocked until the device is idle
            return calls.timed_wait(real_wait, *args, **kwargs)
        wait_device_ops.__wrapped__ = real_wait
        _not_traced(wait_device_ops)
        X._xla_wait_device_ops = wait_device_ops
        from torch.optim.optimizer import register_optimizer_step_post_hook
        self._handle = register_optimizer_step_post_hook(self._on_optimizer_step)

    def timed_next(self, real, what: str, *args, **kwargs):
        """Time a DataLoader's next() on the main thread (a loader's own prefetch thread, MpDeviceLoader's, is not
        the training loop waiting), the outermost call only. Two clock reads per batch; the loop's line is looked
        up once."""
        if self._in_next or threading.current_thread() is not self._main:
            return real(*args, **kwargs)
        self._in_next = True
        c0 = self.cpu()
        t0 = time.perf_counter()
        try:
            return real(*args, **kwargs)
        finally:
            self.data_wait += time.perf_counter() - t0
            self.data_cpu += self.cpu() - c0
            self._in_next = False
            if not self.data_seen:
                self.data_seen, self.data_call = True, what
                self.data_site = user_frame(sys._getframe(2))[0]

    def timed_wait(self, real, *args, **kwargs):
        """Time an explicit wait for the device on the main thread (the breakdown's `device` part, not `other`)."""
        if threading.current_thread() is not self._main:
            return real(*args, **kwargs)
        c0 = self.cpu()
        t0 = time.perf_counter()
        try:
            return real(*args, **kwargs)
        finally:
            self.device_wait += time.perf_counter() - t0
            self.device_wait_cpu += self.cpu() - c0

    def _on_optimizer_step(self, *_args) -> None:
        self.optimizer_steps += 1

    def uninstall(self) -> None:
        if not self._saved:
            return
        import torch.autograd
        import torch_xla.core.xla_model as xm
        torch.autograd.backward, torch.autograd.grad = self._saved["backward"], self._saved["grad"]
        xm._run_step_closures = self._saved["closures"]
        import torch_xla.distributed.parallel_loader as pl
        pl.PerDeviceLoader.next = self._saved["loader_next"]
        from torch.utils.data import dataloader as dl
        dl._BaseDataLoaderIter.__next__ = self._saved["iter_next"]
        X._xla_wait_device_ops = self._saved["wait"]
        if self._handle is not None:
            self._handle.remove()
        self._saved = {}


def _sync_caller(frame) -> tuple[str, bool]:
    """Who called torch_xla.sync() (`frame` is the marker's caller: sync itself, or another wrapper of the binding):
    torch_xla.compile / torch_xla.step (its `_compile` region), torch.compile's openxla bridge, or anyone else; and
    whether eager mode was on in the stretch of the program this sync ends. `_compile` turns eager mode off for its
    region and keeps the user's setting in a local: its first sync (clearing what ran before the region) ends a
    stretch in the user's mode, its last sync ends the region, traced lazily."""
    caller = frame.f_back if frame is not None and frame.f_code.co_name == "sync" else None
    if caller is None:
        return "lazy", bool(X._get_use_eager_mode())
    what = _caller_kind(caller.f_code)
    if what in ("_compile", "_clear_pending_ops_before_compile"):
        region = caller.f_back if what == "_clear_pending_ops_before_compile" else None
        eager = bool(region.f_locals.get("saved_eager_mode_status")) if region is not None else False
        return "torch_xla.compile", eager
    return what, bool(X._get_use_eager_mode())


_CALLERS: dict[int, tuple[str, Any]] = {}  # id(code) -> (its kind, the code, kept alive so the id stays its own)


def _caller_kind(code) -> str:
    """What the code that called torch_xla.sync() is: torch_xla.compile's `_compile` or
    `_clear_pending_ops_before_compile`, "dynamo" (the openxla bridge), or "lazy" (anyone else). Once per code."""
    hit = _CALLERS.get(id(code))
    if hit is None:
        path = code.co_filename.replace(os.sep, "/")
        if code.co_name in ("_compile", "_clear_pending_ops_before_compile") \
                and path.endswith("torch_xla/torch_xla.py"):
            what = code.co_name
        else:
            what = "dynamo" if "/torch_xla/_dynamo/" in path else "lazy"
        hit = _CALLERS[id(code)] = (what, code)
    return hit[0]


def _not_traced(*fns: Callable) -> None:
    """Dynamo neither compiles frames of these functions nor inlines them (a graph break, as at the binding or torch
    function they stand in for); what they call is compiled as before. Without it, a hook that runs eagerly inside a
    compiled region (Tensor.backward after a graph break, a sync inside a compiled function) is compiled as a frame of
    its own, guarded on the values of our counters: a recompile at every step."""
    try:
        from torch._dynamo.decorators import skip
    except Exception:  # no dynamo (or it moved): nothing to keep out of
        return
    for fn in fns:
        try:
            skip(fn)
        except Exception:
            pass


def _not_fake() -> int:
    """1 unless a FakeTensorMode is active (torch.compile tracing its graphs): then 0."""
    try:
        return int(torch._C._get_dispatch_mode(torch._C._TorchDispatchModeKey.FAKE) is None)
    except Exception:
        return 1


def _shapes(item, limit: int = 8) -> tuple:
    """The shapes of the tensors in a batch (a tensor, or a dict/list/tuple of them), in order, at most `limit`."""
    out: list = []
    stack = [item]
    while stack and len(out) < limit:
        x = stack.pop(0)
        if isinstance(x, torch.Tensor):
            out.append(tuple(x.shape))
        elif isinstance(x, dict):
            stack.extend(x.values())
        elif isinstance(x, (list, tuple)):
            stack.extend(x)
    return tuple(out)


def _call_signal() -> tuple[int, int, int]:
    """Counters that move whenever a call launches a graph or copies a tensor (either way: `_to_copy` also counts
    host-to-device copies, `_to_cpu` host reads): a few plain counter reads, whatever the run's length."""
    return (_counter("UncachedCompile"), _counter("CachedCompile"),
            _counter("xla::_to_cpu") + _counter("xla::_to_copy"))


class _Attribution(TorchFunctionMode):
    """Active only on "calls" attribution steps: blames the torch call (and the user's line that made it)
    whenever the runtime launched a graph or copied to the host inside that call. IR nodes built inside this
    mode carry its frame as their innermost one, which is why graph capture runs on other steps."""

    def __init__(self, adapter: "TorchXlaAdapter"):
        super().__init__()
        self.adapter = adapter

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if torch.compiler.is_compiling():  # dynamo traces modes on the stack: give it nothing to trace (no breaks)
            return func(*args, **kwargs)
        before = _call_signal()
        result = func(*args, **kwargs)
        name = getattr(func, "__name__", str(func))
        if _call_signal() != before:  # cheap counters moved: only now read the (costlier) transfer metric
            self._check(name, args, before)
        if name == "__getitem__" and args and isinstance(args[0], torch.Tensor) and args[0].device.type == "xla":
            ints = _python_ints(args[1] if len(args) > 1 else None)
            if ints:
                loc, _ = user_frame(sys._getframe(1))
                if loc:
                    self.adapter.index_lines.setdefault((loc.file, loc.line), (loc, set()))[1].add(ints)
        elif name in ("to", "tensor", "as_tensor") and isinstance(result, torch.Tensor) \
                and result.device.type == "xla" and not any(
                    isinstance(a, torch.Tensor) and a.device.type == "xla" for a in args):
            loc, _ = user_frame(sys._getframe(1))
            if loc:
                self.adapter.h2d_lines.setdefault((loc.file, loc.line), (loc, set()))[1].add(tuple(result.shape))
                self.adapter.h2d_steps.setdefault((loc.file, loc.line), {}).setdefault(
                    self.adapter._steps, set()).add(tuple(result.shape))
                self.adapter.h2d_bytes.setdefault((loc.file, loc.line), set()).add(
                    result.numel() * result.element_size())
        elif name in self.adapter.shape_calls_wanted and isinstance(result, torch.Tensor):
            # a torch function written in Python (F.interpolate) whose ops made a graph's shapes change: HLO metadata
            # names its own frame only; here, the user's line that called it, and the shapes it returned
            loc, _ = user_frame(sys._getframe(1))
            if loc:
                self.adapter.shape_calls.setdefault(name, {}).setdefault((loc.file, loc.line), (loc, set()))[1].add(
                    tuple(result.shape))
        return result

    def _check(self, name: str, args, before: tuple) -> None:
        u0, c0, _ = before
        u1, c1, _ = _call_signal()
        d2h = _metric("TransferFromDeviceTime")[0] - self.d2h
        self.d2h += d2h
        if u1 != u0 or c1 != c0 or d2h:
            self._blame(name, args, u1 - u0, (u1 + c1) - (u0 + c0), d2h)

    def __enter__(self):
        self.d2h = _metric("TransferFromDeviceTime")[0]
        return super().__enter__()

    def _blame(self, name: str, args, compiles: int, launches: int, d2h: int) -> None:
        loc, via = user_frame(sys._getframe(3))
        detail: dict[str, Any] = {"call": name, "compiles": compiles, "launches": launches, "transfers": d2h}
        if via:
            detail["via"] = via.short()
        shapes = [list(a.shape) for a in args if isinstance(a, torch.Tensor)][:3]
        if shapes:
            detail["shapes"] = shapes
        if self.adapter.training.in_closure:
            detail["closure"] = True
        if d2h:
            fell_back = {k: v for k, v in _fallbacks().items() if v != self.adapter.fallback_seen.get(k, 0)}
            if fell_back:
                self.adapter.fallback_seen.update(fell_back)
                detail["ops"] = sorted(fell_back)
                self.adapter.events.append(Event("op_fallback", loc, detail))
                return
            self.adapter.events.append(Event("device_to_host_sync", loc, detail))
        elif X._get_use_eager_mode():  # eager mode runs each op as it is called: no pending graph was cut
            self.adapter.events.append(Event("eager_ops", loc, detail))
        else:
            self.adapter.events.append(Event("graph_break", loc, detail))


class TorchXlaAdapter:
    name = "torch_xla"
    rules = TORCH_XLA_RULES  # its own rules beside findings.RULES: the execution modes' (torch_xla_rules.py)
    step_detection = ("each torch_xla.sync() / xm.mark_step() (StepTrace exit, MpDeviceLoader) is a step boundary; "
                      "boundaries are grouped into iterations by optimizer steps and backward passes")
    advice = {
        "device_to_host_sync": "Keep values on the device and read them every N steps through "
                               "xm.add_step_closure (or after the loop).",
        "closure_read": "Throttle it to every N steps if it runs every step.",
        "graph_break": "Remove it, or sync once per iteration (torch_xla.sync() after optimizer.step()).",
        "early_execution": "Move the call out of the step or after torch_xla.sync().",
        "special_scalars": "Harmless once; XLA_NO_SPECIAL_SCALARS=1 avoids it.",
        "op_fallback": "Replace it with an op XLA lowers (e.g. masks instead of nonzero/boolean indexing) or "
                       "move it out of the step.",
        "no_steps": "The loop never called torch_xla.sync() / xm.mark_step() in this process (work in xmp.spawn "
                    "children or through torch.compile is not seen here).",
        "host_to_device_transfer": "Create tensors on the device, or move data once outside the loop.",
        "eager_ops": EAGER_ADVICE,
        "dynamo_graph_break": "If it is in your code, rewrite the line so dynamo can trace it (no .item(), print or "
                              "data-dependent Python branch inside the compiled function), or move it out of it.",
        "input_bound": "Give the DataLoader workers (num_workers > 0, persistent_workers=True), wrap it in "
                       "torch_xla's MpDeviceLoader to prefetch batches to the device, and move per-sample work "
                       "(decoding, augmentation) out of __getitem__ or cache it.",
        # reads that decide control flow: xm.add_step_closure does not fit (the host needs the answer to go on)
        "control_flow_skip": "Keep the decision on the device: run the step every time and mask its effect "
                             "(`ok = torch.isfinite(loss)`, then `torch.where(ok, new, old)` for the update, or "
                             "multiply the loss or the gradients by `ok`), so no step waits for the value.",
        "control_flow_stop": "Keep the condition on the device (`stop = stop | (loss > limit)`, a device tensor) and "
                             "read it every N steps (`if step % N == 0 and stop.item(): break`), stopping at most N "
                             "steps late.",
        "control_flow_branch": "Keep the decision on the device: compute both sides and pick with "
                               "`torch.where(cond, a, b)`, or read the value every N steps if the branch may lag.",
        "memory_growth": "Keep Python numbers, not XLA tensors, across steps: read the loss every N steps inside "
                         "xm.add_step_closure (loss.item() there), or accumulate on the device into one tensor "
                         "(total += loss.detach()); a kept tensor keeps its device buffer alive.",
        "memory_headroom": "Reduce the batch size, use gradient checkpointing (torch.utils.checkpoint) or bf16, "
                           "or shard parameters and optimizer state (SPMD / FSDP).",
        "host_bound": "Move per-step Python work out of the step (precompute, vectorise, or do it every N steps); "
                      "where tracing the model itself is the cost, torch_xla.compile or torch.compile(backend="
                      "'openxla') reuse the traced graph instead of tracing it again every step.",
        "launch_bound": "Do more work per graph: a larger batch, several steps in one graph (a loop inside the step, "
                        "torch_xla.experimental.scan), and one sync per iteration.",
    }

    def __init__(self, attribution: dict | None = None):
        cfg = asdict(AttributionConfig())  # one set of defaults: the config schema's (config.py)
        cfg.update(attribution or {})
        self.cfg = cfg
        self.events: list[Event] = []
        self.fallback_seen: dict[str, int] = {}
        self._fallbacks_taken: dict[str, int] | None = None  # the snapshot's fallbacks fallback_seen last took in
        self.h2d_lines: dict[tuple, tuple[Location, set]] = {}  # user line -> shapes it moved to the device
        self.h2d_bytes: dict[tuple, set] = {}  # user line -> sizes in bytes of what it moved to the device
        self.h2d_steps: dict[tuple, dict[int, set]] = {}  # user line -> step -> shapes it moved in that step
        self._calls_at: Counter = Counter()  # calls attribution steps so far, by the compile key of their site
        self._step_site: dict[int, str] = {}  # boundary -> the compile key of its site (attribution steps)
        # torch functions (by name) whose own ops started a change of shapes inside a graph, and the user lines
        # seen calling them on calls steps (with the shapes they returned)
        self.shape_calls_wanted: set[str] = set()
        self.shape_calls: dict[str, dict[tuple, tuple[Location, set]]] = {}
        self.index_lines: dict[tuple, tuple[Location, set]] = {}  # user line -> Python ints it indexed with
        self.notes: list[str] = []
        self._real_marker: Callable | None = None
        self._on_boundary: Callable[..., None] | None = None
        self._snap: _Snapshot | None = None
        self._mode: _Attribution | None = None
        self.plan = AttributionPlan(cfg)
        self._current: str | None = None
        self._in_marker = False
        self._hlo_by_site: dict[tuple, OrderedDict[str, str]] = {}
        self._sites_compiled: set[tuple] = set()
        self._graph_sizes: dict[tuple, list] = {}  # site -> (IR nodes, bytes copied in) of its last compiles
        self._explained: set[tuple] = set()
        self._unresolved: list[Event] = []
        self._steps = 0  # boundaries so far
        self._compile_total = 0.0
        self._ir_debug0 = False
        self.training = _TrainingCalls()
        self._last: StepRecord | None = None  # the latest boundary's record (its closures run after it)
        self._costs: dict[str, hlo_cost.GraphCost] = {}  # graph hash -> its cost, computed once (roofline)
        self._site_cost: dict[tuple, tuple[str, hlo_cost.GraphCost]] = {}  # site -> its last captured graph's cost
        self._cost_counts = Counter()  # how each launching boundary got its cost: captured | carried | unknown
        self._protos: dict[str, bytes] = {}  # graph hash -> its serialized HLO, for the memory analysis at the end
        self._graph_mem: dict[str, dict] = {}  # graph hash -> XLA's memory analysis of it (memory.py)
        self._mem_time = 0.0  # seconds spent compiling graphs for their memory figures (at the end)
        self._watch = GrowthWatch()  # live XLA tensors rising step after step: one look for what holds them
        self._holders_before: dict[int, int] | None = None  # containers of XLA tensors at the boundary it fired
        self._data_site_sent = False  # the loader line, sent once as a data_wait event
        self._dynamo = False  # the script called torch.compile: no TorchFunctionMode from then on
        self._sync_callers: set[str] = set()  # who cut the graphs: "lazy" | "torch_xla.compile" | "dynamo"
        # graph launches since the last boundary that ran no pending lazy graph early: torch.compile's graphs
        # (_run_cached_graph calls) and what the openxla bridge's own syncs ran while it compiled
        self._not_early = 0
        self._real_run_cached: Callable | None = None
        self._real_compile: Callable | None = None
        self._eager_outside: tuple[int, float] | None = None  # eager mode: (ops, seconds) before the compiled step
        self.dynamo = DynamoWatch()  # torch.compile's own records: compiles, recompile reasons, graph breaks
        self._spmd: int | None = None  # SPMD: the devices the step is partitioned over (once the runtime says so)
        self._meshes: list[dict] = []
        self._spmd_graphs: dict[str, dict] = {}  # graph hash -> its SPMD evidence (sharded inputs, collectives)
        self._device: _DeviceTimes | None = None  # ExecuteTime samples -> each boundary's device time
        self._cpu_mark = 0.0  # the main thread's CPU clock after the previous boundary's sync
        self._data_cpu_mark = 0.0
        self._left_at = 0.0  # when the last boundary's own work ended
        self._wait_mark = (0.0, 0.0)  # the training calls' device wait and its CPU time at the previous boundary

    def settle(self, final: bool = False) -> None:
        """Give the boundaries so far their device times (read in batches: `_DeviceTimes`) before a report; the
        final report's read waits a little for the graphs still running (`_DeviceTimes.finish`)."""
        if self._device is not None:
            self._device.finish() if final else self._device.read(final=False)

    @staticmethod
    def sampler_codes() -> tuple[set, set]:
        """Our wrappers' code, for the stack sampler (sampler.py): a frame of the sync call's wrapper (measured as
        launch, compile, device wait) or an explicit wait for the device, of the loader's timed next() (data)."""
        return {TorchXlaAdapter._marker.__code__, _TrainingCalls.timed_wait.__code__}, \
            {_TrainingCalls.timed_next.__code__}

    # --- lifecycle ---------------------------------------------------------------------------------
    def start(self, on_boundary: Callable[..., None]) -> None:
        self._on_boundary = on_boundary
        self._real_marker = X._xla_step_marker
        _not_traced(TorchXlaAdapter._marker)
        X._xla_step_marker = self._marker
        self.training.install()
        self._watch_torch_compile()
        self._watch_dynamo_graphs()
        self._snap = _Snapshot(None, self.training)
        self._device = _DeviceTimes()
        self._cpu_mark = self.training.cpu()
        self._ir_debug0 = bool(X._get_ir_debug())  # the user's own XLA_IR_DEBUG / XLA_HLO_DEBUG setting stays
        self._compile_total = _metric("CompileTime")[1] / 1e9
        self.fallback_seen = dict(self._snap.fallbacks)
        self._fallbacks_taken = self._snap.fallbacks
        self._totals0 = (_metric("OutboundData")[1], _metric("TransferToDeviceTime")[0])
        self._activate(self.plan.next_kind(0))

    def stop(self) -> StepRecord | None:
        """Restore the binding; return what happened after the last boundary (not a step: e.g. a final
        `.item()` after the loop), or None if nothing did."""
        self._activate(None)
        self._resolve_locations()
        if self._real_marker is not None:
            X._xla_step_marker = self._real_marker
            self._real_marker = None
        self.training.uninstall()
        if self._device is not None:
            self._device.unordered = self._device.unordered or self._dynamo
            self._device.read(final=False)  # the rest at the final report's settle(final=True)
        if self._real_compile is not None:
            torch.compile, self._real_compile = self._real_compile, None
        if self._real_run_cached is not None:
            X._run_cached_graph, self._real_run_cached = self._real_run_cached, None
        if self._snap is None:
            return None
        tail = self._record(-1, None, _Snapshot(self._snap, self.training))
        if self.dynamo.on:
            tail.events += self.dynamo.poll()
        self.events.clear()
        busy = tail.compiles or tail.device_to_host.count or tail.executions or tail.fallback_ops
        return tail if busy else None

    def host_to_device_bytes(self) -> int | None:
        """The run's host-to-device bytes: too costly to read per step (~60 us), read once at the end."""
        return int(_metric("OutboundData")[1] - self._totals0[0])

    def start_server(self, port: int):
        return xp.start_server(port)

    def runaway(self, rec: StepRecord, cfg) -> str | None:
        """Graph after graph at host reads inside one step: each read cuts and compiles a new partial graph
        (torch.autograd.set_detect_anomaly(True), a host read in a per-op hook)."""
        if rec.compiles >= int(cfg["runaway_compiles"]) and rec.device_to_host.count >= int(cfg["runaway_reads"]):
            return (f"{rec.compiles} graphs compiled at {rec.device_to_host.count} host reads within one step "
                    "(each read cuts a new partial graph; typical cause: torch.autograd.set_detect_anomaly(True) "
                    "or a host read inside a per-op hook)")
        return None

    def process_index(self) -> int | None:
        import torch_xla.runtime as xr
        if not X._xla_runtime_is_initialized():
            return None
        try:
            return int(xr.global_ordinal())
        except Exception:
            return None

    def follow_spawn(self, wrap):
        from .torch_xla_spawn import follow
        return follow(wrap)

    def environment(self) -> dict[str, Any]:
        import torch_xla.runtime as xr
        env: dict[str, Any] = {"versions": {"torch": torch.__version__, "torch_xla": torch_xla.__version__},
                               "execution_modes": self._execution_modes()}
        if not X._xla_runtime_is_initialized():  # a parent that only spawned: asking would initialise it
            env["device_kind"] = os.environ.get("PJRT_DEVICE")
            return env
        try:
            env["device_kind"] = xr.device_type()
            env["device"] = str(torch_xla.device())
            import torch_xla.core.xla_model as xm
            env["device_model"] = xm.xla_device_kind()  # PJRT's device kind ("TPU v5 lite"): picks the peak
            env["process_count"] = int(xr.process_count())
            env["process_index"] = int(xr.process_index())
        except Exception as exc:  # runtime not initialisable: still report what we know
            env["device_kind"] = os.environ.get("PJRT_DEVICE")
            env["device_error"] = str(exc).splitlines()[0]
        if self._spmd_devices():  # (under SPMD xm.xla_device_kind() fails: "Unknown device SPMD:0")
            env["spmd"] = {"devices": self._spmd, "meshes": self.meshes()}
        return env

    def _execution_modes(self) -> list[str]:
        """How the script ran its graphs: "lazy" (syncs it made itself: torch_xla.sync, mark_step, step loaders),
        "torch_xla.compile" (syncs of torch_xla.compile / torch_xla.step regions), "eager" (eager mode on at a sync
        or at the end), "dynamo" (it called torch.compile), "spmd". Read when the report is built."""
        modes = {m for m in self._sync_callers if m != "dynamo"}
        if self._dynamo:
            modes.add("dynamo")
        try:
            if X._xla_runtime_is_initialized():
                import torch_xla.runtime as xr
                if X._get_use_eager_mode():
                    modes.add("eager")
                if xr.is_spmd():
                    modes.add("spmd")
        except Exception:
            pass
        return sorted(modes)

    # --- attribution ----------------------------------------------------------------------------------
    def _activate(self, kind: str | None) -> None:
        if kind == self._current:
            return
        if self._current == CALLS and self._mode is not None:
            try:
                self._mode.__exit__(None, None, None)
            except Exception:  # the user's own modes were left unbalanced; never crash their run for it
                pass
            self._mode = None
        if self._current == GRAPHS:
            X._set_ir_debug(self._ir_debug0)
        if kind == CALLS and self._dynamo:
            kind = None  # see _watch_torch_compile
        if kind == CALLS:
            self._mode = _Attribution(self)
            self._mode.__enter__()
        elif kind == GRAPHS:
            X._set_ir_debug(True)
        self._current = kind

    def _watch_torch_compile(self) -> None:
        """Dynamo traces the TorchFunctionModes on the stack into its graphs and guards on the stack: a calls step's
        mode around a compiled function would recompile it each time the mode comes or goes (and break its graph
        wherever the mode's own code cannot be traced). So once the script calls torch.compile (nn.Module.compile
        and @torch.compile go through it), calls attribution stops; graph capture goes on."""
        real = self._real_compile = torch.compile
        adapter = self

        def compile(*args, **kwargs):
            adapter._dynamo = True
            try:
                adapter.dynamo.compiled(args[0] if args else kwargs.get("model"), user_frame(sys._getframe(1))[0])
            except Exception:  # evidence only: never the user's torch.compile call
                pass
            mode = adapter._mode
            if mode is not None and torch.overrides._get_current_function_mode_stack()[-1:] == [mode]:
                adapter._activate(None)  # ours is the innermost mode: leave now, not at the next boundary
            return real(*args, **kwargs)
        functools.update_wrapper(compile, real)
        _not_traced(compile)
        torch.compile = compile

    def _watch_dynamo_graphs(self) -> None:
        """torch.compile's openxla bridge runs each compiled graph through `_run_cached_graph`, outside any sync:
        count those calls (a Python call each), so that they are not taken for a pending graph run early."""
        real = self._real_run_cached = getattr(X, "_run_cached_graph", None)
        if real is None:
            return
        adapter = self

        def run_cached_graph(*args, **kwargs):
            adapter._not_early += 1
            return real(*args, **kwargs)
        X._run_cached_graph = run_cached_graph

    # --- the step boundary ---------------------------------------------------------------------------
    def _marker(self, *args, **kwargs):
        if self._in_marker:  # re-entrant (a callback that syncs): not another step
            return self._real_marker(*args, **kwargs)
        t0 = time.perf_counter()  # own time: from here, less the real marker call
        frame = sys._getframe(1)
        caller, eager = _sync_caller(frame)
        self._sync_callers.add(caller)
        if eager:
            self._sync_callers.add("eager")  # eager mode was on for a stretch (a recipe may turn it off at the end)
        if caller == "dynamo":  # the openxla bridge syncs while it compiles a graph: not the user's step boundary
            launches0 = _launches()
            result = self._real_marker(*args, **kwargs)
            self._not_early += _since(_launches(), launches0)
            return result
        if caller == "torch_xla.compile" and eager:
            # torch_xla.compile's first sync, in eager mode: there is no pending graph to clear, and what launched
            # since the last boundary were eager ops, one by one by design. The region's last sync is the boundary.
            t = time.perf_counter()
            result = self._real_marker(*args, **kwargs)
            eager_ops = _since(_launches(), self._snap.launches)
            self._not_early = max(self._not_early, eager_ops)
            # the loop outside the compiled step (eager_ops rule), from when the last boundary's own work ended
            self._eager_outside = (eager_ops, t - max(self._snap.t, self._left_at))
            return result
        self._in_marker = True
        try:
            site, _ = user_frame(frame)
            kind = self._current
            pending = self._pending_graph() if kind == GRAPHS else None
            grad = torch.is_grad_enabled()
            uncached0 = _counter("UncachedCompile")
            launches0 = uncached0 + _counter("CachedCompile")
            c1 = self.training.cpu()
            t1 = time.perf_counter()
            result = self._real_marker(*args, **kwargs)
            t2 = time.perf_counter()
            c2 = self.training.cpu()
            now = _Snapshot(self._snap, self.training)
            own = _since(now.launches, launches0)  # the launches this sync made itself
            rec = self._record(0, site, now)
            if self.dynamo.on:
                rec.events += self.dynamo.poll()
            self._time_parts(rec, t2 - t1, c2 - c1, c2, _since(self._snap.uncached, uncached0))
            if self._dynamo:
                self._device.unordered = True
            self._device.add(rec)
            # early: the pending lazy graph ran before this sync. Not early: dynamo's graphs, and in eager mode
            # (outside torch_xla.compile) every op, which runs as it is called (no pending graph to cut)
            not_early, self._not_early = self._not_early, 0
            rec.early_executions = 0 if eager else max(0, rec.executions - own - not_early)
            rec.grad_enabled = grad
            rec.attributed = kind is not None
            if self._eager_outside is not None:
                (rec.eager_launches, rec.eager_time_s), self._eager_outside = self._eager_outside, None
            if pending is not None:
                rec.graph_hashes = [pending[0]]
                self._remember_graph(rec, site, pending)
                spmd = self._spmd_graphs.get(pending[0])
                if spmd is not None and not spmd.get("_sent"):  # once per graph, on the step that first ran it
                    spmd["_sent"] = True
                    rec.events.append(Event("spmd", None, {"graph": pending[0], **{k: v for k, v in spmd.items()
                                                                                    if not k.startswith("_")}}))
            self._step_cost(rec, site, pending)
            self._watch_live(rec)
            if rec.compiles and not rec.early_executions:
                self._size_evidence(rec, site, emit=pending is None)
            self._after_step(rec, kind)
            self._on_boundary(rec)
            self._left_at = time.perf_counter()
            rec.own_time_us = ((t1 - t0) + (self._left_at - t2)) * 1e6
            return result
        finally:
            self._in_marker = False

    def _time_parts(self, rec: StepRecord, in_sync: float, cpu_in_sync: float, cpu_now: float,
                    sync_compiles: int) -> None:
        """Launch, device wait and host CPU of a boundary (breakdown.py). In the sync call, the main thread's CPU
        time is launching (tracing the pending graph's hash, lowering, launching) and the rest is blocked: waiting
        for the device to finish the previous graph (torch_xla holds the device lock until it has; at most that
        graph's execution time, `_DeviceTimes`); a sync that compiled is launch net of its compile time. The time
        blocked in an explicit `xm.wait_device_ops()` since the previous sync is device wait too. Host: the main
        thread's CPU since the previous sync, outside this one, those waits and the loader's next()."""
        cpu_in_sync = min(max(cpu_in_sync, 0.0), in_sync)
        if sync_compiles and rec.compiles:
            compile_s = rec.compile_time_s * min(1.0, sync_compiles / rec.compiles)
            rec.launch_time_s, rec.device_wait_s = max(in_sync - compile_s, 0.0), 0.0
        else:
            rec.launch_time_s, rec.device_wait_s = cpu_in_sync, in_sync - cpu_in_sync
        t = self.training
        data_cpu = t.data_cpu - self._data_cpu_mark + t.device_wait_cpu - self._wait_mark[1]
        rec.device_wait_s += t.device_wait - self._wait_mark[0]
        self._data_cpu_mark, self._wait_mark = t.data_cpu, (t.device_wait, t.device_wait_cpu)
        rec.host_cpu_s = max(cpu_now - self._cpu_mark - cpu_in_sync - data_cpu, 0.0)
        self._cpu_mark = cpu_now

    def _record(self, index: int, site: Location | None, now: _Snapshot) -> StepRecord:
        prev = self._snap
        self._snap = now
        compiles = _since(now.uncached, prev.uncached)
        cached = _since(now.cached, prev.cached)
        closure = now.closure_d2h - prev.closure_d2h  # reads in the previous boundary's closures: that step's
        if closure and self._last is not None:
            self._last.closure_reads += closure
        # one constructor call with every field it can take (each boundary makes one)
        rec = StepRecord(
            index=index, wall_time_s=now.t - prev.t, site=site, compiles=compiles, cached_compiles=cached,
            executions=compiles + cached, compile_time_s=self._compile_time_delta() if compiles else 0.0,
            device_to_host=Transfers(max(0, now.d2h - prev.d2h - closure), int(now.d2h_bytes - prev.d2h_bytes)),
            device_to_host_time_s=(now.d2h_ns - prev.d2h_ns) / 1e9 if now.d2h != prev.d2h else 0.0,
            backward_calls=now.backward - prev.backward, optimizer_steps=now.opt - prev.opt,
            host_to_device=Transfers(_since(now.h2d, prev.h2d), None),
            live=(now.live, None) if index >= 0 else None)
        if self.training.data_seen:  # the loop pulls from a loader: its wait for each batch (session.data_wait()
            rec.data_wait_s = now.data_wait - prev.data_wait  # overrides where the program times it itself)
            if not self._data_site_sent and self.training.data_site is not None:
                self._data_site_sent = True
                self.events.append(Event("data_wait", self.training.data_site, {"call": self.training.data_call}))
        if now.fallbacks is not prev.fallbacks:  # the same dict: no counter was read again (no host transfer)
            for name, value in now.fallbacks.items():
                if value != prev.fallbacks.get(name, 0) and _since(value, prev.fallbacks.get(name, 0)):
                    rec.fallback_ops[name] = _since(value, prev.fallbacks.get(name, 0))
        if self.events:
            rec.events, self.events = self.events, []
        if index >= 0:
            self._last = rec
        return rec

    def _compile_time_delta(self) -> float:
        total = _metric("CompileTime")[1] / 1e9
        delta, self._compile_total = total - self._compile_total, total
        return max(delta, 0.0)

    def _after_step(self, rec: StepRecord, kind: str | None) -> None:
        fallbacks = self._snap.fallbacks
        if fallbacks is not self._fallbacks_taken:  # read afresh (a host transfer): else the same dict as before
            self.fallback_seen.update(fallbacks)
            self._fallbacks_taken = fallbacks
        for e in rec.events:
            if e.kind != "compile":  # every recompile needs its own evidence: compiles always re-arm capture
                self._explained.add(_anomaly_key(e.kind, rec, e))
        step = self._steps
        self._steps += 1
        if kind is not None:
            self._step_site[step] = _compile_key(rec.site)
            self._calls_at[_compile_key(rec.site)] += kind == CALLS and self._mode is not None
        self.plan.saw(step, self._unexplained(rec))
        if rec.compiles:
            self._sites_compiled.add(_site_key(rec.site))
        self._activate(self.plan.next_kind(self._steps))

    def _unexplained(self, rec: StepRecord) -> list[tuple]:
        """Anomalies of this step that no attribution step has put a line to yet: only these re-arm."""
        keys = []
        if rec.device_to_host.count:
            keys.append(_anomaly_key("device_to_host_sync", rec))
        keys += [_anomaly_key("op_fallback", rec, op=op) for op in rec.fallback_ops]
        if rec.early_executions > rec.device_to_host.count:
            keys.append(_anomaly_key("graph_break", rec))
        if rec.compiles and _site_key(rec.site) in self._sites_compiled:
            keys.append(_anomaly_key("compile", rec))
        # a size made inside a torch function: a calls step sees which user line called it
        if self.shape_calls_wanted:
            keys += [("shape_call", fn) for fn in sorted(self.shape_calls_wanted) if fn not in self.shape_calls]
        return [k for k in keys if k not in self._explained]

    # --- roofline: the cost of the graph each boundary ran ---------------------------------------------
    def _step_cost(self, rec: StepRecord, site: Location | None, pending: tuple[str, str] | None) -> None:
        """A captured boundary costs its graph's cost (computed once per hash); any other boundary at a site carries
        the cost of the last graph captured there, unless it compiled (a new graph whose cost nobody saw: unknown,
        and the site's cost is forgotten until the next capture). Launching nothing costs nothing. Graphs a host
        read ran early are not captured: their FLOPs are missing (docs/roofline.md)."""
        if not rec.executions:
            rec.flops = rec.bytes_accessed = rec.transcendentals = 0.0
            return
        key = _site_key(site)
        if pending is not None and pending[0] in self._costs:
            found = self._site_cost[key] = (pending[0], self._costs[pending[0]])
            how = "captured"
        elif rec.compiles:
            self._site_cost.pop(key, None)
            found = None
            how = "unknown"
        else:
            found = self._site_cost.get(key)
            how = "carried" if found else "unknown"
        cost = found[1] if found else None
        if cost is None or cost.flops is None:
            how = "unknown"
        else:
            rec.flops, rec.bytes_accessed, rec.transcendentals = cost.flops, cost.bytes_accessed, cost.transcendentals
        self._cost_counts[how] += 1
        if rec.early_executions:
            self._cost_counts["early"] += 1

    def graph_costs(self) -> dict[str, Any]:
        sources = {c.source for c in self._costs.values()}
        source = next((s for s in (hlo_cost.XLA, hlo_cost.TEXT) if s in sources), hlo_cost.UNAVAILABLE)
        notes = sorted({c.note for c in self._costs.values() if c.note})[:3]
        if not self._costs:
            notes.append("no step graph was captured: costs come from graph-capture attribution steps "
                         "(attribution.mode=off or hlo=false turns them off)")
        if self._cost_counts["early"]:
            notes.append(f"{self._cost_counts['early']} boundaries also ran graphs early (a host read): those "
                         "graphs are not captured, so their FLOPs are missing")
        return {"source": source, "scope": "per device (the graph torch_xla runs on one device)",
                "method": "XLA HloCostAnalysis of the pending graph's HLO, captured at graph-capture steps, once per "
                          "graph hash (unoptimized HLO: bytes are counted before fusion, an upper bound); other "
                          "steps carry the cost of their site's last captured graph",
                "boundaries": {k: v for k, v in self._cost_counts.items() if k != "early"},
                "graphs": [{"id": h, **c.to_json(), **self._collectives(h)} for h, c in list(self._costs.items())[:20]],
                "notes": notes}

    def _collectives(self, digest: str) -> dict[str, Any]:
        info = self._spmd_graphs.get(digest)
        if not info or "collectives" not in info:
            return {}
        return {"collectives": info["collectives"], "collective_share_of_bytes": info["collective_share_of_bytes"]}

    def _spmd_devices(self) -> int | None:
        """The devices an SPMD step is partitioned over; None outside SPMD. Asked at graph capture only."""
        if self._spmd is None:
            try:
                import torch_xla.runtime as xr
                if X._xla_runtime_is_initialized() and xr.is_spmd():
                    self._spmd = int(xr.global_runtime_device_count())
            except Exception:
                return None
        return self._spmd

    def meshes(self) -> list[dict]:
        if not self._meshes:
            self._meshes = spmd_meshes()
        return self._meshes

    def hlo_modules(self) -> dict[str, str]:
        """Empty: torch_xla gives the HLO it builds, not the optimized module whose fusions a trace names."""
        return {}

    # --- memory: per captured graph, the device's figures, live tensors ---------------------------------------
    def graph_memory(self, final: bool = True) -> dict[str, Any]:
        """XLA's memory analysis of each captured graph: its HLO (kept when the roofline costed it) compiled once on
        a standalone CPU client, at the end of the run only (`final`), never inside a step."""
        if final:
            t0 = time.perf_counter()
            for digest, proto in list(self._protos.items()):
                if digest not in self._graph_mem:
                    self._graph_mem[digest] = {"id": digest, **mem.from_hlo_proto(proto).to_json()}
                    self._mem_time += time.perf_counter() - t0
                    t0 = time.perf_counter()
        graphs = list(self._graph_mem.values())
        notes = sorted({g["note"] for g in graphs if g.get("note")})[:3]
        if graphs:
            notes.append(f"{len(graphs)} graph(s) compiled for their memory figures in {self._mem_time:.2f} s, after "
                         "the run")
        if not self._protos:
            notes.append("no step graph was captured: memory figures come from graph-capture attribution steps "
                         "(attribution.mode=off or hlo=false turns them off)")
        elif not final:
            notes.append("per-graph memory is analysed when the run ends")
        if graphs:  # the captured HLO has no aliasing: torch_xla adds it when it compiles the graph itself
            aliasing = os.environ.get("XLA_ENABLE_PARAM_ALIASING", "1").lower() not in ("0", "false")
            notes.append("alias_bytes is 0 here: torch_xla aliases the parameters a step updates in place "
                         "(input-output aliasing) when it compiles the graph, after the HLO captured for these "
                         "figures; " + ("it is on (XLA_ENABLE_PARAM_ALIASING unset or 1), so the step's peak is "
                                        "lower by up to the updated parameters' bytes" if aliasing else
                                        "it is OFF in this run (XLA_ENABLE_PARAM_ALIASING=0): every updated "
                                        "parameter is held twice at the step's peak"))
        return {"scope": "per device (the graph torch_xla runs on one device), as XLA's CPU compiler assigns its "
                         "buffers",
                "method": "the captured graph's HLO (the roofline's, once per graph hash) converted to StableHLO and "
                          "compiled on a standalone jaxlib CPU client at the end of the run; its "
                          "CompiledMemoryStats (arguments, outputs, aliasing, temporaries)",
                "graphs": graphs[:20], "notes": notes}

    def device_memory(self) -> dict[str, Any] | None:
        """The runtime's figures for the device (TPU/GPU: `xm.get_memory_info`); None on the CPU."""
        if not X._xla_runtime_is_initialized():
            return None
        try:
            import torch_xla.core.xla_model as xm
            import torch_xla.runtime as xr
            if str(xr.device_type()).upper() == "CPU":
                return None
            info = xm.get_memory_info(torch_xla.device())
        except Exception:
            return None
        return {"bytes_limit": info.get("bytes_limit"), "bytes_in_use": info.get("bytes_used"),
                "peak_bytes_in_use": info.get("peak_bytes_used")}

    def _watch_live(self, rec: StepRecord) -> None:
        """Live XLA tensors rose at several boundaries in a row: once, find what holds them (live_holders.py): the
        containers of XLA tensors now, and at the next boundary the one that grew."""
        if self._holders_before is not None:
            before, self._holders_before = self._holders_before, None
            found = find_holder(_is_xla_tensor, _tensor_bytes, sys._getframe(2), before)
            if found is not None:
                rec.events.append(Event("memory_growth", found[0], found[1]))
            rec.attributed = True
        elif self._watch.observe(rec.live_arrays) and self.cfg.get("mode") != "off":
            self._holders_before = holder_counts(_is_xla_tensor)
            rec.attributed = True

    # --- graphs for recompile diffs -------------------------------------------------------------------
    def _size_evidence(self, rec: StepRecord, site: Location | None, emit: bool) -> None:
        """What is cheap at every compile: the size of the graph this sync compiled (`TensorsGraphSize`, sampled per
        sync) and the sizes of the data copied to the device since the previous boundary (`OutboundData` samples,
        wall-clock stamped); both read only when the sync compiled. Against the closest earlier graph of the site
        they tell a change of the ops from a change of input sizes, without the HLO."""
        data = X._xla_metric_data("TensorsGraphSize")
        if not data or not data[2]:
            return
        size = int(data[2][-1][1])
        since = time.time() - rec.wall_time_s
        out = X._xla_metric_data("OutboundData")
        copied = sorted(int(v) for t, v in (out[2] if out else ()) if t >= since)
        batch = self.training.batch_shapes
        seen = self._graph_sizes.setdefault(_site_key(site), [])
        before = next((c for c in reversed(seen) if c[0] == size), seen[-1] if seen else None)
        seen.append((size, copied, batch))
        del seen[:-4]
        if before is None or not emit:
            return
        location = None
        if before[0] != size:
            detail = {"cause": "graph_structure", "differences": [f"graph size {before[0]} -> {size} IR nodes"]}
        elif batch and before[2] and len(batch) == len(before[2]) and batch != before[2]:
            # the same ops on a batch of other shapes (the loader's last batch of a pass, variable lengths)
            detail = {"cause": "input_shapes", "differences": [
                f"same graph size ({size} IR nodes); the loader's batch changed shape: "
                f"{', '.join(map(_dims_text, before[2]))} -> {', '.join(map(_dims_text, batch))}"]}
            location = self.training.batch_site  # the loop line that took the batch
        elif copied and before[1] and len(copied) == len(before[1]) and copied != before[1]:
            # the same ops on differently sized data: the batch (or another input) changed shape
            detail = {"cause": "input_shapes", "differences": [
                f"same graph size ({size} IR nodes); the data copied to the device for this step changed size: "
                f"{_sizes(before[1])} -> {_sizes(copied)}"], "copied": [before[1], copied]}
        else:
            detail = {"cause": None, "differences": [
                f"same graph size ({size} IR nodes): an input shape, dtype or baked-in constant changed, not the "
                "ops (which one was not captured)"]}
        event = Event("compile", location, {"key": _compile_key(site), "graph_size": [before[0], size],
                                            "evidence": "graph size", **detail})
        if detail.get("copied"):
            self._unresolved.append(event)  # the line that copies data of the old size: _resolve_locations
        rec.events.append(event)

    def _pending_graph(self) -> tuple[str, str] | None:
        """Hash and HLO of what this sync is about to run. Costs a heap scan (~0.1 s): attribution steps only."""
        try:
            # no warnings.catch_warnings(): its exit resets every once-per-line registry, so the user's own warnings
            # would print again after each attribution step
            live = _live_xla_tensors()
            if not live:
                return None
            digest = X._get_graph_hash(live)
            digest = digest.hex() if isinstance(digest, (bytes, bytearray)) else str(digest)
            text = X._get_xla_tensors_hlo(live)
            if digest not in self._costs and self._spmd_devices():  # what one device runs, and its collectives
                cost, self._spmd_graphs[digest] = spmd_graph(text, lambda: X._get_xla_tensors_hlo_proto(live),
                                                             self._spmd, self.meshes())
                if cost is not None:
                    self._costs[digest] = cost
            if digest not in self._costs:  # once per graph: XLA's cost analysis of the same live tensors' HLO
                self._costs[digest] = hlo_cost.cost(lambda: X._get_xla_tensors_hlo_proto(live), text)
                if len(self._protos) < 16:
                    try:  # the graph the sync runs: its outputs are the tensors with pending IR (not device data)
                        pending = [t for t in live if _pending_ir(t)]
                        if pending:
                            self._protos[digest] = X._get_xla_tensors_hlo_proto(pending)
                    except Exception:  # the memory figures of this graph stay unknown
                        pass
            return digest, text
        except Exception as exc:  # never break the user's step for a diagnostic
            self.notes.append(f"graph capture failed: {str(exc).splitlines()[0]}")
            return None

    def _remember_graph(self, rec: StepRecord, site: Location | None, pending: tuple[str, str]) -> None:
        graphs = self._hlo_by_site.setdefault(_site_key(site), OrderedDict())
        digest, hlo = pending
        if rec.compiles and graphs and digest not in graphs:
            # the graph it replaced: the site's latest, unless an earlier one is far closer (gradient accumulation
            # runs the micro-batch graph and the update graph at one site: the update graph is compared with the
            # last update graph). A near tie goes to the latest, so the same graphs get the same cause every run.
            diffs = [(k, hlo_diff.diff_hlo(v, hlo)) for k, v in reversed(graphs.items())]
            old_digest, d = min(diffs, key=lambda kd: kd[1].distance)
            if diffs[0][1].distance <= 2 * d.distance:
                old_digest, d = diffs[0]
            special = hlo_diff.special_scalar_change(d)
            event = Event("compile", self._graph_location(d), {
                "key": _compile_key(site), "cause": "special_scalar" if special else d.cause,
                "special_scalars": special,
                "differences": d.summary_lines(place=_user_place), "graph_hashes": [old_digest, digest],
                "graph_size": list(d.size)})
            if d.reshaped_inputs:
                event.detail.new_shapes = [b for _, b in d.reshaped_inputs]
            elif event.detail.cause == "internal_shapes":
                # the line that made the size: a root op built on a user line, else the user line that called the
                # torch function (F.interpolate) the root ops were built in - seen on a calls step
                roots = d.shape_roots()
                event.location = next((loc for loc in map(_user_line, roots) if loc), None)
                if event.location is None:
                    fn = next((function_at(i.source_file, i.source_line) for i in roots
                               if i.source_file and i.source_line), None)
                    if fn and fn not in ("?", "<module>"):
                        event.detail.shape_call = fn
                        event.detail.differences.insert(0, f"shapes start to change inside {fn}() (torch)")
                        self.shape_calls_wanted.add(fn)
            self._unresolved.append(event)
            rec.events.append(event)
        graphs[digest] = hlo
        graphs.move_to_end(digest)
        while len(graphs) > 4:
            graphs.popitem(last=False)

    def _graph_location(self, d: hlo_diff.GraphDiff) -> Location | None:
        """The user's line whose op differs first (HLO metadata holds the innermost frame only, so ops built
        inside torch itself - nn.Linear's matmul - cannot name a user line and are skipped). New input shapes: the
        line that put the changed input on the device (the parameter's own metadata: its upload ran with IR debug
        on), else the loop line a device loader's batch of new shapes came from, else _resolve_locations."""
        if d.reshaped_inputs:
            for instr in d.changed_inputs():
                loc = _user_line(instr)
                if loc is not None:
                    return loc
            return self.training.batch_site if self.training.batch_changed else None
        for instr in d.first_changed_sources():
            loc = _user_line(instr)
            if loc is not None:
                return loc
        return None

    def _resolve_locations(self) -> None:
        """Point shape-change recompiles at the user line that moved differently-shaped data to the device:
        the line seen moving several shapes, else one that moved a shape the new graph takes as input."""
        # a line that moved other shapes in one step than in another (not one that moves an x and a y every step)
        varying_all = [loc for k, (loc, _) in self.h2d_lines.items()
                       if len({frozenset(v) for v in self.h2d_steps.get(k, {}).values()}) > 1]
        indexed = [loc for loc, ints in self.index_lines.values() if len(ints) > 1]
        for event in self._unresolved:
            new_shapes, event.detail.new_shapes = event.detail.new_shapes, None
            copied, event.detail.copied = event.detail.copied, None
            # lines seen uploading in steps this graph's site ended (a training loop's upload line is not an
            # evaluation pass's, even where their batches have the same size)
            here = {k for k, steps in self.h2d_steps.items()
                    if any(self._step_site.get(j) == event.detail.key for j in steps)}
            varying = [loc for loc in varying_all if (loc.file, loc.line) in here]
            if copied is not None:
                # a step whose graph was not captured: the data copied in changed size; the line seen (on a calls
                # step) copying data of a size that changed, or the one line seen copying several shapes
                if event.location is None:
                    gone = set(copied[0]) - set(copied[1])
                    sized = [self.h2d_lines[k][0] for k, sizes in self.h2d_bytes.items() if sizes & gone and k in here]
                    # else the line that copies data to the device on every calls step of this site (in file order:
                    # x before y)
                    every = sorted((loc for k, (loc, _) in self.h2d_lines.items()
                                    if k in here and len(self.h2d_steps[k]) == self._calls_at[event.detail.key]),
                                   key=lambda loc: (loc.file, loc.line))
                    pick = sized if len(sized) == 1 else varying if len(varying) == 1 else every
                    event.location = pick[0] if pick else None
            elif new_shapes is not None:
                dims = {_dims(s) for s in new_shapes}
                match = [loc for k, (loc, shapes) in self.h2d_lines.items()
                         if shapes & dims and (k in here or not here)]
                if event.location is not None:
                    pass  # the graph's own metadata named the line that put the changed input on the device
                elif len(varying) == 1 or (not here and len(varying_all) == 1):
                    event.location = (varying or varying_all)[0]
                elif match:
                    event.location = match[0]
            elif event.detail.shape_call:
                fn, event.detail.shape_call = event.detail.shape_call, None
                lines = list(self.shape_calls.get(fn, {}).values())
                changing = [loc for loc, shapes in lines if len(shapes) > 1]
                pick = changing if len(changing) == 1 else [loc for loc, _ in lines] if len(lines) == 1 else []
                if pick:
                    event.location = pick[0]
                    shapes = sorted(self.shape_calls[fn][(pick[0].file, pick[0].line)][1])
                    event.detail.differences = [
                        f"shapes start to change inside {fn}(), called at {os.path.basename(pick[0].file)}:"
                        f"{pick[0].line} (it returned {', '.join(map(_dims_text, shapes[:4]))} on calls steps)"
                        if d.startswith("shapes start to change inside ") else d for d in event.detail.differences]
            elif event.detail.cause == "constant" and len(indexed) == 1:
                # a device tensor indexed by a changing Python int: the getitem line itself, not where torch_xla
                # materialised the view (HLO metadata can name the later line that first used it)
                event.detail.indexed_with = sorted(self.index_lines[(indexed[0].file, indexed[0].line)][1])[:6]
                event.location = indexed[0]
        self._unresolved.clear()


def _user_line(instr: hlo_diff.Instr) -> Location | None:
    """The user's line an HLO instruction's metadata names, if it is the user's."""
    if instr.source_file and is_user_file(instr.source_file):
        path = os.path.abspath(instr.source_file)
        return Location(path, instr.source_line or 0, function_at(path, instr.source_line or 0))
    return None


def _user_place(instr: hlo_diff.Instr) -> str | None:
    """`train.py:34`: the user's line an HLO instruction was built at, for a difference's text."""
    loc = _user_line(instr)
    return f"{os.path.basename(loc.file)}:{loc.line}" if loc else None


class _DeviceTimes:
    """The device's busy time per boundary from torch_xla's execution metrics. `ExecuteTime` (and
    `ExecuteReplicatedTime` under SPMD) times each graph from its launch to the moment the device finished it (the
    PJRT future's ready callback); each sample is stamped with the wall clock (seconds) when it was recorded, its
    value in nanoseconds. Reading the metric copies its last 1024 samples (~50 us; ~150 us with our scan), so it is
    read every EVERY boundaries or MAX_GRAPHS graphs (and before a report), never per boundary. The device runs the
    graphs one after the other, in launch order: the new samples, by start time, are the boundaries' launches
    (`executions`) in order - boundary k's device time is the busy time of the graphs launched in its step. A
    sample's span also holds the time its graph waited in the queue behind the graphs launched before it (the sync
    returns before the device finishes: the host runs ahead), so a graph's busy time starts when the one before it
    ended: end_i - max(start_i, end_(i-1)) (the previous end kept across reads; the sum is the union of the spans).
    Its sync waited for the graphs of the step before, so its `device_wait_s` is capped at their busy time (the
    rest of a blocked sync is the CPU busy elsewhere: `other`).
    Boundaries whose graphs have not finished wait for a later read (the last report's read polls the metric a
    little for them, never a sync); where samples are missing (more graphs between reads than the metric keeps,
    graphs torch.compile ran outside any sync) the time stays unknown."""

    EVERY = 256  # boundaries between reads...
    MAX_GRAPHS = 384  # ...or fewer, once this many graphs are pending (the metric keeps 1024 samples)
    METRICS = ("ExecuteTime", "ExecuteReplicatedTime")

    def __init__(self):
        self.pending: list[StepRecord] = []
        self.offset = time.time() - time.perf_counter()  # the samples' wall clock -> perf_counter
        self.since = time.perf_counter()  # graphs that started before the session are not its steps'
        self.done: dict[tuple, None] = {}  # samples already given to a boundary, oldest first (bounded)
        self.consumed = {m: _metric(m)[0] for m in self.METRICS}  # samples counted so far, per metric
        self.prev_busy: float | None = None  # device time of the boundary before the first pending one
        self.unordered = False  # graphs ran outside the syncs (torch.compile): no order to go by
        self.graphs = 0  # graphs launched by the pending boundaries
        self.prev_end: float | None = None  # when the device finished the last graph given to a boundary
        self.busy_s, self.timed_graphs = 0.0, 0  # busy time given so far, over how many graphs
        self.due = (self.EVERY, self.MAX_GRAPHS)  # the next read: once this many boundaries or graphs are pending

    WAIT_S = 2.0  # the last read polls this long at most for graphs still running when the program ended

    def add(self, rec: StepRecord) -> None:
        self.pending.append(rec)
        self.graphs += rec.executions
        if len(self.pending) >= self.due[0] or self.graphs >= self.due[1]:
            self.read(final=False)

    def finish(self) -> None:
        """The last read: the graphs the program launched last may still run (its syncs returned before the device
        finished) - poll the metric (no sync, no device work) until they are in, or for what they should take at
        the busy time per graph seen so far (1.5x, + 50 ms; WAIT_S at most, and where none finished yet: a graph no
        sample comes for costs no more)."""
        self.read(final=False)
        wait = min(self.WAIT_S, 0.05 + 1.5 * self.busy_s / self.timed_graphs * self.graphs) if self.timed_graphs \
            else self.WAIT_S  # (none finished yet: the most)
        deadline = time.perf_counter() + wait
        while self.pending and not self.unordered and time.perf_counter() < deadline:
            time.sleep(0.01)
            self.read(final=False)
        self.read()

    def read(self, final: bool = True) -> None:
        """Give the pending boundaries, in order, the busy time of their graphs; a boundary whose graphs have not
        all finished stays pending with those after it (`final`: their time is unknown)."""
        if not self.pending:
            return
        fresh: list[tuple[float, float, tuple]] = []
        lost = False
        done, consumed, offset, since = self.done, self.consumed, self.offset, self.since
        for name in self.METRICS:
            data = X._xla_metric_data(name)
            if not data:
                continue
            count, samples = data[0], data[2]
            new = []
            for ts, value in reversed(samples):
                key = (ts, value, name)
                start = ts - offset - value / 1e9
                if key in done or start < since:
                    break
                new.append((start, value / 1e9, key))
            lost = lost or count - self.consumed[name] > len(new)
            fresh += new
        fresh.sort()
        taken = 0
        resolved = 0
        for rec in self.pending:
            n = rec.executions
            if not (lost or self.unordered) and taken + n > len(fresh) and not final:
                break  # still running (or not yet recorded): the next read
            if lost or self.unordered or taken + n > len(fresh):
                rec.device_time_s = None
            else:  # each graph busy from its launch, or from when the one before it finished (queued behind it)
                busy, prev_end = 0.0, self.prev_end
                for i in range(taken, taken + n):
                    begin, span, key = fresh[i]
                    end = begin + span
                    busy += max(end - (begin if prev_end is None else max(begin, prev_end)), 0.0)
                    prev_end = end if prev_end is None else max(prev_end, end)
                    done[key] = None
                    consumed[key[2]] += 1
                self.prev_end, rec.device_time_s = prev_end, busy
                taken += n
                self.busy_s, self.timed_graphs = self.busy_s + busy, self.timed_graphs + n
            if rec.device_wait_s is not None:  # its sync waited for the step before's graphs, at most
                rec.device_wait_s = min(rec.device_wait_s, self.prev_busy) if self.prev_busy is not None else \
                    rec.device_wait_s
            self.prev_busy = rec.device_time_s
            resolved += 1
        if lost:  # start again from what the metric holds now
            for name in self.METRICS:
                self.consumed[name] = _metric(name)[0]
            for _, _, key in fresh:
                self.done[key] = None
            self.prev_end = None
        if len(self.done) > 8192:  # keep the newest 4096, at once: popping a dict's oldest key one by one rescans
            self.done = dict.fromkeys(list(self.done)[-4096:])  # its emptied front (~150 us per read measured)
        self.pending = self.pending[resolved:]
        self.graphs = sum(r.executions for r in self.pending)
        # those still running count towards the next read, not every boundary's (a host far ahead of the device)
        self.due = (len(self.pending) + self.EVERY, self.graphs + self.MAX_GRAPHS)


def _live_xla_tensors() -> list[torch.Tensor]:
    """The live tensors that torch_xla itself backs: the only ones the graph-hash/HLO bindings may be given.

    A device that says "xla" is not enough: torch.compile leaves FakeTensors (and functional wrappers around them)
    of its traced graphs alive, SPMD has XLAShardedTensor wrappers, and `_get_graph_hash` aborts the whole process (a
    C++ check, no Python error) on any tensor whose impl is not an XLA tensor. `_xla_get_tensor_id` resolves a
    tensor the same way but raises a RuntimeError instead, so a tensor it answers for is one the bindings accept.
    A tensor found through the heap can also be one whose Python object C++ keeps alive (its impl owns the object,
    not the other way round): holding it does not keep the impl alive, and when the C++ owner lets go the object
    becomes an undefined tensor, which `_get_graph_hash` aborts on just the same. `_fix_weakref()` (what torch does
    for a tensor reached through a weak reference) makes the object own its impl again for as long as we hold it;
    on a tensor that already owns it, it does nothing (tests/test_modes.py)."""
    tensor = torch.Tensor
    candidates = []
    for o in gc.get_objects():
        # type(), not isinstance(): isinstance reads `__class__`, which some objects answer with a DeprecationWarning
        if issubclass(type(o), tensor):
            try:
                o._fix_weakref()  # own the impl while we hold the object (what torch's WeakIdRef does)
                if o.device.type == "xla":  # a subclass may run Python here (__torch_function__)
                    candidates.append(o)
            except Exception:
                pass
    tensor_id, live = X._xla_get_tensor_id, []
    for o in candidates:
        try:
            tensor_id(o)
        except Exception:  # fake, functional over fake, wrapper subclass, freed: not an XLA tensor
            continue
        live.append(o)
    return live


def _python_ints(index) -> tuple | None:
    """The Python ints in an index expression (t[3], t[i, 1:5]); None if there are none."""
    parts = index if isinstance(index, tuple) else (index,)
    out = []
    for p in parts:
        if isinstance(p, bool):
            continue
        if isinstance(p, int):
            out.append(p)
        elif isinstance(p, slice):
            out.extend(v for v in (p.start, p.stop, p.step) if isinstance(v, int))
    return tuple(out) or None


def _dims(shape: str) -> tuple[int, ...] | None:
    if "[" not in shape:
        return None
    inner = shape[shape.find("[") + 1:shape.find("]")]
    return tuple(int(x) for x in inner.split(",") if x.strip().isdigit())


def _anomaly_key(kind: str, rec: StepRecord, event: Event | None = None, op: str | None = None) -> tuple:
    if kind == "op_fallback":
        ops = event.detail.ops if event else [op]
        return (kind, ops[0] if ops else None)
    if kind == "compile":
        return (kind, _site_key(rec.site))
    return (kind,)


def _compile_key(site: Location | None) -> str:
    from ..compiles import site_key
    return site_key(site)


def _dims_text(shape: tuple) -> str:
    return "[" + ",".join(map(str, shape)) + "]"


def _sizes(values: list[int]) -> str:
    """Transfer sizes in bytes, as a short list: '3 x 512 B, 64 B'."""
    parts = [f"{n} x {v} B" if n > 1 else f"{v} B" for v, n in sorted(Counter(values).items(), reverse=True)]
    return ", ".join(parts[:4]) + (", ..." if len(parts) > 4 else "")


def _site_key(site: Location | None) -> tuple:
    return (site.file, site.line) if site else ("?", 0)


def _is_xla_tensor(x) -> bool:
    try:
        return isinstance(x, torch.Tensor) and x.device.type == "xla"
    except Exception:
        return False


def _tensor_bytes(x) -> int:
    return int(x.element_size() * x.numel())  # metadata: no sync


def _pending_ir(t: torch.Tensor) -> bool:
    """A tensor whose value the next sync computes (its IR is not just device data): an output of the graph."""
    info = X._get_xla_tensor_debug_info(t)
    ir = info.split("\nIR:", 1)[1].split("\n", 1)[0] if "\nIR:" in info else ""
    return bool(ir.strip()) and "xla::device_data" not in ir
