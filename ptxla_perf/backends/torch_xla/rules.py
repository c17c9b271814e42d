"""torch_xla's own rules, for the execution modes its guides teach beside the `mark_step` loop (docs/modes.md):

- `eager_ops`: eager mode (`torch_xla.experimental.eager_mode(True)`) with a `torch_xla.compile`d step. Ops outside
  the compiled step run one by one, by design; what matters is what they cost per step, measured on every step by
  the adapter (`StepRecord.eager_launches`, `eager_time_s`: the stretch from one step's end to the next compiled
  step's start).
- `dynamo_graphs`, `dynamo_recompile`, `dynamo_graph_break`: torch.compile(backend="openxla"). Dynamo's own records
  (backends/torch_xla_modes.py: `dynamo_compile` and `dynamo_graph_break` events, on the step in which dynamo
  compiled): how many graphs it made, why it recompiled (the guard that failed), where it broke the graph.
- `spmd`: the step ran sharded - the mesh, how many of the step graph's inputs are sharded, and the collectives
  XLA's SPMD partitioner put into it, with their bytes and share of the graph's bytes (the roofline's bytes of
  that graph: `spmd` events, once per graph, from the adapter's graph capture). Info: what a user checks their
  `mark_sharding` against, never a verdict.

They live with the adapter that owns the concepts and run beside the backend-neutral rules (`Adapter.rules`).
Pure logic: no torch import.
"""
from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass
from typing import Any

from ...analysis import iterations as I
from ...analysis.figures import median, step_time_s
from ...model.finding import Evidence
from ...rules.iteration import Context, Finding, Rule, recurs
from ...rules.iteration import where as _at
from ...model.fmt import ms as _ms
from ...model.records import SpmdEvidence, evidence_json
from ...model.thresholds import value as threshold

EAGER_ADVICE = ("Move the tensor work into the torch_xla.compile'd step function (traced and fused with the step) "
                "and keep outside only what must run there (the batch's transfer); host work done there (preparing "
                "data) belongs in a DataLoader.")

