"""torch_xla adapter: runtime counters -> one StepRecord per step boundary, composed of one part per signal.

Every `torch_xla.sync()` / `xm.mark_step()` (also those inside `StepTrace.__exit__` and `MpDeviceLoader`) ends
in `torch_xla._XLAC._xla_step_marker`; wrapping that one binding makes each call a step boundary without
touching the user's script (boundaries.py).

Default mode reads a handful of counters per boundary (no syncs, no extra graphs). Attribution steps (the
first few, a few after an unexplained anomaly, one at the period of a recurring one) come in two kinds that never
share a step: "graphs" capture the pending graph's HLO (IR debug on) so a recompile can be diffed against the
previous graph of the same site (compiles.py); "calls" run a TorchFunctionMode that notices which torch call made
the runtime compile, execute early or copy to the host (attribution.py). See docs/attribution.md.
"""
from __future__ import annotations

import os
import sys
from dataclasses import asdict
from typing import Any, Callable

import torch
import torch_xla
import torch_xla.debug.profiler as xp

from ..attribution_plan import GRAPHS
from ...config import AttributionConfig
from ...model.faults import guarded
from ...model.records import StepRecord
from ...analysis.step_predicates import runaway_compiles
from . import _private as P
from ._private import X
from .attribution import Attributor, CallEvidence
from .boundaries import Marker, Recorder, Sync, TimeParts
from .compiles import Compiles
from .cost import GraphCosts
from .counters import eager_mode, metric, since
from .device_time import DeviceTimes
from .memory import GraphMemory, LiveTensors, device_memory
from .rules import ADVICE, RULES as TORCH_XLA_RULES
from .training_calls import TrainingCalls


