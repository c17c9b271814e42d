"""One analysis per function, each returning plain dicts/lists (HTA-style): steps and their time breakdown,
executor (device) busy time, duty cycle and idle gaps, top HLO ops, compiles. The window's findings are
trace/rules.py's. See docs/analyze.md."""
from __future__ import annotations

import re
from collections import defaultdict
from typing import TypedDict

import numpy as np

from . import intervals as iv
from .events import COMPILE_RE, TRANSFER_RE, Capture, Line

PS_PER_MS = 1e9
CATEGORIES = ("execution", "compile", "data", "host", "idle")
COLLECTIVES = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "ragged-all-to-all",
               "collective-permute", "collective-broadcast", "send", "recv")
_SUFFIX = re.compile(r"(\.\d+)+$")


def ms(ps) -> float:
    return round(float(ps) / PS_PER_MS, 4)


def op_category(name: str) -> str:
    """fusion | dot/convolution | collective | copy | other, from an HLO op (instruction) name."""
    base = _SUFFIX.sub("", name or "").lower()
    for suffix in ("-start", "-done", "-update"):
        base = base.removesuffix(suffix)
    if base in COLLECTIVES or any(base.startswith(c) for c in COLLECTIVES if c not in ("send", "recv")):
        return "collective"
    if base in ("dot", "convolution", "conv", "cublas-gemm", "gemm") or base.startswith(("dot", "convolution")) \
            or base.endswith(("_dot", "_convolution", "-convolution", "gemm")):
        return "dot/convolution"
    if base in ("copy", "copy-start", "copy-done") or base.startswith("copy."):
        return "copy"
    if "fusion" in base:
        return "fusion"
    return "other"


# --------------------------------------------------------------------------------------------- streams

