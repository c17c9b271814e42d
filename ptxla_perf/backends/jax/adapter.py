"""The JAX adapter (backends/base.py's contract): a composition of the parts, one per signal.

- hooks.py installs the wrappers and removes them; each wrapper hands a call to the part that owns its state.
- calls.py: a top-level jitted call (an execution, maybe a step boundary, checked for implicit transfers).
- steps.py: step boundaries (StepTraceAnnotation, or the inferred step function).
- transfers.py: device-to-host reads, eager uploads, a call's implicit host-to-device copies.
- compiles.py: compiles from jax.monitoring, explained by signature diffs; cost.py: each program's cost.
- memory.py: per-program memory, donation, live arrays; ready.py: device wait and device time.
- _private.py: every private or version-dependent JAX name, with a capability flag per feature; what is off is
  said in `notes` (report: run.attribution.notes).
"""
from __future__ import annotations

import os
from typing import Any, Callable

import jax
import jax.profiler

from ...model.records import StepRecord
from ...model import faults
from ...model.faults import FAULTS, check
from . import _private as P
from .calls import Calls
from .compiles import Compiles
from .cost import Costs
from .hooks import Hooks
from .jitted import Jitted
from .ledger import Ledger, Scope
from .memory import Memory
from .ready import DeviceWait, ReadyWatch
from .rules import RULES
from .steps import Steps
from .transfers import Transfers, array_leaves

ADVICE = {
    "device_to_host_sync": "Keep values on the device: accumulate metrics in the step function and read them "
                           "every N steps or after the loop (jax.device_get once).",
    "host_to_device_transfer": "Put parameters and state on the device once (jax.device_put) and keep them there.",
    "eager_compile": "Move the ops into a jitted function if they run every step.",
    "input_pipeline": "Prefetching batches to the device (jax.device_put ahead of the step) overlaps the copy.",
    "graph_break": "Call the step function once per step.",
    "no_steps": "No StepTraceAnnotation and no jitted function called twice from the same line.",
    "memory_growth": "Keep Python numbers, not jax.Arrays, across steps: read the value every N steps "
                     "(float(loss) or jax.device_get once for many), or accumulate inside the step function; "
                     "drop references to old step outputs.",
    "missing_donation": "Donate the arguments the step replaces: jax.jit(step, donate_argnums=(0,)) "
                        "(or donate_argnames=...); XLA then writes the new values into the old buffers.",
    "memory_headroom": "Reduce the per-device batch, rematerialise activations (jax.checkpoint), donate the "
                       "state (donate_argnums), or shard parameters and optimizer state over more devices.",
    "input_bound": "Prefetch batches ahead of the step (a background thread or a loader that prefetches, "
                   "jax.device_put of the next batch before the step) and move per-batch NumPy work out of the "
                   "loop, or cache it.",
    "host_bound": "Move the per-step Python/NumPy work into the jitted step function, or precompute it; "
                  "Python between steps runs while the device has nothing queued.",
    "launch_bound": "Do more work per jitted call: a larger batch, or several steps per call (jax.lax.scan / "
                    "fori_loop over micro-steps).",
}


def _no_block(x: Any) -> Any:
    raise RuntimeError("block_until_ready is missing in this JAX")


