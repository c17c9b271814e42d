"""The cost of the graph each boundary ran (roofline): XLA's cost analysis of each captured graph, once per hash;
under SPMD what one device runs of it and its collectives (modes.py)."""
from __future__ import annotations

from collections import Counter
from typing import Any

from ...xla import hlo_cost, hlo_flops
from ...model.records import Event, Location, StepRecord
from . import _private as P
from ._private import X
from .attribution import site_of
from .modes import spmd_graph, spmd_meshes


class GraphCosts:
    """Graph hash -> its cost; site -> its last captured graph's cost (carried by the site's other boundaries);
    how each launching boundary got its cost; the SPMD evidence per graph."""

    def __init__(self):
        self._costs: dict[str, hlo_cost.GraphCost] = {}  # graph hash -> its cost, computed once (roofline)
        self._site_cost: dict[tuple, tuple[str, hlo_cost.GraphCost]] = {}  # site -> its last captured graph's cost
        self._counts = Counter()  # how each launching boundary got its cost: captured | carried | unknown
        self._spmd: int | None = None  # SPMD: the devices the step is partitioned over (once the runtime says so)
        self._meshes: list[dict] = []
        self._spmd_graphs: dict[str, dict] = {}  # graph hash -> its SPMD evidence (sharded inputs, collectives)

    def learn(self, digest: str, text: str, live: list) -> bool:
        """Cost a graph seen for the first time (its live tensors give XLA's HLO proto); True when it was costed
        here as one device's whole graph (its HLO is then worth keeping for the memory figures)."""
        if digest not in self._costs and self.spmd_devices():  # what one device runs, and its collectives
            cost, self._spmd_graphs[digest] = spmd_graph(text, lambda: X._get_xla_tensors_hlo_proto(live),
                                                         self._spmd, self.meshes())
            if cost is not None:  # the partitioned module XLA's CPU pipeline built: held against the global HLO
                self._costs[digest] = hlo_flops.checked(cost, lambda: text, self._spmd or 1)
        if digest in self._costs:
            return False
        # once per graph: XLA's cost analysis of the same live tensors' HLO, loop bodies times their trip counts
        cost = hlo_cost.cost(lambda: X._get_xla_tensors_hlo_proto(live), text)
        self._costs[digest] = hlo_flops.checked(cost, lambda: text, 1, hlo_flops.origin_of(cost))
        return True

    def spmd_event(self, rec: StepRecord, digest: str) -> None:
        """The graph's SPMD evidence, once per graph, on the step that first ran it."""
        spmd = self._spmd_graphs.get(digest)
        if spmd is not None and not spmd.get("_sent"):
            spmd["_sent"] = True
            rec.events.append(Event("spmd", None, {"graph": digest, **{k: v for k, v in spmd.items()
                                                                       if not k.startswith("_")}}))

    def step_cost(self, rec: StepRecord, site: Location | None, pending: tuple[str, str] | None) -> None:
        """A captured boundary costs its graph's cost (computed once per hash); any other boundary at a site carries
        the cost of the last graph captured there, unless it compiled (a new graph whose cost nobody saw: unknown,
        and the site's cost is forgotten until the next capture). Launching nothing costs nothing. Graphs a host
        read ran early are not captured: their FLOPs are missing (docs/roofline.md)."""
        if not rec.executions:
            rec.flops = rec.bytes_accessed = rec.transcendentals = 0.0
            return
        key = site_of(site)
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
        self._counts[how] += 1
        if rec.early_executions:
            self._counts["early"] += 1

    def graph_costs(self) -> dict[str, Any]:
        sources = {c.source for c in self._costs.values()}
        source = next((s for s in (hlo_cost.XLA, hlo_cost.TEXT) if s in sources), hlo_cost.UNAVAILABLE)
        notes = sorted({c.note for c in self._costs.values() if c.note})[:3]
        if not self._costs:
            notes.append("no step graph was captured: costs come from graph-capture attribution steps "
                         "(attribution.mode=off or hlo=false turns them off)")
        if self._counts["early"]:
            notes.append(f"{self._counts['early']} boundaries also ran graphs early (a host read): those "
                         "graphs are not captured, so their FLOPs are missing")
        return {"source": source, "scope": "per device (the graph torch_xla runs on one device)",
                "method": "XLA HloCostAnalysis of the pending graph's HLO, captured at graph-capture steps, once per "
                          "graph hash (unoptimized HLO: bytes are counted before fusion, an upper bound); other "
                          "steps carry the cost of their site's last captured graph",
                "boundaries": {k: v for k, v in self._counts.items() if k != "early"},
                "graphs": [{"id": h, **c.to_json(), **self.collectives(h)} for h, c in list(self._costs.items())[:20]],
                "notes": notes}

    def collectives(self, digest: str) -> dict[str, Any]:
        info = self._spmd_graphs.get(digest)
        if not info or "collectives" not in info:
            return {}
        return {"collectives": info["collectives"], "collective_share_of_bytes": info["collective_share_of_bytes"]}

    def spmd_devices(self) -> int | None:
        """The devices an SPMD step is partitioned over; None outside SPMD. Asked at graph capture only."""
        if self._spmd is None:
            try:
                import torch_xla.runtime as xr
                if P.runtime_up() and xr.is_spmd():
                    self._spmd = int(xr.global_runtime_device_count())
            except Exception:
                return None
        return self._spmd

    def meshes(self) -> list[dict]:
        if not self._meshes:
            self._meshes = spmd_meshes()
        return self._meshes
