"""Inline SVG charts drawn in Python: the step-time timeline, per-step count strips aligned with it, and the
stacked step breakdown of a capture. No charting library and no JavaScript: the page is one file that renders
anywhere, and 2,000 steps cost a few hundred kilobytes (docs/html.md says why this beats vendoring a library).

Plots use a fixed viewBox of W units per row with preserveAspectRatio="none", so the page can zoom them by
widening their container; strokes keep their width (vector-effect) and all text lives outside the stretched SVG.
"""
from __future__ import annotations

import math
from html import escape
from typing import Any, Iterable

from ..model import fmt
from ..model import summary_keys as K
from ..model.summary import StepRow

W = 1000.0  # viewBox width of every plot
TIMELINE_H = 200.0
FLAGS_H = 36.0  # three flag rows under the timeline: compile, attribution, host read / fallback
COUNT_H = 34.0
PAD_TOP = 6.0
LABEL_GAP = 12.0  # px between two y-axis label baselines (the labels are 11 px text)
MAX_MARKS = 3000  # more steps than this: one mark per bin of steps (the page stays ~2 MB at any run length)

# series colours (also in the legend, style.css uses the same names)
COLOURS = {"train": "#3b6fd4", "eval": "#8e44ad", "compile": "#d6322c", "attributed": "#e39b1b",
           "read": "#1c9a6c", "fallback": "#7a4b1f", "capture": "#f2e6a8", "warmup": "#eeeeee"}
BREAKDOWN = {"execution": "#3b6fd4", "compile": "#d6322c", "data": "#1c9a6c", "host": "#e39b1b", "idle": "#bbbbbb"}


def _r(x: float) -> str:
    """Coordinates with at most two decimals and no trailing zeros: the page's size is mostly these."""
    s = f"{x:.2f}".rstrip("0").rstrip(".")
    return s if s != "-0" else "0"


class YScale:
    """Step times to y: logarithmic when they span more than 30x (a compile step next to 1 ms steps), else
    linear from 0, so both the outliers and the steady steps stay visible."""

    def __init__(self, values: Iterable[float], top: float, bottom: float):
        pos = [v for v in values if v and v > 0]
        self.top, self.bottom = top, bottom
        self.hi = max(pos) if pos else 1.0
        self.lo = min(pos) if pos else 1.0
        self.log = bool(pos) and self.hi / self.lo > 30
        if self.log:
            self.lo_log = math.log10(self.lo) - 0.3
            self.hi_log = math.log10(self.hi) + 0.02
        else:
            self.hi = _nice_ceiling(self.hi * 1.05)

    def __call__(self, v: float) -> float:
        span = self.bottom - self.top
        if self.log:
            if not v or v <= 0:
                return self.bottom
            f = (math.log10(v) - self.lo_log) / (self.hi_log - self.lo_log)
        else:
            f = (v or 0.0) / self.hi
        return self.bottom - max(0.0, min(1.0, f)) * span

    def ticks(self) -> list[float]:
        if not self.log:
            return [self.hi * k / 4 for k in range(5)]
        out = []
        for e in range(math.floor(self.lo_log), math.ceil(self.hi_log) + 1):
            for m in (1, 2, 5):
                v = m * 10.0 ** e
                if self.lo_log <= math.log10(v) <= self.hi_log:
                    out.append(v)
        return out if len(out) <= 9 else [v for v in out if str(v).lstrip("0.").startswith("1")]


def _nice_ceiling(v: float) -> float:
    if v <= 0:
        return 1.0
    e = 10 ** math.floor(math.log10(v))
    for m in (1, 1.2, 1.6, 2, 2.4, 3.2, 4, 6, 8, 10):  # quarters stay round
        if m * e >= v:
            return m * e
    return 10 * e


def _plain(x: float, sig: int = 3) -> str:
    """A number as a person writes it: three significant digits, never in exponent form (6000, not 6e+03)."""
    text = f"{x:.{sig}g}"
    if "e" in text:
        text = f"{x:.0f}" if abs(x) >= 1 else f"{x:.6f}".rstrip("0").rstrip(".")
    return text