def _outermost(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Mask of events (sorted by start, longest first on ties) not nested in an earlier event."""
    if len(start) == 0:
        return np.zeros(0, dtype=bool)
    prev_end = np.maximum.accumulate(end)
    mask = np.ones(len(start), dtype=bool)
    mask[1:] = start[1:] >= prev_end[:-1]
    return mask


def _self_times(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Self time of events on one thread (sorted by start, longest first on ties): duration minus the
    durations of directly nested events."""
    dur = end - start
    if len(start) < 2 or np.all(start[1:] >= np.maximum.accumulate(end)[:-1]):
        return dur.copy()
    self_t = dur.copy()
    stack: list[int] = []
    for i in range(len(start)):
        s = start[i]
        while stack and end[stack[-1]] <= s:
            stack.pop()
        if stack:
            self_t[stack[-1]] -= dur[i]
        stack.append(i)
    return np.maximum(self_t, 0)


def executor_streams(cap: Capture) -> dict:
    """Group HLO op events into one stream per device: by `device_ordinal` where the events carry it (JAX: one
    PJRT CPU device per ordinal, whatever thread ran the op), by device plane on accelerators, else all executor
    threads of a host form one stream (torch_xla on CPU: one device, executions hop threads).
    Returns {key: {"label", "threads", "busy" (disjoint intervals), "ops": {mid: [count, self_ps]}, "names"}}."""
    streams: dict = {}
    for line in cap.lines:
        if not line.is_executor:
            continue
        idx = line.op_idx
        s, e = line.start[idx], line.end[idx]
        order = np.lexsort((-(e - s), s))
        idx, s, e, dev = idx[order], s[order], e[order], line.op_device[order]
        self_t = _self_times(s, e)
        top = _outermost(s, e)
        mids = line.mid[idx]
        for d in np.unique(dev).tolist():
            sel = dev == d
            if d == -2:
                key, label = (line.host, line.plane), line.plane.removeprefix("/device:")
            elif d == -1:
                key, label = (line.host, "executor"), "executor" if len(cap.hosts) == 1 else f"{line.host}/executor"
            else:
                key, label = (line.host, int(d)), (f"device {d}" if len(cap.hosts) == 1 else f"{line.host}/device {d}")
            st = streams.setdefault(key, {"label": label, "threads": set(), "intervals": [], "ops": {},
                                          "names": line.names, "modules": {}})
            st["threads"].add(line.name)
            st["modules"].update(line.modules)
            tsel = sel & top
            st["intervals"].append(np.stack([s[tsel], e[tsel]], axis=1))
            m_sel, t_sel = mids[sel], self_t[sel]
            uniq, inv = np.unique(m_sel, return_inverse=True)
            counts = np.bincount(inv)
            sums = np.bincount(inv, weights=t_sel)
            ops = st["ops"]
            for m, c, t in zip(uniq.tolist(), counts.tolist(), sums.tolist()):
                prev = ops.get(m)
                ops[m] = [prev[0] + c, prev[1] + t] if prev else [c, t]
    for st in streams.values():
        st["busy"] = iv.union(*st.pop("intervals"))
        st["threads"] = sorted(st["threads"])
    return dict(sorted(streams.items(), key=lambda kv: (str(kv[0][0]), str(kv[0][1]).zfill(8))))


# --------------------------------------------------------------------------------------------- steps

def _main_line(cap: Capture) -> Line | None:
    host_lines = [l for l in cap.lines if not l.is_executor and not l.is_device_plane]
    with_steps = [l for l in host_lines if len(l.step_idx)]
    if with_steps:
        return max(with_steps, key=lambda l: len(l.step_idx))
    named = [l for l in host_lines if l.name in ("python", "MainThread", "main")]
    if named:
        return max(named, key=lambda l: len(l.start))
    return max(host_lines, key=lambda l: len(l.start)) if host_lines else None


def find_steps(cap: Capture) -> tuple[list[dict], str]:
    """Steps from step annotations: torch_xla `StepTrace` / JAX `StepTraceAnnotation` (events with the `_r`
    root marker and a `step_num` stat). Fallback (torch_xla without StepTrace): one step per `StepMarker`."""
    main = _main_line(cap)
    if main is None:
        return [], "none"
    if len(main.step_idx):
        idx = main.step_idx
        order = np.argsort(main.start[idx], kind="stable")
        steps = []
        for k in order.tolist():
            i = int(idx[k])
            steps.append({"name": main.name_of(i), "step_num": main.step_num[k], "start": int(main.start[i]),
                          "end": int(main.end[i])})
        return steps, f"step annotations ({steps[0]['name']!r} on thread {main.name!r})"
    marker_mids = [m for m, n in main.names.items() if n == "StepMarker"]
    if marker_mids:
        sel = np.flatnonzero(np.isin(main.mid, marker_mids))
        if len(sel) >= 2:
            ends = np.sort(main.end[sel])
            steps = [{"name": "StepMarker", "step_num": None, "start": int(a), "end": int(b)}
                     for a, b in zip(ends[:-1], ends[1:])]
            return steps, f"StepMarker events (no step annotations) on thread {main.name!r}"
    return [], "none (no step annotations and no StepMarker events)"


def _category_intervals(cap: Capture, streams: dict, main: Line | None) -> dict:
    busy = iv.union(*[st["busy"] for st in streams.values()])
    comp, data = [], []
    for line in cap.lines:
        if line.is_executor or line.is_device_plane:
            continue
        cmids = [m for m, n in line.names.items() if COMPILE_RE.search(n)]
        dmids = [m for m, n in line.names.items() if TRANSFER_RE.search(n)]
        if cmids:
            sel = np.isin(line.mid, cmids)
            comp.append(np.stack([line.start[sel], line.end[sel]], axis=1))
        if dmids:
            sel = np.isin(line.mid, dmids)
            data.append(np.stack([line.start[sel], line.end[sel]], axis=1))
    host = iv.merge(main.start, main.end) if main is not None else iv.EMPTY
    return {"execution": busy, "compile": iv.union(*comp), "data": iv.union(*data), "host": host}


def compiles(cap: Capture) -> list[dict]:
    """Outermost compile events on host threads (torch_xla `XLAGraphExecutor::Compile`, PJRT `*::Compile`,
    JAX `backend_compile_and_load`), with their thread and duration."""
    out = []
    for line in cap.lines:
        if line.is_executor or line.is_device_plane:
            continue
        cmids = [m for m, n in line.names.items() if COMPILE_RE.search(n)]
        if not cmids:
            continue
        sel = np.flatnonzero(np.isin(line.mid, cmids))
        s, e = line.start[sel], line.end[sel]
        order = np.lexsort((-(e - s), s))
        sel, s, e = sel[order], s[order], e[order]
        top = _outermost(s, e)
        for i, a, b in zip(sel[top].tolist(), s[top].tolist(), e[top].tolist()):
            out.append({"name": line.name_of(i), "thread": line.name, "start": a, "end": b})
    # drop compiles inside another thread's compile (e.g. LLVM codegen threads under PjRtCpuClient::Compile)
    out.sort(key=lambda c: (c["start"], -(c["end"] - c["start"])))
    kept: list[dict] = []
    for c in out:
        if any(k["start"] <= c["start"] and c["end"] <= k["end"] and k["thread"] != c["thread"] for k in kept[-8:]):
            continue
        kept.append(c)
    return kept


def step_breakdown(cap: Capture, steps: list[dict], cats: dict, compile_events: list[dict]) -> list[dict]:
    """Per step, each instant of [step start, next step start) goes to the first category active:
    execution (an executor/device runs HLO ops), compile, data (transfers / data-loading annotations),
    host (the step's host thread is inside a traced event: tracing, graph building, dispatch), idle."""
    layers = category_layers(cats)
    cstarts = np.array([c["start"] for c in compile_events], dtype=np.int64)
    rows = []
    for k, st in enumerate(steps):
        a = st["start"]
        b = steps[k + 1]["start"] if k + 1 < len(steps) else st["end"]
        b = max(b, st["end"]) if k + 1 >= len(steps) else max(b, a)
        parts = split(layers, a, b)
        n_comp = int(((cstarts >= a) & (cstarts < b)).sum()) if len(cstarts) else 0
        rows.append({"step": st["step_num"] if st["step_num"] is not None else k, "start": a, "end": b,
                     "annotation": st["end"] - st["start"], "parts": parts, "compiles": n_comp})
    return rows


def category_layers(cats: dict) -> list:
    """The categories' intervals as nested unions (execution, + compile, + data, + host): what `split` measures."""
    u1 = cats["execution"]
    u2 = iv.union(u1, cats["compile"])
    u3 = iv.union(u2, cats["data"])
    return [u1, u2, u3, iv.union(u3, cats["host"])]


def split(layers: list, a: int, b: int) -> dict:
    """[a, b) split into the breakdown's categories (ps): each instant goes to the first category active. The one
    derivation of "idle" (nothing traced at all), for a step's bar and for a gap with no device op alike."""
    m = [iv.measure(iv.clip(u, a, b)) for u in layers]
    return {"execution": m[0], "compile": m[1] - m[0], "data": m[2] - m[1], "host": m[3] - m[2],
            "idle": (b - a) - m[3]}


# --------------------------------------------------------------------------------------------- gaps

def host_activity(cap: Capture, a: int, b: int, limit: int = 4) -> list[dict]:
    """What the host threads were doing during [a, b): per thread, the innermost traced event that covers at
    least half of the interval (with its nesting path), else the events with the largest overlap."""
    out = []
    span = b - a
    for line in cap.lines:
        if line.is_executor or line.is_device_plane:
            continue
        sel = np.flatnonzero((line.start < b) & (line.end > a))
        if len(sel) == 0:
            continue
        ov = np.minimum(line.end[sel], b) - np.maximum(line.start[sel], a)
        cover = sel[ov * 2 >= span]
        if len(cover):
            order = np.lexsort((-(line.end[cover] - line.start[cover]), line.start[cover]))
            chain = [line.name_of(int(i)) for i in cover[order]]
            inner = cover[order][-1]
            o = min(int(line.end[inner]), b) - max(int(line.start[inner]), a)
            out.append({"thread": line.name, "name": chain[-1], "path": " > ".join(chain[-4:]), "overlap_ms": ms(o)})
        else:
            best = np.argsort(-ov)[:2]
            for j in best.tolist():
                i = int(sel[j])
                out.append({"thread": line.name, "name": line.name_of(i), "path": line.name_of(i),
                            "overlap_ms": ms(ov[j])})
    out.sort(key=lambda r: -r["overlap_ms"])
    return out[:limit]


def device_activity(cap: Capture, streams: dict, window: tuple[int, int], min_gap_ps: int, top_n: int = 5,
                    steps: list[dict] | None = None, cats: dict | None = None) -> tuple[list[dict], dict]:
    """Per device: busy time, duty cycle over the window, idle gaps >= min_gap; and the largest windows in which
    no device ran an op, each with what the host threads did meanwhile and (given the step breakdown's `cats`)
    how the breakdown splits it: a window with no device op is mostly compile or host work, "idle" only where
    nothing at all was traced, so the gaps and the breakdown's idle share read the same."""
    a, b = window
    span = max(b - a, 1)
    devices = []
    for st in streams.values():
        g = iv.gaps(st["busy"], a, b)
        glen = g[:, 1] - g[:, 0] if len(g) else np.zeros(0, dtype=np.int64)
        big = glen >= min_gap_ps
        busy = iv.measure(iv.clip(st["busy"], a, b))
        devices.append({"device": st["label"], "threads": st["threads"], "busy_ms": ms(busy),
                        "duty_cycle": round(busy / span, 4), "idle_gaps": int(big.sum()),
                        "idle_in_gaps_ms": ms(glen[big].sum()) if big.any() else 0.0,
                        "largest_gap_ms": ms(glen.max()) if len(glen) else 0.0})
    all_busy = iv.union(*[st["busy"] for st in streams.values()])
    g = iv.gaps(all_busy, a, b)
    glen = g[:, 1] - g[:, 0] if len(g) else np.zeros(0, dtype=np.int64)
    keep = np.flatnonzero(glen >= min_gap_ps)
    order = keep[np.argsort(-glen[keep], kind="stable")][:top_n]
    step_starts = np.array([s["start"] for s in (steps or [])], dtype=np.int64)
    layers = category_layers(cats) if cats is not None else None
    largest = []
    for i in order.tolist():
        ga, gb = int(g[i, 0]), int(g[i, 1])
        step = None
        if len(step_starts):
            k = int(np.searchsorted(step_starts, ga, side="right")) - 1
            step = steps[k]["step_num"] if k >= 0 and steps[k]["step_num"] is not None else (k if k >= 0 else None)
        row = {"start_ms": ms(ga - a), "duration_ms": ms(gb - ga), "step": step,
               "host_activity": host_activity(cap, ga, gb)}
        if layers is not None:
            row["breakdown_ms"] = {k: ms(v) for k, v in split(layers, ga, gb).items()}
        largest.append(row)
    any_busy = iv.measure(iv.clip(all_busy, a, b))
    summary = {"min_gap_ms": ms(min_gap_ps), "count": int(len(keep)), "total_ms": ms(glen[keep].sum()) if len(keep)
               else 0.0, "any_device_duty_cycle": round(any_busy / span, 4), "largest": largest}
    return devices, summary


# --------------------------------------------------------------------------------------------- ops

class TopOp(TypedDict):
    """One row of the report's `trace.top_ops` (readers such as recipes index these keys; the type says which)."""

    name: str
    module: str | None
    category: str
    occurrences: int
    devices: int
    self_time_ms_per_device: float
    share: float


def top_ops(streams: dict, limit: int = 15) -> tuple[list[TopOp], dict, dict]:
    """Top HLO ops by self time. Shares are computed per device (op self time / that device's total op time)
    and then averaged over the devices, never by adding durations across threads."""
    per_dev_total = {k: sum(v[1] for v in st["ops"].values()) for k, st in streams.items()}
    n_dev = max(len(streams), 1)
    agg: dict = defaultdict(lambda: {"occurrences": 0, "self_ps": 0.0, "share_sum": 0.0, "devices": 0})
    cat_share: dict = defaultdict(float)
    coll = []
    for k, st in streams.items():
        tot = per_dev_total[k] or 1.0
        dev_cat: dict = defaultdict(float)
        for m, (cnt, t) in st["ops"].items():
            name = st["names"].get(m, "?")
            r = agg[name]
            r["occurrences"] += cnt
            r["self_ps"] += t
            r["share_sum"] += t / tot
            r["devices"] += 1
            r.setdefault("module", st["modules"].get(m))
            dev_cat[op_category(name)] += t
        for c, t in dev_cat.items():
            cat_share[c] += t / tot / n_dev
        coll.append({"device": st["label"], "collective_ms": ms(dev_cat.get("collective", 0.0)),
                     "op_time_ms": ms(per_dev_total[k]),
                     "share": round(dev_cat.get("collective", 0.0) / tot, 4) if per_dev_total[k] else 0.0})
    rows = []
    for name, r in agg.items():
        rows.append(TopOp(name=name, module=r.get("module"), category=op_category(name),
                          occurrences=r["occurrences"], devices=r["devices"],
                          self_time_ms_per_device=ms(r["self_ps"] / r["devices"]),
                          share=round(r["share_sum"] / n_dev, 4)))
    rows.sort(key=lambda r: (-r["share"], -r["self_time_ms_per_device"], r["name"]))
    shares = [c["share"] for c in coll]
    collective = {"mean": round(float(np.mean(shares)), 4) if shares else 0.0,
                  "min": round(min(shares), 4) if shares else 0.0, "max": round(max(shares), 4) if shares else 0.0,
                  "per_device": coll}
    categories = {c: round(v, 4) for c, v in sorted(cat_share.items(), key=lambda kv: -kv[1])}
    return rows[:limit], categories, collective