class TorchXlaAdapter:
    name = "torch_xla"
    rules = TORCH_XLA_RULES  # its own rules beside findings.RULES: the execution modes' (rules.py)
    step_detection = ("each torch_xla.sync() / xm.mark_step() (StepTrace exit, MpDeviceLoader) is a step boundary; "
                      "boundaries are grouped into iterations by optimizer steps and backward passes")
    advice = ADVICE

    def __init__(self, attribution: dict | None = None):
        cfg = asdict(AttributionConfig())  # one set of defaults: the config schema's (config.py)
        cfg.update(attribution or {})
        self.cfg = cfg
        self.notes: list[str] = P.CAPS.notes()  # features this torch_xla lacks a name for (_private.py)
        self.training = TrainingCalls()
        self.recorder = Recorder(self.training)
        self.evidence = CallEvidence()
        self.attribution = Attributor(cfg, self.evidence, self.training, self.recorder.events_sink)
        self.compiles = Compiles(self.training, self.evidence)
        self.cost = GraphCosts()
        self.memory = GraphMemory()
        self.live = LiveTensors()
        self.time_parts = TimeParts(self.training)
        self.marker = Marker(self.training, self._before_sync, self._after_sync)
        self.device_times: DeviceTimes | None = None  # ExecuteTime samples -> each boundary's device time
        self._on_boundary: Callable[..., None] | None = None
        self._undo_graphs: Callable[[], None] | None = None
        self._totals0 = (0.0, 0)

    @property
    def dynamo(self):
        return self.attribution.dynamo

    def settle(self, final: bool = False) -> None:
        """Give the boundaries so far their device times (read in batches: device_time.py) before a report; the
        final report's read waits a little for the graphs still running (`DeviceTimes.finish`)."""
        if self.device_times is not None:
            self.device_times.finish() if final else self.device_times.read(final=False)

    @staticmethod
    def sampler_codes() -> tuple[set, set]:
        """Our wrappers' code, for the stack sampler (sampler.py): a frame of the sync call's wrapper (measured as
        launch, compile, device wait) or an explicit wait for the device, of the loader's timed next() (data)."""
        return {Marker.wrapper.__code__, TrainingCalls.timed_wait.__code__}, {TrainingCalls.timed_next.__code__}

    # --- lifecycle ---------------------------------------------------------------------------------
    def start(self, on_boundary: Callable[..., None]) -> None:
        if not P.CAPS.steps:  # no step marker to wrap: nothing is measured (the note says which name is missing)
            return
        self._on_boundary = on_boundary
        self.marker.install(lambda: self.recorder.snap)
        self.training.loop_boundary = self.marker.loop_boundary
        self.training.install()
        self.attribution.watch_torch_compile()
        self._undo_graphs = self._watch_dynamo_graphs()
        snap = self.recorder.start()
        self.device_times = DeviceTimes()
        self.time_parts.start()
        self._totals0 = (metric("OutboundData")[1], metric("TransferToDeviceTime")[0])
        self.attribution.start(snap.fallbacks)

    def stop(self) -> StepRecord | None:
        """Restore the binding; return what happened after the last boundary (not a step: e.g. a final
        `.item()` after the loop), or None if nothing did."""
        self.attribution.stop()
        self.compiles.resolve_locations()
        self.marker.uninstall()
        self.training.uninstall()
        if self.device_times is not None:
            self.device_times.unordered = self.device_times.unordered or self.attribution.torch_compiled
            self.device_times.read(final=False)  # the rest at the final report's settle(final=True)
        if self._undo_graphs is not None:
            self._undo_graphs()
            self._undo_graphs = None
        if self.recorder.snap is None:
            return None
        tail = self.recorder.record(-1, None, self.recorder.now())
        if self.dynamo.on:
            tail.events += self.dynamo.poll()
        self.recorder.events.clear()
        busy = tail.compiles or tail.device_to_host.count or tail.executions or tail.fallback_ops
        return tail if busy else None

    def _watch_dynamo_graphs(self) -> Callable[[], None] | None:
        """torch.compile's openxla bridge runs each compiled graph through `_run_cached_graph`, outside any sync:
        count those calls (a Python call each), so that they are not taken for a pending graph run early; in a loop
        that neither syncs nor pulls from a DataLoader, the graph's hash tells where an iteration starts again
        (Marker.count_graph)."""
        if not P.CAPS.dynamo_graphs:
            return None
        real, marker = X._run_cached_graph, self.marker

        def run_cached_graph(*args, **kwargs):  # args[0]: the graph's hash (a loop's periodic boundary)
            guarded("torch_xla.dynamo_graph", marker.count_graph, args[0] if args else None, sys._getframe(1))
            return real(*args, **kwargs)
        X._run_cached_graph = run_cached_graph
        return lambda: setattr(X, "_run_cached_graph", real)

    # --- the step boundary (Marker calls these around the real sync) -----------------------------------
    def _before_sync(self, site) -> tuple[str | None, tuple[str, str] | None]:
        """The step's attribution kind and, on graph-capture steps, the pending graph (hash, HLO), costed once."""
        kind = self.attribution.current
        if kind != GRAPHS:
            return kind, None
        try:
            return kind, self.compiles.pending(self._learn)
        except Exception as exc:  # never break the user's step for a diagnostic
            self.notes.append(f"graph capture failed: {str(exc).splitlines()[0]}")
            return kind, None

    def _learn(self, digest: str, text: str, live: list) -> None:
        if self.cost.learn(digest, text, live):
            self.memory.keep(digest, live)

    def _after_sync(self, sync: Sync, prepared: tuple[str | None, tuple[str, str] | None]) -> StepRecord:
        kind, pending = prepared
        now = self.recorder.now()
        own = since(now.launches, sync.launches0)  # the launches this sync made itself
        rec = self.recorder.record(0, sync.site, now)
        if self.dynamo.on:
            rec.events += self.dynamo.poll()
        self.time_parts.split(rec, sync, since(now.uncached, sync.uncached0))
        if self.attribution.torch_compiled:
            self.device_times.unordered = True
        self.device_times.add(rec, sync.span, self.time_parts.explicit_wait)
        # early: the pending lazy graph ran before this sync. Not early: dynamo's graphs, and in eager mode
        # (outside torch_xla.compile) every op, which runs as it is called (no pending graph to cut)
        rec.early_executions = 0 if sync.eager else max(0, rec.executions - own - sync.not_early)
        rec.grad_enabled = sync.grad
        rec.attributed = kind is not None
        self.marker.take_eager_outside(rec)
        if pending is not None:
            rec.graph_hashes = [pending[0]]
            self.compiles.remember(rec, sync.site, pending)
            self.cost.spmd_event(rec, pending[0])
        self.cost.step_cost(rec, sync.site, pending)
        self.live.observe(rec, sync.frame, self.cfg.get("mode") != "off")
        if rec.compiles and not rec.early_executions:
            self.compiles.size_evidence(rec, sync.site, emit=pending is None, ended=now.t)
        self.attribution.after_step(rec, kind, now.fallbacks)
        self._on_boundary(rec)
        return rec

    # --- what the session asks -----------------------------------------------------------------------
    def host_to_device_bytes(self) -> int | None:
        """The run's host-to-device bytes: too costly to read per step (~60 us), read once at the end."""
        return int(metric("OutboundData")[1] - self._totals0[0])

    def start_server(self, port: int):
        return xp.start_server(port)

    def runaway(self, rec: StepRecord, cfg) -> str | None:
        """Graph after graph at host reads inside one step: each read cuts and compiles a new partial graph
        (torch.autograd.set_detect_anomaly(True), a host read in a per-op hook)."""
        if runaway_compiles(rec, int(cfg["runaway_compiles"]), int(cfg["runaway_reads"])):
            return (f"{rec.compiles} graphs compiled at {rec.device_to_host.count} host reads within one step "
                    "(each read cuts a new partial graph; typical cause: torch.autograd.set_detect_anomaly(True) "
                    "or a host read inside a per-op hook)")
        return None

    def process_index(self) -> int | None:
        import torch_xla.runtime as xr
        if not P.runtime_up():
            return None
        try:
            return int(xr.global_ordinal())
        except Exception:
            return None

    def follow_spawn(self, wrap):
        from .spawn import follow  # torch_xla's private launcher module: loaded only by a run that spawns
        return follow(wrap)

    def environment(self) -> dict[str, Any]:
        import torch_xla.runtime as xr
        env: dict[str, Any] = {"versions": {"torch": torch.__version__, "torch_xla": torch_xla.__version__},
                               "execution_modes": self._execution_modes()}
        if not P.runtime_up():  # a parent that only spawned: asking would initialise it
            env["device_kind"] = os.environ.get("PJRT_DEVICE")
            return env
        try:
            env["device_kind"] = xr.device_type()
            env["device"] = str(torch_xla.device())
            env["device_model"] = P.xla_model().xla_device_kind()  # PJRT's device kind ("TPU v5 lite"): the peak
            env["process_count"] = int(xr.process_count())
            env["process_index"] = int(xr.process_index())
        except Exception as exc:  # runtime not initialisable: still report what we know
            env["device_kind"] = os.environ.get("PJRT_DEVICE")
            env["device_error"] = str(exc).splitlines()[0]
        if self.cost.spmd_devices():  # (under SPMD xm.xla_device_kind() fails: "Unknown device SPMD:0")
            env["spmd"] = {"devices": self.cost.spmd_devices(), "meshes": self.meshes()}
        return env

    def _execution_modes(self) -> list[str]:
        """How the script ran its graphs: "lazy" (syncs it made itself: torch_xla.sync, mark_step, step loaders),
        "torch_xla.compile" (syncs of torch_xla.compile / torch_xla.step regions), "eager" (eager mode on at a sync
        or at the end), "dynamo" (it called torch.compile), "spmd". Read when the report is built."""
        modes = {m for m in self.marker.callers if m != "dynamo"}
        if self.attribution.torch_compiled:
            modes.add("dynamo")
        try:
            if P.runtime_up():
                import torch_xla.runtime as xr
                if eager_mode():
                    modes.add("eager")
                if xr.is_spmd():
                    modes.add("spmd")
        except Exception:
            pass
        return sorted(modes)

    def graph_costs(self) -> dict[str, Any]:
        return self.cost.graph_costs()

    def meshes(self) -> list[dict]:
        return self.cost.meshes()

    def hlo_modules(self) -> dict[str, str]:
        """Empty: torch_xla gives the HLO it builds, not the optimized module whose fusions a trace names."""
        return {}

    def graph_memory(self, final: bool = True) -> dict[str, Any]:
        return self.memory.graph_memory(final)

    def device_memory(self) -> dict[str, Any] | None:
        return device_memory()
