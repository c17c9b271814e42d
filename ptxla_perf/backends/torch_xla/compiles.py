"""Why a graph compiled again: on graph-capture steps, the pending graph's HLO diffed against the site's earlier
graphs; on other steps, the size evidence every compile leaves (graph size, sizes copied in, the loader's batch);
when the run ends, the user's line for shape changes from what calls steps saw (attribution.CallEvidence)."""
from __future__ import annotations

import gc
import os
import time
from collections import Counter, OrderedDict

import torch

from ...xla import hlo_diff
from ...analysis.compiles import site_key as compile_key
from ...frames import function_at, is_user_file
from ...model.records import Event, Location, StepRecord
from ._private import X
from .attribution import CallEvidence, site_of
from .training_calls import TrainingCalls


class Compiles:
    """Per site: its last captured graphs (HLO, for diffs) and its last compiles' sizes; the compile events whose
    line is found only at the end (`resolve_locations`)."""

    def __init__(self, training: TrainingCalls, evidence: CallEvidence):
        self.training, self.evidence = training, evidence
        self._hlo_by_site: dict[tuple, OrderedDict[str, str]] = {}
        self._graph_sizes: dict[tuple, list] = {}  # site -> (IR nodes, bytes copied in, batch) of its last compiles
        self._unresolved: list[Event] = []

    def pending(self, learn) -> tuple[str, str] | None:
        """Hash, HLO text and pending tensors (its outputs) of what this sync is about to run (`learn(digest, text,
        live)` costs it once). Costs a heap scan (~0.1 s): graph-capture steps only. Raises on a failed capture (the caller
        notes it, never the user's step)."""
        # no warnings.catch_warnings(): its exit resets every once-per-line registry, so the user's own warnings
        # would print again after each attribution step
        # only the tensors the sync computes: a tensor whose value is on the device already (its IR, if any, just
        # that data) is no output, and the data of an out-of-date wrapper's old value may be donated already (an
        # HLO dump of it fails: "Data Handle: Deleted")
        live = [t for t in live_xla_tensors() if pending_ir(t)]
        if not live:
            return None
        digest = X._get_graph_hash(live)
        digest = digest.hex() if isinstance(digest, (bytes, bytearray)) else str(digest)
        text = X._get_xla_tensors_hlo(live)
        learn(digest, text, live)
        return digest, text

    def size_evidence(self, rec: StepRecord, site: Location | None, emit: bool, ended: float) -> None:
        """What is cheap at every compile: the size of the graph this sync compiled (`TensorsGraphSize`, sampled per
        sync) and the sizes of the data copied to the device since the previous boundary (`OutboundData` samples,
        wall-clock stamped); both read only when the sync compiled. Against the closest earlier graph of the site
        they tell a change of the ops from a change of input sizes, without the HLO. `ended`: the boundary's
        perf_counter (the step began `rec.wall_time_s` before it; the work since, a cost analysis under load,
        must not move the step's start past its first copies)."""
        data = X._xla_metric_data("TensorsGraphSize")
        if not data or not data[2]:
            return
        size = int(data[2][-1][1])
        since = time.time() - (time.perf_counter() - ended) - rec.wall_time_s
        out = X._xla_metric_data("OutboundData")
        copied = sorted(int(v) for t, v in (out[2] if out else ()) if t >= since)
        batch = self.training.batch_shapes
        seen = self._graph_sizes.setdefault(site_of(site), [])
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
                f"{', '.join(map(dims_text, before[2]))} -> {', '.join(map(dims_text, batch))}"]}
            location = self.training.batch_site  # the loop line that took the batch
        elif copied and before[1] and len(copied) == len(before[1]) and copied != before[1]:
            # the same ops on differently sized data: the batch (or another input) changed shape
            detail = {"cause": "input_shapes", "differences": [
                f"same graph size ({size} IR nodes); the data copied to the device for this step changed size: "
                f"{sizes_text(before[1])} -> {sizes_text(copied)}"], "copied": [before[1], copied]}
        else:
            detail = {"cause": None, "differences": [
                f"same graph size ({size} IR nodes): an input shape, dtype or baked-in constant changed, not the "
                "ops (which one was not captured)"]}
        event = Event("compile", location, {"key": compile_key(site), "graph_size": [before[0], size],
                                            "evidence": "graph size", **detail})
        if detail.get("copied"):
            self._unresolved.append(event)  # the line that copies data of the old size: resolve_locations
        rec.events.append(event)

    def remember(self, rec: StepRecord, site: Location | None, pending: tuple[str, str]) -> None:
        graphs = self._hlo_by_site.setdefault(site_of(site), OrderedDict())
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
                "key": compile_key(site), "cause": "special_scalar" if special else d.cause,
                "special_scalars": special,
                "differences": d.summary_lines(place=user_place), "graph_hashes": [old_digest, digest],
                "graph_size": list(d.size)})
            if d.reshaped_inputs:
                event.detail.new_shapes = [b for _, b in d.reshaped_inputs]
            elif event.detail.cause == "internal_shapes":
                # the line that made the size: a root op built on a user line, else the user line that called the
                # torch function (F.interpolate) the root ops were built in - seen on a calls step
                # the earliest root with a source (graph order: the resize before the loss's grid that follows
                # its size): its user line, or, built inside torch, the torch function the user called
                first = next((i for i in d.shape_roots() if i.source_file and i.source_line), None)
                event.location = user_line(first) if first is not None else None
                if event.location is None and first is not None:
                    fn = function_at(first.source_file, first.source_line)
                    if fn and fn not in ("?", "<module>"):
                        event.detail.shape_call = fn
                        event.detail.differences.insert(0, f"shapes start to change inside {fn}() (torch)")
                        self.evidence.shape_calls_wanted.add(fn)
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
        on), else the loop line a device loader's batch of new shapes came from, else resolve_locations."""
        if d.reshaped_inputs:
            for instr in d.changed_inputs():
                loc = user_line(instr)
                if loc is not None:
                    return loc
            return self.training.batch_site if self.training.batch_changed else None
        for instr in d.first_changed_sources():
            loc = user_line(instr)
            if loc is not None:
                return loc
        return None

    def resolve_locations(self) -> None:
        """Point shape-change recompiles at the user line that moved differently-shaped data to the device:
        the line seen moving several shapes, else one that moved a shape the new graph takes as input."""
        ev = self.evidence
        # a line that moved other shapes in one step than in another (not one that moves an x and a y every step)
        varying_all = [loc for k, (loc, _) in ev.h2d_lines.items()
                       if len({frozenset(v) for v in ev.h2d_steps.get(k, {}).values()}) > 1]
        indexed = [loc for loc, ints in ev.index_lines.values() if len(ints) > 1]
        for event in self._unresolved:
            new_shapes, event.detail.new_shapes = event.detail.new_shapes, None
            copied, event.detail.copied = event.detail.copied, None
            # lines seen uploading in steps this graph's site ended (a training loop's upload line is not an
            # evaluation pass's, even where their batches have the same size)
            here = {k for k, steps in ev.h2d_steps.items()
                    if any(ev.step_site.get(j) == event.detail.key for j in steps)}
            varying = [loc for loc in varying_all if (loc.file, loc.line) in here]
            if copied is not None:
                # a step whose graph was not captured: the data copied in changed size; the line seen (on a calls
                # step) copying data of a size that changed, or the one line seen copying several shapes
                if event.location is None:
                    gone = set(copied[0]) - set(copied[1])
                    sized = [ev.h2d_lines[k][0] for k, sizes in ev.h2d_bytes.items() if sizes & gone and k in here]
                    # else the line that copies data to the device on every calls step of this site (in file order:
                    # x before y)
                    every = sorted((loc for k, (loc, _) in ev.h2d_lines.items()
                                    if k in here and len(ev.h2d_steps[k]) == ev.calls_at[event.detail.key]),
                                   key=lambda loc: (loc.file, loc.line))
                    pick = sized if len(sized) == 1 else varying if len(varying) == 1 else every
                    event.location = pick[0] if pick else None
            elif new_shapes is not None:
                dims = {dims_of(s) for s in new_shapes}
                match = [loc for k, (loc, shapes) in ev.h2d_lines.items()
                         if shapes & dims and (k in here or not here)]
                if event.location is not None:
                    pass  # the graph's own metadata named the line that put the changed input on the device
                elif len(varying) == 1 or (not here and len(varying_all) == 1):
                    event.location = (varying or varying_all)[0]
                elif match:
                    event.location = match[0]
            elif event.detail.shape_call:
                fn, event.detail.shape_call = event.detail.shape_call, None
                lines = list(ev.shape_calls.get(fn, {}).values())
                changing = [loc for loc, shapes in lines if len(shapes) > 1]
                pick = changing if len(changing) == 1 else [loc for loc, _ in lines] if len(lines) == 1 else []
                if pick:
                    event.location = pick[0]
                    shapes = sorted(ev.shape_calls[fn][(pick[0].file, pick[0].line)][1])
                    event.detail.differences = [
                        f"shapes start to change inside {fn}(), called at {os.path.basename(pick[0].file)}:"
                        f"{pick[0].line} (it returned {', '.join(map(dims_text, shapes[:4]))} on calls steps)"
                        if d.startswith("shapes start to change inside ") else d for d in event.detail.differences]
            elif event.detail.cause == "constant" and len(indexed) == 1:
                # a device tensor indexed by a changing Python int: the getitem line itself, not where torch_xla
                # materialised the view (HLO metadata can name the later line that first used it)
                event.detail.indexed_with = sorted(ev.index_lines[(indexed[0].file, indexed[0].line)][1])[:6]
                event.location = indexed[0]
        self._unresolved.clear()