def _ms_label(seconds: float) -> str:
    """An axis tick: "0", milliseconds below a second ("0.5 ms", "12 ms", "600 ms"), seconds above ("6 s")."""
    v = seconds * 1e3
    if v == 0:
        return "0"
    if v >= 1000:
        return f"{_plain(seconds)} s"
    if v >= 100:
        return f"{v:.0f} ms"
    if v >= 1:
        return f"{_plain(v)} ms"
    return f"{_plain(v, 2)} ms"


def step_flags(step: dict[str, Any]) -> list[str]:
    """CSS classes of a step's mark: its phase and what happened in it."""
    flags = ["ev" if step.get("phase") == "eval" else "tr"]
    if step.get("compiles"):
        flags.append("cp")
    if step.get("attributed"):
        flags.append("at")
    if StepRow.from_json(step).host_reads:
        flags.append("rd")
    if step.get("fallback_ops"):
        flags.append("fb")
    return flags


def _tip(step: dict[str, Any]) -> str:
    row = StepRow.from_json(step)
    h2d = (step.get("host_to_device") or {}).get("count", 0)
    what = f"step {step.get('index')}"
    if step.get("last_index") is not None:  # a bin of steps: the slowest step's time, the largest counts
        what = f"{fmt.steps(range(step['index'], step['last_index'] + 1))} (slowest)"
    wall = f"wall time {fmt.ms(row.wall_time_s, 2)}" + (
        f", compile {fmt.ms(row.compile_time_s, 2)}" if row.compile_time_s else "")
    parts = [f"{what} ({step.get('phase') or 'train'}): step time {fmt.ms(row.step_time_s, 2)} ({wall})",
             f"compiles {step.get('compiles', 0)}", f"executions {step.get('executions', 0)}",
             f"host reads {row.host_reads}", f"host-to-device {h2d}"]
    if step.get("attributed"):
        parts.append("attribution step")
    if step.get("fallback_ops"):
        parts.append("fallback " + ", ".join(step["fallback_ops"]))
    site = step.get("site")
    if site:
        parts.append(f"at line {site.get('line')}")
    return " · ".join(parts)


def bin_size(n: int) -> int:
    """Steps per mark: 1 up to MAX_MARKS steps, then the smallest whole number that keeps to MAX_MARKS marks."""
    return max(1, math.ceil(n / MAX_MARKS))


def binned(steps: list[dict[str, Any]], k: int) -> list[dict[str, Any]]:
    """Bins of k steps as step-like records: the slowest step's time (step time, net of compile) and the largest
    count of each kind (a spike stays visible), a flag when any step of the bin has it, eval only when every step
    is."""
    if k <= 1:
        return steps
    out = []
    for j in range(0, len(steps), k):
        group = steps[j:j + k]
        rows = [StepRow.from_json(s) for s in group]
        at = max(range(len(group)), key=lambda i: rows[i].step_time_s)
        top = group[at]
        fallback: dict[str, int] = {}
        for s in group:
            for op, c in (s.get("fallback_ops") or {}).items():
                fallback[op] = fallback.get(op, 0) + c
        out.append({"index": group[0].get("index"), "last_index": group[-1].get("index"),
                    "wall_time_s": rows[at].wall_time_s, "compile_time_s": rows[at].compile_time_s,
                    K.STEP_TIME_S: rows[at].step_time_s,
                    "phase": "eval" if all(s.get("phase") == "eval" for s in group) else "train",
                    "compiles": max(s.get("compiles") or 0 for s in group),
                    "executions": max(s.get("executions") or 0 for s in group),
                    "attributed": any(s.get("attributed") for s in group),
                    K.STEP_HOST_READS: max(r.host_reads for r in rows),
                    "host_to_device": {"count": max((s.get("host_to_device") or {}).get("count") or 0
                                                    for s in group)},
                    "fallback_ops": fallback, K.STEP_BREAKDOWN: top.get(K.STEP_BREAKDOWN)})
    return out


def step_times(steps: list[dict[str, Any]]) -> list[float]:
    """The steps' step times (values.StepRow: net of compile, as the summary's step time): what the timeline plots."""
    return [StepRow.from_json(s).step_time_s for s in steps]


def boundary_ranges(steps: list[dict[str, Any]]) -> list[tuple[int, int]]:
    """Each iteration's range of session boundary indices [first, last]: capture windows count boundaries."""
    out, k = [], 0
    for s in steps:
        n = max(1, len(s.get("boundaries") or []))
        out.append((k, k + n - 1))
        k += n
    return out


