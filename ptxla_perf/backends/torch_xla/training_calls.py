"""The calls that tell a training iteration apart, and the training thread's waits (training_thread.py: the main
thread, or a launched child's per-device worker thread): hooks on autograd, the optimizer's
step, `xm.add_step_closure` closures, the DataLoader's next() and `xm.wait_device_ops()`."""
from __future__ import annotations

import sys
import threading
import time
from typing import Any, Callable

import torch
import torch.autograd

from ...model.faults import guarded, shielded
from ...frames import user_frame
from ...model.records import Location
from ...model.training_thread import TRAINING
from . import _private as P
from ._private import X
from .counters import metric


def not_traced(*fns: Callable) -> None:
    """Dynamo neither compiles frames of these functions nor inlines them (a graph break, as at the binding or torch
    function they stand in for); what they call is compiled as before. Without it, a hook that runs eagerly inside a
    compiled region (Tensor.backward after a graph break, a sync inside a compiled function) is compiled as a frame of
    its own, guarded on the values of our counters: a recompile at every step."""
    skip = P.dynamo_skip()
    if skip is None:  # no dynamo (or it moved): nothing to keep out of
        return
    for fn in fns:
        try:
            skip(fn)
        except Exception:
            pass


def shapes_of(item, limit: int = 8) -> tuple:
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


class Waited:
    """Wall and training-thread CPU time spent in one kind of wait (a loader's next(), a wait for the device)."""

    __slots__ = ("wait", "cpu")

    def __init__(self):
        self.wait = 0.0
        self.cpu = 0.0


def _wrap(real: Callable, fn: Callable) -> Callable:
    fn.__wrapped__ = real
    fn.__doc__ = real.__doc__
    return fn