ADVICE = {  # finding kind -> what to do, in torch_xla's terms (the adapter's `advice`)
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


class EagerOps(Rule):
    """Eager ops outside the compiled step, every iteration: info with their count and the time the loop spends
    outside the compiled step; a warning only when that time is a real recurring share of the step."""

    kind = "eager_ops"

    def run(self, ctx: Context) -> list[Finding]:
        train = [s for s in ctx.iterations if s.phase == I.TRAIN and s.eager_time_s is not None]
        hit = [s for s in train if s.eager_launches]
        if not hit:
            return []
        steady = [s for s in ctx.figures.steady if s.eager_time_s is not None] or train
        # medians over the steady steps, as the summary's step time (one slow step under load is not the loop)
        outside = median(max(0.0, s.eager_time_s - (s.data_wait_s or 0.0)) for s in steady) or 0.0
        step = median(step_time_s(s) for s in steady) or 0.0
        share = outside / step if step else 0.0
        per_step = sum(s.eager_launches for s in steady) / len(steady)
        # an eager launch per host-to-device copy is the batch's transfer, which belongs outside the step (the
        # advice says so): only the other ops are something to move into it
        others = median(max(s.eager_launches - s.host_to_device.count, 0) for s in steady) or 0
        lines = _lines(ctx)
        loc = lines[0][0] if lines else None
        recurring = recurs(len(hit), len(train))
        warn = recurring and others > 0 and share >= threshold("eager_ops_share") and \
            outside >= threshold("eager_ops_min_s")
        often = (f"in {len(hit)} of {len(train)} training iterations" if len(hit) < len(train) else
                 "in every training iteration")
        cost = (f"the loop spends {_ms(outside)} per step outside the compiled step (data wait excluded), "
                f"{share:.0%} of the {_ms(step)} step; the compiled step takes {_ms(max(step - outside, 0.0))}")
        seen = ""
        if lines:
            seen = " Seen on attribution steps at " + ", ".join(f"{os.path.basename(l.file)}:{l.line} ({n} ops)" for l, n in lines[:4]) + "."
        if warn:
            msg = (f"The loop runs {per_step:.0f} eager op(s) per step outside the compiled step{_at(loc)}, one by "
                   f"one and unfused, {often}: {cost}.{seen} {ctx.advice.get('eager_ops', EAGER_ADVICE)}")
        elif recurring and not others:
            msg = (f"Eager mode: {per_step:.0f} op(s) per step run outside the compiled step{_at(loc)}, {often}, as "
                   f"many as the step's host-to-device copies: the batch's transfer to the device, which belongs "
                   f"there; {cost}.{seen}")
        elif recurring:
            msg = (f"Eager mode: {per_step:.0f} op(s) per step run outside the compiled step{_at(loc)}, one by one "
                   f"by design, {often}; {cost}: a small part of the step.{seen}")
        else:
            msg = (f"Eager mode: ops ran outside the compiled step{_at(loc)} in {len(hit)} of {len(train)} training "
                   f"iterations (not every step); {cost}.{seen}")
        evidence = EagerOpsEvidence(round(per_step, 3), others, round(outside * 1e3, 3), round(step * 1e3, 3),
                                    round(share, 4), round(max(step - outside, 0.0) * 1e3, 3), len(hit),
                                    [{"file": l.file, "line": l.line, "function": l.function, "launches": n}
                                     for l, n in lines[:10]])
        return [Finding("eager_ops", "warning" if warn else "info", msg, sum(s.eager_launches for s in hit), loc,
                        evidence, per_step, [s.index for s in hit])]


def _lines(ctx: Context) -> list[tuple]:
    """The user lines attribution saw running eager ops (eager_ops events of calls steps), most launches first."""
    launches: Counter = Counter()
    where: dict[tuple, object] = {}
    for s in ctx.iterations:
        for e in s.events:
            if e.kind == "eager_ops" and e.location is not None:
                key = (e.location.file, e.location.line)
                where[key] = e.location
                launches[key] += int(e.detail.launches or 0) or 1
    return [(where[k], n) for k, n in launches.most_common()]


# what a failed guard means, and what to do (cause from torch_xla_modes.guard_cause)
GUARD_CAUSES = {
    "input_shapes": "an input's shape changed (pad or bucket inputs to a few sizes, or mark the dimension dynamic "
                    "with torch._dynamo.mark_dynamic)",
    "input_dtypes": "an input's dtype changed (cast inputs to one dtype before the call)",
    "python_value": "a Python value the function reads changed (an int or float argument, a global, an "
                    "attribute): dynamo bakes it into the graph and guards on it; pass it as a tensor, or keep it "
                    "to a few values",
    "object_identity": "a different object was passed or read (a new module, function or optimizer each call): "
                       "create it once, outside the loop",
    "type": "an argument's type changed",
    "argument_structure": "the number of inputs changed (a list or tuple of another length)",
    "grad_mode": "autograd state changed (grad mode or requires_grad of an input)",
    "device": "an input's device changed",
    "compile_failed": "dynamo could not compile the function: it runs uncompiled",
    "guard": "a guard on the function's inputs failed",
}


def _dynamo_events(ctx: Context, kind: str) -> list[tuple[int, object]]:
    return [(s.index, e) for s in ctx.with_tail for e in s.events if e.kind == kind]


class DynamoGraphs(Rule):
    """How many graphs torch.compile made, from how many frame compiles: info, the overview of dynamo's work."""

    kind = "dynamo_graphs"

    def run(self, ctx: Context) -> list[Finding]:
        compiles = [e for _, e in _dynamo_events(ctx, "dynamo_compile")]
        if not compiles:
            return []
        breaks = _dynamo_events(ctx, "dynamo_graph_break")
        graphs = sum(int(e.detail.extra.get("graphs", 0)) for e in compiles)
        recompiles = [e for e in compiles if not e.detail.first]
        functions = Counter(e.detail.extra.get("function") or e.detail.call for e in compiles)
        seconds = sum(e.detail.seconds for e in compiles)
        loc = next((e.location for e in compiles if e.location), None)
        names = ", ".join(f"{f} x{n}" if n > 1 else str(f) for f, n in functions.most_common(4))
        msg = (f"torch.compile (dynamo) compiled {len(compiles)} frame(s) into {graphs} graph(s){_at(loc)}: "
               f"{names}{', ...' if len(functions) > 4 else ''}; {len(recompiles)} recompile(s), {len(breaks)} "
               f"graph break(s), {seconds:.2f} s tracing.")
        return [Finding("dynamo_graphs", "info", msg, graphs, loc,
                        DynamoGraphsEvidence(graphs, len(compiles), len(recompiles), len(breaks), round(seconds, 4),
                                             dict(functions.most_common(10))))]


@dataclass
class EagerOpsEvidence(Evidence):
    """eager_ops' evidence: eager ops per step (and those that are not the batch's transfers), the time outside
    the compiled step against the step, the iterations hit, and the lines seen launching them."""

    ops_per_step: float
    non_transfer_ops_per_step: float
    outside_ms_per_step: float
    step_ms: float
    share: float
    compiled_step_ms: float
    iterations: int
    lines: list[dict]


@dataclass
class DynamoGraphsEvidence(Evidence):
    """dynamo_graphs' evidence: what torch.compile compiled over the run (counts, tracing seconds, by function)."""

    graphs: int
    frame_compiles: int
    recompiles: int
    graph_breaks: int
    dynamo_time_s: float
    functions: dict[str, int]


@dataclass
class DynamoRecompileEvidence(Evidence):
    """dynamo_recompile's evidence: the compiled function's key and name, the guard's cause (and every cause seen,
    with dynamo's latest reasons), its tracing seconds and compiles, and dynamo's recompile limit."""

    key: str
    function: str | None
    cause: str | None
    causes: dict[str, int]
    reasons: list[str]
    dynamo_time_s: float
    compiles: int
    recompile_limit: int | None
    at_limit: bool


@dataclass
class DynamoBreakEvidence(Evidence):
    """dynamo_graph_break's evidence: dynamo's reason and the function it broke inside (`via`)."""

    reason: str
    via: str | None


class DynamoRecompile(Rule):
    """A function dynamo compiled again because a guard failed, at the line of the guard (else the function's) with
    dynamo's reason. A warning when it recompiles in several iterations (it keeps recurring), or when it reached
    dynamo's recompile limit (it then runs uncompiled for good); a frame dynamo could not compile is info."""

    kind = "dynamo_recompile"

    def run(self, ctx: Context) -> list[Finding]:
        by_key: dict[str, list] = {}
        for j, e in _dynamo_events(ctx, "dynamo_compile"):
            by_key.setdefault(e.detail.key, []).append((j, e))
        out = []
        for key, evs in by_key.items():
            again = [(j, e) for j, e in evs if not e.detail.first or e.detail.cause == "compile_failed"]
            if not again:
                continue
            hits = sorted({j for j, _ in again})
            causes = Counter(e.detail.cause or "guard" for _, e in again)
            cause = causes.most_common(1)[0][0]
            reasons = [d for _, e in again for d in e.detail.differences]
            limit = next((e.detail.extra.get("recompile_limit") for _, e in evs if e.detail.extra.get("recompile_limit")),
                         None)
            at_limit = bool(limit) and len(evs) >= limit
            recompiled = [j for j, e in again if not e.detail.first]
            recurring = len(set(recompiled)) >= threshold("recurring_min_hits") or at_limit
            seconds = sum(e.detail.seconds for _, e in again)
            loc = next((e.location for _, e in again if e.location), None)
            fn = again[-1][1].detail.extra.get("function") or again[-1][1].detail.call
            why = GUARD_CAUSES.get(cause, GUARD_CAUSES["guard"])
            last = f" (dynamo: {reasons[-1]})" if reasons else ""
            msg = (f"torch.compile recompiled {fn}{_at(loc)} {len(again)} time(s) in {len(hits)} iteration(s) "
                   f"({seconds:.2f} s tracing, plus XLA's compile of each new graph): {why}{last}.")
            if at_limit:
                msg += (f" It reached dynamo's recompile limit ({limit}): from then on the function runs uncompiled "
                        "(torch._dynamo.config.recompile_limit).")
            elif cause == "compile_failed" and not recurring:
                msg += (" Its ops are traced lazily as in a loop without torch.compile (no per-step cost of its "
                        "own measured).")
            elif not recurring:
                msg += " A one-off so far (dynamo may have made the changing value dynamic after it)."
            out.append(Finding("dynamo_recompile", "warning" if recurring else "info", msg, len(again), loc,
                               DynamoRecompileEvidence(key, fn, cause, dict(causes), reasons[-8:], round(seconds, 4),
                                                       len(evs), limit, at_limit),
                               len(again) / max(1, I.count(ctx.train)), hits))
        return out


class DynamoGraphBreak(Rule):
    """Where dynamo broke the graph, at the user's line with dynamo's reason: each call of the compiled function
    then runs the graphs before and after the break apart, with Python between them. Dynamo says it once per
    compile of the frame, not per call: how much it costs per step is not measured, so it is info."""

    kind = "dynamo_graph_break"

    def run(self, ctx: Context) -> list[Finding]:
        groups: dict[tuple, list] = {}
        for j, e in _dynamo_events(ctx, "dynamo_graph_break"):
            key = ((e.location.file, e.location.line) if e.location else ("?", 0), e.detail.reason)
            groups.setdefault(key, []).append((j, e))
        out = []
        for (_, reason), evs in groups.items():
            loc = evs[0][1].location
            via = evs[0][1].detail.via
            out.append(Finding(
                "dynamo_graph_break", "info",
                f"torch.compile breaks the graph{_at(loc) if loc else (f' inside {via}' if via else '')}"
                f"{f' (in {via})' if via and loc else ''}: {reason}. Every "
                "call runs the graph before the break and the one after it separately, with Python in between "
                f"(seen {len(evs)} time(s) while compiling). {ctx.advice.get('dynamo_graph_break', '')}".strip(),
                len(evs), loc, DynamoBreakEvidence(reason, via), None, sorted({j for j, _ in evs})))
        return out


def _mesh_text(meshes: list[dict]) -> str:
    if not meshes:
        return "no xs.Mesh found"
    parts = [f"mesh {tuple(m['shape'])}" + (f" {tuple(m['axis_names'])}" if m.get("axis_names") else "")
             for m in meshes[:2]]
    return " and ".join(parts) + (f" (+{len(meshes) - 2} more)" if len(meshes) > 2 else "")


class Spmd(Rule):
    """The step ran sharded: over which mesh, how many inputs sharded, which collectives the partitioner added."""

    kind = "spmd"

    def run(self, ctx: Context) -> list[Finding]:
        same: dict[str, list] = {}  # graphs that tell the same story (a warm-up graph and the steady one) say it once
        for s in ctx.with_tail:
            for e in s.events:
                if e.kind == "spmd":
                    x = evidence_json(e.detail)  # the typed fields (and any extras) as the report shows them
                    key = repr((x.get("devices"), x.get("inputs"), x.get("sharded_inputs"), x.get("collectives")))
                    same.setdefault(key, []).append((s.index, x, e.detail))
        out = []
        for group in same.values():
            j, x, last = group[-1]
            where_ = f"sharded over {x.get('devices')} devices ({_mesh_text(x.get('meshes') or [])})"
            inputs = (f"{x.get('sharded_inputs', 0)} of its {x.get('inputs', 0)} inputs sharded, the others "
                      "replicated" if x.get("sharded_inputs") else
                      f"none of its {x.get('inputs', 0)} inputs sharded: every device runs the whole step on "
                      "replicated data")
            found = x.get("collectives")
            if found is None:
                coll = f"its collectives are not known ({x.get('collectives_error', 'no partitioned module')})"
            elif not found:
                coll = "the partitioned graph has no collectives: each device works on its own shard"
            else:
                share = x.get("collective_share_of_bytes")
                coll = ("the partitioned graph has " + ", ".join(
                    f"{c['count']} {op} ({_mb(c['bytes'])})" for op, c in sorted(found.items(),
                                                                               key=lambda kv: -kv[1]["bytes"]))
                    + (f": {share:.0%} of the bytes one device's graph accesses (the roofline's bytes)"
                       if share is not None else ""))
            graphs = [g.get("graph") for _, g, _ in group]
            lead = "The step graph ran" if len(group) == 1 else f"{len(group)} step graphs ran"
            out.append(Finding(
                "spmd", "info", f"{lead} {where_}: {inputs}; {coll}.", sum(c["count"] for c in (found or {}).values()),
                None, SpmdGraphsEvidence(last, graphs), None, sorted({i for i, _, _ in group})))
        return out


@dataclass
class SpmdGraphsEvidence(Evidence):
    """spmd's evidence: the last graph's SPMD evidence as the report shows it (records.SpmdEvidence: its set
    fields and extras) and every graph that told the same story."""

    graph: SpmdEvidence
    graphs: list[str | None]

    def to_json(self) -> dict[str, Any]:
        return {**evidence_json(self.graph), "graphs": self.graphs}


def _mb(n: float) -> str:
    return f"{n / 1e6:.3g} MB" if n >= 1e5 else f"{n / 1e3:.3g} kB" if n >= 100 else f"{n:.0f} B"


RULES = (EagerOps(), DynamoGraphs(), DynamoRecompile(), DynamoGraphBreak(), Spmd())