def timeline(steps: list[dict[str, Any]], *, warmup: int = 0, captures: list[dict] | None = None,
             yvalues: list[float] | None = None) -> dict[str, str]:
    """The step-time plot (one <rect class="m ..."> per step, or per bin beyond MAX_MARKS steps) and its flag rows;
    returns the plot SVG and the y-axis labels SVG (drawn apart so that zooming never stretches text).
    `yvalues`: the times the y scale must cover (default: these steps'), so that two runs side by side share
    one scale."""
    k = bin_size(len(steps))
    all_steps, steps = steps, binned(steps, k)
    n = max(1, len(steps))
    bw = W / n
    gap = bw * 0.15 if bw > 2 else 0.0
    base = TIMELINE_H
    y = YScale(yvalues if yvalues is not None else step_times(steps), PAD_TOP, base)
    h_total = TIMELINE_H + FLAGS_H
    out = [f'<svg class="plot timeline" viewBox="0 0 {_r(W)} {_r(h_total)}" preserveAspectRatio="none" '
           f'height="{_r(h_total)}" role="img" aria-label="step time per step, net of compile">']
    # background bands: warm-up, capture windows
    train_idx = [i for i, s in enumerate(all_steps) if s.get("phase") != "eval"]
    if warmup and train_idx:
        last = train_idx[min(warmup, len(train_idx)) - 1] // k
        out.append(f'<rect class="band warmup" x="0" y="0" width="{_r((last + 1) * bw)}" height="{_r(base)}">'
                   f'<title>warm-up iterations</title></rect>')
    ranges = boundary_ranges(all_steps)
    for cap in captures or []:
        first, num = cap.get("start_step"), cap.get("steps_captured") or cap.get("num_steps")
        if first is None or not num or not cap.get("path"):
            continue
        inside = [i // k for i, (a, b) in enumerate(ranges) if b >= first and a < first + num]
        if inside:
            out.append(f'<rect class="band capture" x="{_r(inside[0] * bw)}" y="0" '
                       f'width="{_r((inside[-1] - inside[0] + 1) * bw)}" height="{_r(base)}">'
                       f'<title>capture window ({cap.get("run") or "trace"})</title></rect>')
    for t in y.ticks():
        out.append(f'<line class="grid" x1="0" x2="{_r(W)}" y1="{_r(y(t))}" y2="{_r(y(t))}"/>')
    flag_rows = {"cp": 0, "at": 1, "rd": 2, "fb": 2}
    row_h = FLAGS_H / 3
    flags_svg = []
    for j, s in enumerate(steps):
        x = j * bw + gap / 2
        top = y(StepRow.from_json(s).step_time_s)
        cls = step_flags(s)
        out.append(f'<rect class="m {" ".join(cls)}" x="{_r(x)}" y="{_r(top)}" width="{_r(bw - gap)}" '
                   f'height="{_r(max(base - top, 0.5))}"><title>{escape(_tip(s))}</title></rect>')
        for c in cls[1:]:
            if c == "fb" and "rd" in cls:
                continue
            fy = base + flag_rows[c] * row_h + 1.5
            flags_svg.append(f'<rect class="f {c}" x="{_r(x)}" y="{_r(fy)}" width="{_r(max(bw - gap, 0.6))}" '
                             f'height="{_r(row_h - 3)}"/>')
    out.append(f'<line class="axis" x1="0" x2="{_r(W)}" y1="{_r(base)}" y2="{_r(base)}"/>')
    out.extend(flags_svg)
    out.append("</svg>")
    labels = [f'<svg class="ylabels" viewBox="0 0 86 {_r(h_total)}" width="86" height="{_r(h_total)}">']
    drawn: list[float] = []
    for t in sorted(y.ticks(), key=y):  # top first
        # a label needs its own line: none closer than LABEL_GAP to another tick's or to the flag rows' labels
        # under the axis ("compile"), which a tick near the bottom of a log scale would overprint
        if t <= 0 or y(t) + 4 > base + row_h - 3 - LABEL_GAP or (drawn and y(t) - drawn[-1] < LABEL_GAP):
            continue
        drawn.append(y(t))
        labels.append(f'<text x="82" y="{_r(y(t) + 4)}" text-anchor="end">{_ms_label(t)}</text>')
    for i, name in enumerate(("compile", "attribution", "host read")):
        labels.append(f'<text class="flag" x="82" y="{_r(base + i * row_h + row_h - 3)}" '
                      f'text-anchor="end">{name}</text>')
    labels.append("</svg>")
    return {"plot": "".join(out), "labels": "".join(labels), "scale": "log" if y.log else "linear", "bin": k}


COUNT_SERIES = (("compiles", "compiles", lambda s: s.get("compiles") or 0),
                ("executions", "executions", lambda s: s.get("executions") or 0),
                ("d2h", "host reads", lambda s: StepRow.from_json(s).host_reads),
                ("h2d", "host→device", lambda s: (s.get("host_to_device") or {}).get("count") or 0))


def counts(steps: list[dict[str, Any]]) -> dict[str, str]:
    """Per-step counts as bar strips on the timeline's x axis: one <path> per series (a few bytes a step); binned
    like the timeline beyond MAX_MARKS steps (the largest count of each bin)."""
    steps = binned(steps, bin_size(len(steps)))
    n = max(1, len(steps))
    bw = W / n
    gap = bw * 0.15 if bw > 2 else 0.0
    h = COUNT_H * len(COUNT_SERIES)
    out = [f'<svg class="plot counts" viewBox="0 0 {_r(W)} {_r(h)}" preserveAspectRatio="none" height="{_r(h)}" '
           f'role="img" aria-label="per-step counts">']
    labels = [f'<svg class="ylabels" viewBox="0 0 86 {_r(h)}" width="86" height="{_r(h)}">']
    for row, (key, name, get) in enumerate(COUNT_SERIES):
        vals = [get(s) for s in steps]
        top, bottom = row * COUNT_H + 4, (row + 1) * COUNT_H - 2
        peak = max(vals) if vals else 0
        d = []
        for k, v in enumerate(vals):
            if v:
                hh = (bottom - top) * v / peak
                d.append(f"M{_r(k * bw + gap / 2)} {_r(bottom)}v-{_r(hh)}h{_r(max(bw - gap, 0.6))}v{_r(hh)}z")
        out.append(f'<line class="axis" x1="0" x2="{_r(W)}" y1="{_r(bottom)}" y2="{_r(bottom)}"/>')
        out.append(f'<path class="c {key}" d="{"".join(d)}"><title>{escape(name)} per step (max {peak})</title>'
                   f'</path>')
        labels.append(f'<text x="82" y="{_r(top + 10)}" text-anchor="end">{escape(name)}</text>'
                      f'<text class="flag" x="82" y="{_r(top + 22)}" text-anchor="end">max {peak}</text>')
    out.append("</svg>")
    labels.append("</svg>")
    return {"plot": "".join(out), "labels": "".join(labels)}


# where each step's time went (steps[].time_breakdown), bottom to top
# the step split's own colours: none is a colour of COLOURS (the series and flags share one legend with these, and
# `compile` beside `compiled` or `read wait` beside `host read` in one colour read as the same thing)
SPLIT = {"device": "#17becf", "read_wait": "#bcbd22", "launch": "#c5b0d5", "compile": "#ff9896",
         "host": "#ffbb78", "data": "#98df8a", "profiler": "#7f7f7f", "other": "#bbbbbb"}
SPLIT_H = 90.0


def step_split(steps: list[dict[str, Any]]) -> dict[str, str] | None:
    """Each step's time split into its components (steps[].time_breakdown) as a stacked bar of its shares, on the
    timeline's x axis (binned like it: the slowest step of a bin); None when no step has a breakdown."""
    steps = binned(steps, bin_size(len(steps)))
    if not any(s.get(K.STEP_BREAKDOWN) for s in steps):
        return None
    n = max(1, len(steps))
    bw = W / n
    gap = bw * 0.15 if bw > 2 else 0.0
    top, bottom = 4.0, SPLIT_H - 2
    paths: dict[str, list[str]] = {c: [] for c in SPLIT}
    tips = []
    for k, s in enumerate(steps):
        parts = s.get(K.STEP_BREAKDOWN)
        total = sum(parts.values()) if parts else 0.0
        if not total:
            continue
        y = bottom
        for c in SPLIT:
            v = parts.get(c) or 0.0
            if v <= 0:
                continue
            hh = (bottom - top) * v / total
            paths[c].append(f"M{_r(k * bw + gap / 2)} {_r(y)}v-{_r(hh)}h{_r(max(bw - gap, 0.6))}v{_r(hh)}z")
            y -= hh
        tip = f"step {s.get('index')}, wall time {fmt.ms(s.get('wall_time_s'), 2)}: " + ", ".join(f"{c.replace('_', ' ')} {fmt.ms(parts.get(c), 2)}"
                                                     for c in SPLIT if parts.get(c))
        tips.append(f'<rect class="st" x="{_r(k * bw)}" y="0" width="{_r(bw)}" height="{_r(SPLIT_H)}" '
                    f'fill="transparent"><title>{escape(tip)}</title></rect>')
    out = [f'<svg class="plot split" viewBox="0 0 {_r(W)} {_r(SPLIT_H)}" preserveAspectRatio="none" '
           f'height="{_r(SPLIT_H)}" role="img" aria-label="where each step\'s time went">']
    for c, colour in SPLIT.items():
        if paths[c]:
            out.append(f'<path class="s {c}" fill="{colour}" d="{"".join(paths[c])}"/>')
    out += tips
    out.append(f'<line class="axis" x1="0" x2="{_r(W)}" y1="{_r(bottom)}" y2="{_r(bottom)}"/></svg>')
    labels = (f'<svg class="ylabels" viewBox="0 0 86 {_r(SPLIT_H)}" width="86" height="{_r(SPLIT_H)}">'
              f'<text x="82" y="{_r(top + 10)}" text-anchor="end">time split</text>'
              f'<text class="flag" x="82" y="{_r(top + 22)}" text-anchor="end">share of step</text></svg>')
    return {"plot": "".join(out), "labels": labels}


def x_ticks(n: int) -> list[tuple[float, int]]:
    """(percent from the left, step index) for about 10 step-number labels, where the timeline draws that step
    (or its bin)."""
    if n <= 0:
        return []
    k = bin_size(n)
    marks = math.ceil(n / k)
    step = max(1, int(_nice_ceiling(n / 10)))
    return [((i // k + 0.5) * 100.0 / marks, i) for i in range(0, n, step)]


def breakdown(rows: list[dict[str, Any]]) -> str:
    """A capture's per-step breakdown (execution / compile / data / host / idle) as stacked bars."""
    if not rows:
        return ""
    n = len(rows)
    h, left, bottom = 180.0, 60.0, 160.0
    width = 760.0
    bw = (width - left) / n
    peak = max(r.get("duration_ms") or 0.0 for r in rows) or 1.0
    peak = _nice_ceiling(peak)
    out = [f'<svg class="breakdown" viewBox="0 0 {_r(width)} {_r(h)}" width="{_r(width)}" height="{_r(h)}" '
           f'role="img" aria-label="per-step breakdown">']
    for k in range(5):
        v = peak * k / 4
        yy = bottom - (bottom - 10) * v / peak
        out.append(f'<line class="grid" x1="{_r(left)}" x2="{_r(width)}" y1="{_r(yy)}" y2="{_r(yy)}"/>'
                   f'<text x="{_r(left - 4)}" y="{_r(yy + 4)}" text-anchor="end">{_ms_label(v / 1e3)}</text>')
    for k, r in enumerate(rows):
        yy = bottom
        parts = r.get("breakdown_ms") or {}
        tip = f"step {r.get('step')}: {r.get('duration_ms')} ms — " + ", ".join(
            f"{c} {_plain(parts.get(c, 0) or 0.0)} ms" for c in BREAKDOWN)
        out.append(f'<g class="bar"><title>{escape(tip)}</title>')
        for cat, colour in BREAKDOWN.items():
            v = parts.get(cat) or 0.0
            if v <= 0:
                continue
            hh = (bottom - 10) * v / peak
            yy -= hh
            out.append(f'<rect class="b {cat}" x="{_r(left + k * bw + bw * 0.1)}" y="{_r(yy)}" '
                       f'width="{_r(bw * 0.8)}" height="{_r(hh)}" fill="{colour}"/>')
        out.append("</g>")
        if n <= 40 or k % max(1, n // 20) == 0:
            out.append(f'<text x="{_r(left + (k + 0.5) * bw)}" y="{_r(bottom + 14)}" '
                       f'text-anchor="middle">{escape(str(r.get("step")))}</text>')
    out.append("</svg>")
    return "".join(out)


def rank_bars(procs: list[dict[str, Any]]) -> str:
    """Per-rank step time side by side: a bar at each rank's p50 and a whisker to its p90, one row per rank."""
    rows = [p for p in procs if isinstance(p, dict)]
    if not rows:
        return ""
    width, left, row_h = 760.0, 90.0, 22.0
    h = row_h * len(rows) + 24
    peak = max([((p.get("step_time_s") or {}).get("p90") or (p.get("step_time_s") or {}).get("p50") or 0.0)
                for p in rows] + [1e-9])
    peak = _nice_ceiling(peak)
    span = width - left - 30  # room for the last tick label
    out = [f'<svg class="ranks" viewBox="0 0 {_r(width)} {_r(h)}" width="{_r(width)}" height="{_r(h)}" '
           f'role="img" aria-label="step time per rank">']
    for k in range(5):
        x = left + span * k / 4
        out.append(f'<line class="grid" x1="{_r(x)}" x2="{_r(x)}" y1="0" y2="{_r(h - 20)}"/>'
                   f'<text x="{_r(x)}" y="{_r(h - 6)}" text-anchor="middle">{_ms_label(peak * k / 4) if k else "0"}'
                   f'</text>')
    for i, p in enumerate(rows):
        st = p.get("step_time_s") or {}
        y0 = i * row_h + 3
        out.append(f'<text x="{_r(left - 6)}" y="{_r(y0 + 13)}" text-anchor="end">rank {escape(str(p.get("rank")))}'
                   f'</text>')
        p50, p90 = st.get("p50"), st.get("p90")
        if p50 is None:
            continue
        tip = f"rank {p.get('rank')}: p50 {fmt.ms(p50, 2)}, p90 {fmt.ms(p90, 2)}"
        out.append(f'<rect class="rk" x="{_r(left)}" y="{_r(y0)}" width="{_r(span * p50 / peak)}" '
                   f'height="{_r(row_h - 8)}" fill="{COLOURS["train"]}"><title>{escape(tip)}</title></rect>')
        if p90 is not None:
            out.append(f'<line class="axis" x1="{_r(left + span * p50 / peak)}" x2="{_r(left + span * p90 / peak)}" '
                       f'y1="{_r(y0 + (row_h - 8) / 2)}" y2="{_r(y0 + (row_h - 8) / 2)}"/>')
    out.append("</svg>")
    return "".join(out)


def hbars(labels: list[str], values: list[float | None], show, colour: str = COLOURS["train"]) -> str:
    """One horizontal bar per label, to one scale from 0 (a sweep's metric across its jobs); `show` formats a
    value for its label. Missing values get no bar and a "-"."""
    left, row_h = max(150.0, 6.5 * max(map(len, labels), default=0) + 12), 20.0  # whole labels (a sweep's
    width = left + 370.0  # jobs differ by their ends: recipe.batch_size=16 recipe.log_every=1 / =10)
    h = row_h * len(labels) + 4
    peak = max([v for v in values if isinstance(v, (int, float))] + [0.0]) or 1.0
    span = width - left - 70
    out = [f'<svg class="hbars" viewBox="0 0 {_r(width)} {_r(h)}" width="{_r(width)}" height="{_r(h)}" role="img" '
           'style="max-width:100%;height:auto">']
    for i, (label, v) in enumerate(zip(labels, values)):
        y0 = i * row_h + 2
        out.append(f'<text x="{_r(left - 6)}" y="{_r(y0 + 12)}" text-anchor="end">{escape(label)}</text>')
        if isinstance(v, (int, float)):
            w = span * v / peak
            out.append(f'<rect class="hb" x="{_r(left)}" y="{_r(y0)}" width="{_r(max(w, 0.5))}" '
                       f'height="{_r(row_h - 6)}" fill="{colour}"><title>{escape(label)}: {escape(show(v))}</title>'
                       f'</rect><text x="{_r(left + w + 4)}" y="{_r(y0 + 12)}">{escape(show(v))}</text>')
        else:
            out.append(f'<text x="{_r(left + 4)}" y="{_r(y0 + 12)}">-</text>')
    out.append("</svg>")
    return "".join(out)