class TrainingCalls:
    """Counts autograd backward passes and optimizer steps (torch's global post-step hook), and host reads made
    inside `xm.add_step_closure` closures (they run right after the step's sync, so they are the finished step's,
    not the next one's); times the DataLoader's next() and explicit device waits; notes the shapes of the batches a
    device loader yields. Each hook is installed only where its names exist (_private.CAPS)."""

    def __init__(self):
        self.backward = 0
        self.optimizer_steps = 0
        self.closure_reads = 0
        self.in_closure = False
        self.batch_shapes: tuple | None = None  # shapes of the batch an MpDeviceLoader yielded last
        self.batch_site: Location | None = None  # the user's line that took a batch of new shapes from it
        self.batch_changed = False  # the last batch's shapes differ from the one before
        # time the training thread waited in a DataLoader's next() (its CPU time there is not host time of the step)
        self.data = Waited()
        # time the training thread blocked in xm.wait_device_ops() (until the device finished what was launched)
        self.device = Waited()
        self.cpu = TRAINING.cpu  # the training thread's CPU clock (settled at the first boundary)
        self.data_seen = False
        self.data_site: Location | None = None  # where the loop pulls from a loader
        self.data_call: str | None = None
        self._in_next = False
        self.loop_boundary: Callable[[Any], None] | None = None  # Marker.loop_boundary, set by the adapter
        self._undo: list[Callable[[], None]] = []
        self._handle = None

    def install(self) -> None:
        self._hook_autograd()
        if P.CAPS.closure_reads:
            self._hook_closures()
        if P.CAPS.loader_shapes:
            self._hook_device_loader()
        if P.CAPS.data_wait:
            cls = P.data_loader_iter()
            real_iter_next = cls.__next__

            def iter_next(it, *args, **kwargs):  # the DataLoader's own next(): the time the loop waits for a batch
                return self.timed_next(real_iter_next, "DataLoader", it, *args, **kwargs)
            cls.__next__ = _wrap(real_iter_next, iter_next)
            self._undo.append(lambda: setattr(cls, "__next__", real_iter_next))
        if P.CAPS.device_wait:
            real_wait = X._xla_wait_device_ops

            def wait_device_ops(*args, **kwargs):  # xm.wait_device_ops(): blocked until the device is idle
                return self.timed_wait(real_wait, *args, **kwargs)
            not_traced(_wrap(real_wait, wait_device_ops))
            X._xla_wait_device_ops = wait_device_ops
            self._undo.append(lambda: setattr(X, "_xla_wait_device_ops", real_wait))
        if P.CAPS.optimizer_steps:
            from torch.optim.optimizer import register_optimizer_step_post_hook
            self._handle = register_optimizer_step_post_hook(self._on_optimizer_step)

    def _hook_autograd(self) -> None:
        real_backward, real_grad = torch.autograd.backward, torch.autograd.grad

        def backward(*args, **kwargs):
            self.backward += not P.fake_mode_active()
            return real_backward(*args, **kwargs)

        def grad(*args, **kwargs):
            self.backward += not P.fake_mode_active()  # torch.compile's aot_autograd traces with grad on fakes
            return real_grad(*args, **kwargs)
        not_traced(_wrap(real_backward, backward), _wrap(real_grad, grad))
        torch.autograd.backward, torch.autograd.grad = backward, grad

        def undo():
            torch.autograd.backward, torch.autograd.grad = real_backward, real_grad
        self._undo.append(undo)

    def _hook_closures(self) -> None:
        xm = P.xla_model()
        real_closures = xm._run_step_closures

        def run_step_closures(*args, **kwargs):
            ctx = xm._get_device_context()
            if not getattr(ctx, "step_closures", None) and not getattr(ctx, "async_step_closures", None):
                return real_closures(*args, **kwargs)  # nothing queued: no metric read (~60 us when full)
            before = metric("TransferFromDeviceTime")[0]
            self.in_closure = True
            try:
                return real_closures(*args, **kwargs)
            finally:
                self.in_closure = False
                self.closure_reads += metric("TransferFromDeviceTime")[0] - before
        not_traced(_wrap(real_closures, run_step_closures))
        xm._run_step_closures = run_step_closures
        self._undo.append(lambda: setattr(xm, "_run_step_closures", real_closures))

    def _hook_device_loader(self) -> None:
        cls = P.parallel_loader().PerDeviceLoader
        real_next = cls.next

        def loader_next(loader, *args, **kwargs):  # the batch's shapes: cheap evidence for an input-shape recompile
            # not timed as a data wait: its own thread prefetches, and its queue hand-off under CPU contention is
            # noise, not an input pipeline (a toy step measured 0.9-3 ms of it)
            item = real_next(loader, *args, **kwargs)
            shapes = shapes_of(item)
            if shapes != self.batch_shapes:  # a batch of other shapes: the loop line that took it (a frame walk)
                self.batch_changed = self.batch_shapes is not None
                self.batch_site = user_frame(sys._getframe(1))[0]
            else:
                self.batch_changed = False
            self.batch_shapes = shapes
            return item
        loader_next.__wrapped__ = real_next
        not_traced(loader_next)
        cls.next = loader_next
        self._undo.append(lambda: setattr(cls, "next", real_next))

    def timed_next(self, real, what: str, *args, **kwargs):
        """Time a DataLoader's next() on the training thread (a loader's own prefetch thread, MpDeviceLoader's, is
        not the training loop waiting), the outermost call only. Two clock reads per batch; the loop's line is looked
        up once. (Its own code object: the stack sampler counts time under it as data, sampler_codes.)"""
        if self._in_next or threading.get_ident() != TRAINING.ident:
            return real(*args, **kwargs)
        if self.loop_boundary is not None:  # a loop that never syncs: the batch before ends here (Marker)
            guarded("torch_xla.loop_boundary", self.loop_boundary, sys._getframe(2))
        self._in_next = True
        try:
            return self._timed(self.data, real, args, kwargs)
        finally:
            self._in_next = False
            if not self.data_seen:
                self.data_seen, self.data_call = True, what
                caller = sys._getframe(2)
                self.data_site = guarded("torch_xla.data_site", lambda: user_frame(caller)[0])

    def timed_wait(self, real, *args, **kwargs):
        """Time an explicit wait for the device on the training thread (the breakdown's `device` part, not `other`).
        (Its own code object: the sampler counts time under it as the sync's, sampler_codes.)"""
        if threading.get_ident() != TRAINING.ident:
            return real(*args, **kwargs)
        return self._timed(self.device, real, args, kwargs)

    def _timed(self, into: Waited, real: Callable, args: tuple, kwargs: dict[str, Any]):
        """Call `real`, adding its wall time and the training thread's CPU time in it to `into`; if our timing fails
        (faults.py), `real` is still called exactly once."""
        return shielded("torch_xla.timed_call", lambda call: self._time_call(into, call, args, kwargs), real, *args,
                        **kwargs)

    def _time_call(self, into: Waited, real: Callable, args: tuple, kwargs: dict[str, Any]):
        c0 = self.cpu()
        t0 = time.perf_counter()
        try:
            return real(*args, **kwargs)
        finally:
            into.wait += time.perf_counter() - t0
            into.cpu += self.cpu() - c0

    def _on_optimizer_step(self, *_args) -> None:
        self.optimizer_steps += 1

    def uninstall(self) -> None:
        for undo in reversed(self._undo):
            undo()
        self._undo = []
        if self._handle is not None:
            self._handle.remove()
            self._handle = None
