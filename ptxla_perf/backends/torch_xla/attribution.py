"""Attribution steps (docs/attribution.md): which kind each step is ("graphs": capture the pending graph's HLO;
"calls": a TorchFunctionMode that blames the torch call that compiled, ran a graph early or copied to the host),
and re-arming after an anomaly no attribution step has explained yet."""
from __future__ import annotations

import functools
import sys
from collections import Counter
from typing import Any, Callable

import torch
from torch.overrides import TorchFunctionMode

from ..attribution_plan import CALLS, GRAPHS, AttributionPlan
from ...analysis.compiles import site_key as compile_key
from ...analysis.figures import FallbackCopies
from ...model.faults import FAULTS, check
from ...frames import user_frame
from ...model.records import Event, Location, StepRecord
from ...analysis.step_predicates import early_not_read, host_reads
from . import _private as P
from ._private import X
from .counters import call_signal, eager_mode, fallbacks, metric
from .modes import DynamoWatch
from .training_calls import TrainingCalls, not_traced


def python_ints(index) -> tuple | None:
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


def site_of(site: Location | None) -> tuple:
    return (site.file, site.line) if site else ("?", 0)


class CallEvidence:
    """What calls steps saw, by the user's line: uploads to the device (shapes, sizes, per step), Python ints used
    to index device tensors, and the lines calling torch functions whose own ops changed a graph's shapes. Read
    when the run ends to put recompiles at a line (compiles.resolve_locations)."""

    def __init__(self):
        self.h2d_lines: dict[tuple, tuple[Location, set]] = {}  # user line -> shapes it moved to the device
        self.h2d_bytes: dict[tuple, set] = {}  # user line -> sizes in bytes of what it moved to the device
        self.h2d_steps: dict[tuple, dict[int, set]] = {}  # user line -> step -> shapes it moved in that step
        self.index_lines: dict[tuple, tuple[Location, set]] = {}  # user line -> Python ints it indexed with
        # torch functions (by name) whose own ops started a change of shapes inside a graph, and the user lines
        # seen calling them on calls steps (with the shapes they returned)
        self.shape_calls_wanted: set[str] = set()
        self.shape_calls: dict[str, dict[tuple, tuple[Location, set]]] = {}
        self.calls_at: Counter = Counter()  # calls attribution steps so far, by the compile key of their site
        self.step_site: dict[int, str] = {}  # boundary -> the compile key of its site (attribution steps)
        self.fallback_seen: dict[str, int] = {}  # fallback op counters as last seen (a new one: the call's)

    def indexed(self, loc: Location, ints: tuple) -> None:
        self.index_lines.setdefault((loc.file, loc.line), (loc, set()))[1].add(ints)

    def uploaded(self, loc: Location, step: int, result: torch.Tensor) -> None:
        key, shape = (loc.file, loc.line), tuple(result.shape)
        self.h2d_lines.setdefault(key, (loc, set()))[1].add(shape)
        self.h2d_steps.setdefault(key, {}).setdefault(step, set()).add(shape)
        self.h2d_bytes.setdefault(key, set()).add(result.numel() * result.element_size())

    def shape_call(self, name: str, loc: Location, result: torch.Tensor) -> None:
        self.shape_calls.setdefault(name, {}).setdefault((loc.file, loc.line), (loc, set()))[1].add(
            tuple(result.shape))

    def new_fallbacks(self) -> list[str]:
        """The fallback ops whose counters moved since last seen (a call that fell back)."""
        moved = {k: v for k, v in fallbacks().items() if v != self.fallback_seen.get(k, 0)}
        self.fallback_seen.update(moved)
        return sorted(moved)