class JaxAdapter:
    name = "jax"
    rules = RULES  # eager_compile: JAX's own concept (rules.py)
    advice = ADVICE

    def __init__(self, attribution: dict | None = None):
        cfg = {"mode": "auto"}
        cfg.update({k: v for k, v in (attribution or {}).items() if k == "mode"})
        self.cfg = cfg
        self.lines = cfg["mode"] != "off"
        self.caps = P.probe()
        self.notes: list[str] = self.caps.notes()  # the features this JAX cannot measure, first
        self._on_boundary: Callable[[StepRecord], None] | None = None
        scope, ledger = Scope(), Ledger(self.lines)
        self._ledger = ledger
        block = P.ArrayImpl.__dict__.get("block_until_ready") if self.caps.device_wait else None
        self._ready = ReadyWatch(block or _no_block)  # the real one (the hook times the user's waits)
        self._memory = Memory(ledger, self.caps)
        self._compiles = Compiles(ledger, scope, self.notes)
        self._costs = Costs(scope, self._compiles, self.caps, self._memory.remember)
        self._steps = Steps(ledger, scope, self.notes, self._on_record)
        self._transfers = Transfers(ledger, scope, self._ready)
        self._calls = calls = Calls(ledger, scope, self._steps, self._transfers, self._compiles, self._costs, self._memory,
                      self._ready)
        self._hooks = Hooks(self.caps, scope, calls, self._steps, self._transfers,
                            DeviceWait(ledger, scope, self._ready, array_leaves), self._compiles, self.notes)

    def wrap_jitted(self, jitted, fun, kwargs: dict) -> Jitted:
        """Our wrapper around a function the user jitted before the session started (a notebook's earlier cell:
        notebook/jax_adopt.py), the same one `jax.jit` returns while hooked; the compiled function is reused."""
        return Jitted(jitted, self._calls, fun, kwargs)

    @property
    def step_detection(self) -> str:
        """How step boundaries are found, in words (report: run.step_detection)."""
        return self._steps.detection

    @staticmethod
    def sampler_codes() -> tuple[set, set]:
        """Our wrapper's code, for the stack sampler (sampler.py): a frame of a jitted call (dispatch, compile)."""
        return {Calls.call.__code__}, set()

    # --- lifecycle ---------------------------------------------------------------------------------
    def start(self, on_boundary: Callable[[StepRecord], None]) -> None:
        self._on_boundary = on_boundary
        self._hooks.install()

    def stop(self) -> StepRecord | None:
        self._hooks.remove()
        self._calls.stopped = True  # functions jitted while hooked, called later (the next cell, another session)
        self._steps.finish()
        self._ready.stop()
        return self._steps.tail()

    def _on_record(self, rec: StepRecord, n: int, frame, current: bool = True) -> None:
        """Boundary `n`'s record (steps.py): live arrays sampled (`current`: where its boundary is now), device
        time, then the session."""
        try:  # faults.guarded, inlined (every step)
            if faults._INJECT:
                check("jax.boundary")
            self._measure(rec, n, frame, current)
        except Exception as exc:
            FAULTS.record("jax.boundary", exc)
        self._on_boundary(rec)

    def _measure(self, rec: StepRecord, n: int, frame, current: bool) -> None:
        if current:
            self._memory.sample_live(rec, n, frame)
        self._transfers.steps = n + 1
        self._ready.step_end(rec, ok=rec.phase == "train" and not rec.compiles)
        if self.caps.device_wait:
            self._ready.arm(n + 1)

    # --- the rest of the contract ------------------------------------------------------------------
    def ran(self) -> bool:
        """A jitted function of the program's has run (base.Runs)."""
        return self._ledger.execs > 0

    def host_to_device_bytes(self) -> int | None:
        return self._ledger.h2d_bytes

    def process_index(self) -> int | None:
        return int(jax.process_index()) if P.backends_initialized() else None

    def follow_spawn(self, wrap):
        return None  # JAX has no launcher: each process calls jax.distributed.initialize itself

    def start_server(self, port: int):
        return jax.profiler.start_server(port)

    def runaway(self, rec: StepRecord, cfg) -> str | None:
        """Never from compile counts: eager ops compile once per op and shape (tens in an evaluation pass are
        normal and cached), and a jitted function recompiling every step is a finding, not a memory runaway."""
        return None

    def environment(self) -> dict[str, Any]:
        env: dict[str, Any] = {"versions": {"jax": jax.__version__}}
        for name in ("jaxlib", "flax"):  # optional frameworks: their versions where installed
            try:
                env["versions"][name] = getattr(__import__(name), "__version__", None)
            except ImportError:
                pass
        if not P.backends_initialized():  # asking would initialise JAX before the script did
            env["device_kind"] = os.environ.get("JAX_PLATFORMS")
            return env
        try:
            devs = jax.devices()
            env["device_kind"] = devs[0].platform
            env["device"] = f"{devs[0].device_kind} x{len(devs)}"
            env["device_model"] = devs[0].device_kind  # picks the peak (peaks.py)
            env["local_devices"] = len(jax.local_devices())  # CPU: host-platform devices share the calibrated peak
            env["process_count"] = int(jax.process_count())
            env["process_index"] = int(jax.process_index())
        except Exception as exc:
            env["device_kind"] = os.environ.get("JAX_PLATFORMS")
            env["device_error"] = str(exc).splitlines()[0]
        return env

    def graph_costs(self) -> dict[str, Any]:
        return self._costs.graph_costs()

    def hlo_modules(self) -> dict[str, str]:
        return self._costs.hlo_modules()

    def graph_memory(self, final: bool = True) -> dict[str, Any]:
        return self._memory.graph_memory(self._costs.note)

    def device_memory(self) -> dict[str, Any] | None:
        return self._memory.device_memory()