def user_line(instr: hlo_diff.Instr) -> Location | None:
    """The user's line an HLO instruction's metadata names, if it is the user's."""
    if instr.source_file and is_user_file(instr.source_file):
        path = os.path.abspath(instr.source_file)
        return Location(path, instr.source_line or 0, function_at(path, instr.source_line or 0))
    return None


def user_place(instr: hlo_diff.Instr) -> str | None:
    """`train.py:34`: the user's line an HLO instruction was built at, for a difference's text."""
    loc = user_line(instr)
    return f"{os.path.basename(loc.file)}:{loc.line}" if loc else None


def live_xla_tensors() -> list[torch.Tensor]:
    """The live tensors that torch_xla itself backs: the only ones the graph-hash/HLO bindings may be given.

    A device that says "xla" is not enough: torch.compile leaves FakeTensors (and functional wrappers around them)
    of its traced graphs alive, SPMD has XLAShardedTensor wrappers, and `_get_graph_hash` aborts the whole process (a
    C++ check, no Python error) on any tensor whose impl is not an XLA tensor. `_xla_get_tensor_id` resolves a
    tensor the same way but raises a RuntimeError instead, so a tensor it answers for is one the bindings accept.
    A tensor found through the heap can also be one whose Python object C++ keeps alive (its impl owns the object,
    not the other way round): holding it does not keep the impl alive, and when the C++ owner lets go the object
    becomes an undefined tensor, which `_get_graph_hash` aborts on just the same. `_fix_weakref()` (what torch does
    for a tensor reached through a weak reference) makes the object own its impl again for as long as we hold it;
    on a tensor that already owns it, it does nothing (tests/test_modes.py).

    What is returned is each tensor's XLA value as it stands, never brought up to date: torch_xla's tensors are
    functionalization wrappers, and every binding that takes a wrapper (`_xla_get_tensor_id`, `_get_graph_hash`,
    the HLO dumps) first applies the mutations made through its aliases (`at::functionalization::impl::sync`). A
    wrapper whose storage was updated through an alias (`p.data.addcdiv_(...)` in an optimizer written before
    torch 1.0's in-place idiom) is out of date until the program itself uses it again: syncing it here rebuilt its
    value at the sync and changed the graph the sync ran (214 outputs instead of 217 on transformers 2.3's AdamW:
    another graph, a compile the plain run never has; tests/test_capture_keeps_the_graph.py). So a wrapper is
    unwrapped without a sync (`torch._from_functional_tensor`): the bindings are given the values the sync itself
    will take. An out-of-date wrapper's own value is its old data (no output), and the update waiting in its storage
    has no Python object the heap scan could find: on such loops the captured graph lacks those updates."""
    tensor = torch.Tensor
    candidates = []
    heap = gc.get_objects()
    # by type(), not isinstance(): isinstance reads `__class__`, which some objects answer with a DeprecationWarning.
    # The heap's few distinct types are checked once each, then the objects filtered by a set lookup: about a third
    # of the time of an issubclass per object (~0.4 M objects after torch's import)
    kinds = frozenset(t for t in set(map(type, heap)) if issubclass(t, tensor))
    for o in [o for o in heap if type(o) in kinds]:
        try:
            o._fix_weakref()  # own the impl while we hold the object (what torch's WeakIdRef does)
            if o.device.type == "xla":  # a subclass may run Python here (__torch_function__)
                candidates.append(o)
        except Exception:
            pass
    del heap
    tensor_id, by_id = X._xla_get_tensor_id, {}
    is_functional, unwrap = torch._is_functional_tensor, torch._from_functional_tensor
    for o in candidates:
        try:
            value = unwrap(o) if is_functional(o) else o  # no sync: the value the sync will take (see above)
            by_id[tensor_id(value)] = value  # (a value found both through its wrapper and on its own: once)
        except Exception:  # fake, functional over fake, wrapper subclass, freed: not an XLA tensor
            continue
    # in torch_xla's own order (its live tensors by id), not the heap's: the same graph gets the same hash each step
    return [by_id[k] for k in sorted(by_id)]


def dims_of(shape: str) -> tuple[int, ...] | None:
    if "[" not in shape:
        return None
    inner = shape[shape.find("[") + 1:shape.find("]")]
    return tuple(int(x) for x in inner.split(",") if x.strip().isdigit())


def dims_text(shape: tuple) -> str:
    return "[" + ",".join(map(str, shape)) + "]"


def sizes_text(values: list[int]) -> str:
    """Transfer sizes in bytes, as a short list: '3 x 512 B, 64 B'."""
    parts = [f"{n} x {v} B" if n > 1 else f"{v} B" for v, n in sorted(Counter(values).items(), reverse=True)]
    return ", ".join(parts[:4]) + (", ..." if len(parts) > 4 else "")


def pending_ir(t: torch.Tensor) -> bool:
    """A tensor whose value the next sync computes (its IR is not just device data): an output of the graph."""
    info = X._get_xla_tensor_debug_info(t)
    ir = info.split("\nIR:", 1)[1].split("\n", 1)[0] if "\nIR:" in info else ""
    return bool(ir.strip()) and "xla::device_data" not in ir