class CallMode(TorchFunctionMode):
    """Active only on "calls" attribution steps: blames the torch call (and the user's line that made it)
    whenever the runtime launched a graph or copied to the host inside that call. IR nodes built inside this
    mode carry its frame as their innermost one, which is why graph capture runs on other steps."""

    def __init__(self, evidence: CallEvidence, training: TrainingCalls, emit: Callable[[Event], None],
                 step: Callable[[], int]):
        super().__init__()
        self.evidence, self.training, self.emit, self.step = evidence, training, emit, step
        self.d2h = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if torch.compiler.is_compiling():  # dynamo traces modes on the stack: give it nothing to trace (no breaks)
            return func(*args, **kwargs)
        try:
            check("torch_xla.attribution")
            before = call_signal()
        except Exception as exc:  # our failure (faults.py): the call goes on unobserved
            FAULTS.record("torch_xla.attribution", exc)
            return func(*args, **kwargs)
        result = func(*args, **kwargs)
        try:
            self._observe(func, args, result, before, sys._getframe(1))
        except Exception as exc:
            FAULTS.record("torch_xla.attribution", exc)
        return result

    def _observe(self, func, args, result, before: tuple, frame) -> None:
        """What one torch call did: a transfer, an indexed read, an upload, shapes a Python torch function made."""
        name = getattr(func, "__name__", str(func))
        if call_signal() != before:  # cheap counters moved: only now read the (costlier) transfer metric
            self._check(name, args, before)
        if name == "__getitem__" and args and isinstance(args[0], torch.Tensor) and args[0].device.type == "xla":
            ints = python_ints(args[1] if len(args) > 1 else None)
            if ints:
                loc, _ = user_frame(frame)
                if loc:
                    self.evidence.indexed(loc, ints)
        elif name in ("to", "tensor", "as_tensor") and isinstance(result, torch.Tensor) \
                and result.device.type == "xla" and not any(
                    isinstance(a, torch.Tensor) and a.device.type == "xla" for a in args):
            loc, _ = user_frame(frame)
            if loc:
                self.evidence.uploaded(loc, self.step(), result)
        elif name in self.evidence.shape_calls_wanted and isinstance(result, torch.Tensor):
            # a torch function written in Python (F.interpolate) whose ops made a graph's shapes change: HLO metadata
            # names its own frame only; here, the user's line that called it, and the shapes it returned
            loc, _ = user_frame(frame)
            if loc:
                self.evidence.shape_call(name, loc, result)

    def _check(self, name: str, args, before: tuple) -> None:
        u0, c0, _ = before
        u1, c1, _ = call_signal()
        d2h = metric("TransferFromDeviceTime")[0] - self.d2h
        self.d2h += d2h
        if u1 != u0 or c1 != c0 or d2h:
            self._blame(name, args, u1 - u0, (u1 + c1) - (u0 + c0), d2h)

    def __enter__(self):
        self.d2h = metric("TransferFromDeviceTime")[0]
        return super().__enter__()

    def _blame(self, name: str, args, compiles: int, launches: int, d2h: int) -> None:
        loc, via = user_frame(sys._getframe(3))
        detail: dict[str, Any] = {"call": name, "compiles": compiles, "launches": launches, "transfers": d2h}
        if via:
            detail["via"] = via.short()
        shapes = [list(a.shape) for a in args if isinstance(a, torch.Tensor)][:3]
        if shapes:
            detail["shapes"] = shapes
        if self.training.in_closure:
            detail["closure"] = True
        if d2h:
            fell_back = self.evidence.new_fallbacks()
            if fell_back:
                detail["ops"] = fell_back
                self.emit(Event("op_fallback", loc, detail))
                return
            self.emit(Event("device_to_host_sync", loc, detail))
        elif eager_mode():  # eager mode runs each op as it is called: no pending graph was cut
            self.emit(Event("eager_ops", loc, detail))
        else:
            self.emit(Event("graph_break", loc, detail))


def anomaly_key(kind: str, rec: StepRecord, event: Event | None = None, op: str | None = None) -> tuple:
    if kind == "op_fallback":
        ops = event.detail.ops if event else [op]
        return (kind, ops[0] if ops else None)
    if kind == "compile":
        return (kind, site_of(rec.site))
    return (kind,)


class Attributor:
    """Drives the attribution plan: switches each step's kind on (the calls mode, or IR debug for graph capture),
    and feeds the plan the anomalies no attribution step has put a line to yet (only those re-arm). It asks the
    rules' own per-step predicates (analysis/step_predicates.py), so it re-arms for what a finding will report."""

    def __init__(self, cfg: dict, evidence: CallEvidence, training: TrainingCalls, emit: Callable[[Event], None]):
        self.plan = AttributionPlan(cfg)
        self.evidence, self.training, self.emit = evidence, training, emit
        self.current: str | None = None
        self.mode: CallMode | None = None
        self.steps = 0  # boundaries so far
        self.torch_compiled = False  # the script called torch.compile: no TorchFunctionMode from then on
        self.dynamo = DynamoWatch()  # torch.compile's own records: compiles, recompile reasons, graph breaks
        self._ir_debug0 = False
        self._explained: set[tuple] = set()
        self._sites_compiled: set[tuple] = set()
        self._fallbacks_taken: dict[str, int] | None = None  # the snapshot's fallbacks fallback_seen last took in
        self._real_compile: Callable | None = None

    def start(self, fallbacks_now: dict[str, int]) -> None:
        if P.CAPS.graph_capture:
            self._ir_debug0 = bool(X._get_ir_debug())  # the user's own XLA_IR_DEBUG / XLA_HLO_DEBUG setting stays
        self.evidence.fallback_seen = dict(fallbacks_now)
        self._fallbacks_taken = fallbacks_now
        self.activate(self.plan.next_kind(0))

    def stop(self) -> None:
        self.activate(None)
        if self._real_compile is not None:
            torch.compile, self._real_compile = self._real_compile, None

    def activate(self, kind: str | None) -> None:
        if kind == self.current:
            return
        if self.current == CALLS and self.mode is not None:
            try:
                self.mode.__exit__(None, None, None)
            except Exception:  # the user's own modes were left unbalanced; never crash their run for it
                pass
            self.mode = None
        if self.current == GRAPHS:
            X._set_ir_debug(self._ir_debug0)
        if kind == CALLS and self.torch_compiled:
            kind = None  # see watch_torch_compile
        if kind == GRAPHS and not P.CAPS.graph_capture:
            kind = None
        if kind == CALLS:
            self.mode = CallMode(self.evidence, self.training, self.emit, lambda: self.steps)
            self.mode.__enter__()
        elif kind == GRAPHS:
            X._set_ir_debug(True)
        self.current = kind

    def watch_torch_compile(self) -> None:
        """Dynamo traces the TorchFunctionModes on the stack into its graphs and guards on the stack: a calls step's
        mode around a compiled function would recompile it each time the mode comes or goes (and break its graph
        wherever the mode's own code cannot be traced). So once the script calls torch.compile (nn.Module.compile
        and @torch.compile go through it), calls attribution stops; graph capture goes on."""
        real = self._real_compile = torch.compile

        def compile(*args, **kwargs):
            self.torch_compiled = True
            try:
                self.dynamo.compiled(args[0] if args else kwargs.get("model"), user_frame(sys._getframe(1))[0])
            except Exception:  # evidence only: never the user's torch.compile call
                pass
            mode = self.mode
            if mode is not None and P.innermost_function_mode() == [mode]:
                self.activate(None)  # ours is the innermost mode: leave now, not at the next boundary
            return real(*args, **kwargs)
        functools.update_wrapper(compile, real)
        not_traced(compile)
        torch.compile = compile

    def after_step(self, rec: StepRecord, kind: str | None, fallbacks_now: dict[str, int]) -> None:
        if fallbacks_now is not self._fallbacks_taken:  # read afresh (a host transfer): else the same dict as before
            self.evidence.fallback_seen.update(fallbacks_now)
            self._fallbacks_taken = fallbacks_now
        for e in rec.events:
            if e.kind != "compile":  # every recompile needs its own evidence: compiles always re-arm capture
                self._explained.add(anomaly_key(e.kind, rec, e))
        step = self.steps
        self.steps += 1
        if kind is not None:
            self.evidence.step_site[step] = compile_key(rec.site)
            self.evidence.calls_at[compile_key(rec.site)] += kind == CALLS and self.mode is not None
        self.plan.saw(step, self.unexplained(rec))
        if rec.compiles:
            self._sites_compiled.add(site_of(rec.site))
        self.activate(self.plan.next_kind(self.steps))

    def unexplained(self, rec: StepRecord) -> list[tuple]:
        """Anomalies of this step that no attribution step has put a line to yet: only these re-arm. Host reads
        and early graphs as the rules count them (step_signals)."""
        keys = []
        copies = FallbackCopies([rec])(rec) if rec.fallback_ops else 0  # as figures.reads counts them
        if host_reads(rec, copies) > 0:
            keys.append(anomaly_key("device_to_host_sync", rec))
        keys += [anomaly_key("op_fallback", rec, op=op) for op in rec.fallback_ops]
        if early_not_read(rec) > 0:
            keys.append(anomaly_key("graph_break", rec))
        if rec.compiles and site_of(rec.site) in self._sites_compiled:
            keys.append(anomaly_key("compile", rec))
        # a size made inside a torch function: a calls step sees which user line called it
        wanted = self.evidence.shape_calls_wanted
        if wanted:
            keys += [("shape_call", fn) for fn in sorted(wanted) if fn not in self.evidence.shape_calls]
        return [k for k in keys if k not in self._explained]
